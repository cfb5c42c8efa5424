"""TorchManagerRuntime: executes a resolved task over a batched simulation.

Three kinds of graph run per step, each compiled once ahead of time with
``torch.compile(fullgraph=True)`` (or loaded from ``graph_store``) and then called without Dynamo
(``runtime.graph``), or run eagerly with ``compile=False`` (the functions are the same). Before
them, ``read`` copies the sim's arrays into the float32 context and flags diverged lanes.

The runtime's state lives on the simulation's device (``sim.device``). With a host backend (C
MuJoCo: numpy views) the parts between the graphs -- ``read``, ``apply_action``, lane writes --
run in numpy over the same memory; with a device backend (MuJoCo Warp: torch tensors, on the CPU
or a GPU) they run as torch ops on that device, and ``host`` holds numpy copies that
``fetch`` refreshes.

- ``step`` (one per set of observed groups): ``evaluate`` -- command update -> rewards
  (weight * dt) -> terminations -> command advance, episode bookkeeping, events -- then every
  group observed for every lane. One graph, not two: each call has a fixed cost, whatever the
  lane count, which the cold caches after the physics make larger.
- ``reset(mask)``: command resets and reset terms for the masked lanes, full batch, masked.
- ``observe[group](out, mask)``: one graph per observation group, written into ``out`` for the
  masked lanes: lanes that were reset, or rewritten by an event, after the step graph.

The runtime owns the order of things and the buffers; the vector env decides when to reset and
which buffer to observe into.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from motrix_gym.manager.resolver import ResolvedProgram, ResolvedTerm, TaskConfigError, on_device
from motrix_gym.manager.symmetry import TaskMirror, task_mirror
from motrix_gym.math.heightfield import HeightField
from motrix_gym.runtime.compile_helpers import Helpers, RankShare
from motrix_gym.runtime.context import Context
from motrix_gym.runtime.distributed import Ranks
from motrix_gym.runtime.graph import Graph, inductor_options
from motrix_gym.runtime.graph_store import GraphStore
from motrix_gym.sim.backend import SimBackend


def _call(term: ResolvedTerm, env: Context, *args: object) -> Tensor:
    return term.func(env, *args, **term.params)


def _probed(kind: str, term: ResolvedTerm, env: Context) -> object:
    """``term``'s first call, when the env is made: what it raises names the term (a command of
    another kind than it reads, a parameter its code refuses)."""
    try:
        return _call(term, env)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, RuntimeError) as e:
        raise TaskConfigError(f"{kind} term {term.name!r}: {type(e).__name__}: {e}") from e


def _span(lo_hi: tuple[float, float], u: Tensor) -> Tensor:
    return lo_hi[0] + (lo_hi[1] - lo_hi[0]) * u


class torch_threads:  # lower case: used as a context manager, like torch.no_grad
    """Run torch with ``n`` intra-op threads inside the block, restoring the caller's setting.

    The runtime's tensors are small, and OpenMP workers that keep spinning after a parallel op
    compete with MuJoCo's threads for the cores. A class, not a generator: entered on every step,
    it costs fewer calls.
    """

    __slots__ = ("n", "old")

    def __init__(self, n: int) -> None:
        self.n = self.old = n

    def __enter__(self) -> None:
        self.old = torch.get_num_threads()
        if self.old != self.n:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        if self.old != self.n:
            torch.set_num_threads(self.old)


class Observe:
    """``observe[group](out, mask)``: the group's terms for the masked lanes, into ``out``.

    An object rather than a closure, as ``EvaluateObserve``: a graph stored on disk takes the
    object it runs on as an argument (``graph_store``), so that it runs on a new runtime's state.
    """

    def __init__(self, rt: TorchManagerRuntime, group: str) -> None:
        self.rt, self.terms = rt, rt.program.observations[group]
        self.noise, self.dims = rt._noise[group], rt.term_dims[group]
        # Terms with a history or a delay keep, per lane, their last ``history + delay[1]``
        # observations (``kept``, oldest first, term after term): the slices they last gave. The
        # step graph's observation moves each on by one (``advance``); observing a lane again
        # within a step (after an event) replaces its newest entry only; the first observation of
        # an episode (``episode_step`` 0: a reset) fills it, and draws the lane's lag for each
        # delayed term (``lag``; a fixed delay draws nothing); a term with ``delay_every`` draws
        # again as the step graph observes every that many steps of the episode.
        L = rt.ctx.num_lanes
        self.depth = [t.cfg.history + t.cfg.delay[1] for t in self.terms]
        width = sum(k * d for k, d in zip(self.depth, self.dims) if k > 1)
        self.kept = torch.zeros(L, width) if width else None
        delayed = [t.cfg for t in self.terms if t.cfg.delay[1] > 0]
        self.lag = torch.zeros(L, len(delayed), dtype=torch.int64) if delayed else None
        self.lag_lo, self.lag_span = [t.delay[0] for t in delayed], [t.delay[1] - t.delay[0] + 1 for t in delayed]
        self.lag_every = [t.delay_every for t in delayed]

    def __call__(self, out: Tensor, mask: Tensor) -> None:
        self.observe(out, mask, advance=False)  # a constant to Dynamo: a graph's arguments are tensors

    def observe(self, out: Tensor, mask: Tensor, advance: bool) -> None:
        # One draw of noise for the group, sliced per term; each term scaled, noised and clipped
        # before the one concatenation: concatenating first and slicing the result makes
        # Inductor compute every element through a chain of selects.
        ctx, noise = self.rt.ctx, self.noise
        u = None if noise is None else ctx.rng.range(noise[0], noise[1], (sum(self.dims),), mask)
        parts, kept, start, p, j = [], [], 0, 0, 0
        if self.kept is not None:
            fresh = (ctx.episode_step == 0).unsqueeze(-1)  # a lane's first observation of its episode
        if self.lag is not None:
            lag = self._lags(mask, fresh, advance)
        for t, d, k in zip(self.terms, self.dims, self.depth):
            x = _call(t, ctx)
            if t.cfg.scale != 1.0:
                x = x * t.cfg.scale
            if u is not None:
                x = x + u[:, start:start + d]
            if t.cfg.clip is not None:
                x = x.clamp(t.cfg.clip[0], t.cfg.clip[1])
            start += d
            if k == 1:
                parts.append(x)
                continue
            w = k * d
            last = self.kept[:, p:p + w]
            # advancing, the oldest drops out; observing again, the newest is replaced
            earlier = last[:, d:] if advance else last[:, :w - d]
            earlier = torch.where(fresh, x.repeat(1, k - 1), earlier)
            kept += [earlier, x]
            p += w
            if t.cfg.delay[1] == 0:
                parts += [earlier, x]
                continue
            # the ``history`` entries that end ``lag`` before the newest
            h = t.cfg.history
            first = (k - h - lag[:, j]).unsqueeze(-1) + torch.arange(h, device=lag.device)
            entries = torch.cat([earlier, x], dim=-1).reshape(-1, k, d)
            parts.append(entries.gather(1, first.unsqueeze(-1).expand(-1, -1, d)).reshape(-1, h * d))
            j += 1
        m = mask.unsqueeze(-1)
        out.copy_(torch.where(m, torch.cat(parts, dim=-1), out))
        if self.kept is not None:
            self.kept.copy_(torch.where(m, torch.cat(kept, dim=-1), self.kept))

    def _lags(self, mask: Tensor, fresh: Tensor, advance: bool) -> Tensor:
        """Each delayed term's lag per lane: drawn from ``lo..hi`` for the masked lanes that start
        an episode, and, advancing, for those at a multiple of the term's ``delay_every`` steps
        into it (then at most one more than the lane's last); else the lane's last."""
        lo, span = self.lag.new_tensor(self.lag_lo), self.lag.new_tensor(self.lag_span)
        within = advance and any(self.lag_every)  # some lag is drawn again within episodes
        draw = fresh
        if within:
            every = self.lag.new_tensor(self.lag_every)
            due = (every > 0) & (self.rt.ctx.episode_step.unsqueeze(-1) % every.clamp(min=1) == 0)
            draw = fresh | due
        if max(self.lag_span) > 1:
            u = self.rt.ctx.rng.uniform((len(self.lag_lo),), mask & draw.any(-1))
            new = lo + torch.minimum((u * span).long(), span - 1)  # u < 1; the minimum guards rounding
        else:
            new = lo.expand_as(self.lag)
        if within:  # within an episode, no older observation than the step before's
            new = torch.where(fresh, new, torch.minimum(new, self.lag + 1))
        lag = torch.where(draw, new, self.lag)
        self.lag.copy_(torch.where(mask.unsqueeze(-1), lag, self.lag))
        return lag


class EvaluateObserve:
    """The step graph ``(*outs) -> None``: evaluate, then observe ``groups`` into ``outs`` for
    every lane (the RNG state between the two is kept for lanes observed again after an event)."""

    def __init__(self, rt: TorchManagerRuntime, groups: tuple[str, ...]) -> None:
        self.rt, self.observers = rt, tuple(rt._observers[g] for g in groups)

    def __call__(self, *outs: Tensor) -> None:
        rt = self.rt
        ctx = rt.ctx
        rt._evaluate()
        rt._rng_before_obs.copy_(ctx.rng.state)
        for observe, out in zip(self.observers, outs):
            observe.observe(out, rt._all, advance=True)
        rt.done.copy_((rt.terminated | rt.truncated) & rt.real)
        rt.flags.copy_(torch.stack([rt.done.any(), (ctx.diverged & rt.real).any(), (ctx.dirty & rt.real).any()]))


class TorchManagerRuntime:
    """Runs ``program`` on ``sim``. ``lane_offset`` numbers lanes globally for the RNG."""

    def __init__(self, program: ResolvedProgram, sim: SimBackend, compile: bool = True,
                 lane_offset: int = 0, ranks: Ranks | None = None, store: GraphStore | None = None) -> None:
        self.program = program = on_device(program, sim.device)
        self.store = store
        self.ranks = ranks or Ranks()
        self.sim = sim
        self.compiled = compile
        self._graphs: list[Graph] = []
        self._check_guards = False
        self._mirror: TaskMirror | None = None
        self.lane_offset = lane_offset
        self.device, self.on_host = sim.device, not sim.tensors
        with torch.device(self.device):  # every tensor the runtime and its terms make
            self._build(program, sim)

    def _build(self, program: ResolvedProgram, sim: SimBackend) -> None:
        task, m, dev = program.task, program.model, self.device
        n = self.num_envs = sim.num_envs
        na = len(program.action.joints.names)
        ctx = self.ctx = Context(n, m.nq, m.nv, m.nbody, m.nsensordata, na, task.step_dt,
                                 task.max_episode_steps, program.default_qpos, device=dev)
        L = ctx.num_lanes
        limits = torch.full((m.nq, 2), float("inf"))
        limits[:, 0] = -float("inf")
        noise_mask = torch.zeros(m.nq)
        for j, q in zip(program.hinge.ids.tolist(), program.hinge.qpos.tolist()):
            if m.joint_limited[j]:
                limits[q] = torch.tensor(m.joint_range[j])
            noise_mask[q] = 1.0
        ctx.qpos_limits, ctx.joint_noise_mask = limits, noise_mask
        ctx.body_names = program.model.body_names
        ctx.robot_body_names = tuple(program.model.body_names[b] for b in program.robot_bodies)
        ctx.joint_names = program.hinge.names
        ctx.root_body, ctx.root_qpos, ctx.root_dof = program.root.body, program.root.qpos, program.root.dof
        if program.balls:
            ctx.ball_radius = torch.full((ctx.num_lanes,), float(program.balls[0].cfg.radius))
        hm = program.model.heightfield
        if hm is not None:
            ctx.terrain = HeightField(torch.from_numpy(hm.heights).to(dev), hm.origin, hm.spacing)
            ctx.terrain_tiles = torch.from_numpy(hm.tile_centers).float().to(dev)
            ctx.terrain_tile_size = hm.tile_size
        for name in program.reads:
            if not hasattr(ctx, name):
                ctx.add_read(name, tuple(sim.arrays[name].shape[1:]))
        self.lane_ids = torch.arange(L, dtype=torch.int64) + self.lane_offset
        self.real = torch.arange(L) < n  # padding lanes are never reset or reported

        for c in program.commands:
            try:
                ctx.commands[c.name] = c.func(ctx, **c.params)
            except ValueError as e:  # the term's own check of its parameters
                raise TaskConfigError(f"command term {c.name!r}: {e}") from None

        self.reward_names = tuple(t.name for t in program.rewards)
        self.termination_names = tuple(t.name for t in program.terminations)
        self.time_out_flags = torch.tensor([bool(t.cfg.time_out) for t in program.terminations], dtype=torch.bool)
        self.reward_weights = [float(t.cfg.weight) * task.step_dt for t in program.rewards]
        self.reward_terms = torch.zeros(L, len(program.rewards))
        self.reward = torch.zeros(L)
        self.termination_terms = torch.zeros(L, len(program.terminations), dtype=torch.bool)
        self.terminated, self.truncated = ctx.terminated, ctx.truncated
        self.done = torch.zeros(L, dtype=torch.bool)  # terminated or truncated, real lanes only
        # Written by the step graph: whether any real lane ended, diverged, or was rewritten by an
        # event; read in one call instead of three reductions.
        self.flags = torch.zeros(3, dtype=torch.bool)
        self.any_ended = self.any_diverged = False  # the first two flags, after each step
        self.event_steps = [(float(e.cfg.interval_s[0]) / task.step_dt, float(e.cfg.interval_s[1]) / task.step_dt)
                            for e in program.events]
        self.event_timers = torch.zeros(L, len(program.events))
        self.episode_sums = torch.zeros(L, len(program.rewards))
        self.episode_return = torch.zeros(L)

        act = program.action
        # default + scale * action -> ctrl[:, ids]; as tensors on the device, and numpy views of them
        self._act = (ctx.default_qpos[act.joints.qpos].clone(), act.scale.float().to(dev),
                     act.actuator_ids.to(dev))
        self._act_identity = act.actuator_ids.tolist() == list(range(m.nu))
        if self.on_host:
            self._act_default, self._act_scale, self._act_ids = (t.numpy() for t in self._act)
            self._target = np.zeros((n, na), np.float32)
            self._delayed = np.zeros((n, na), np.float32)
        # each lane's targets lag its actions by ``action_delay`` steps (drawn per episode); with a
        # lag of more than one the actions before ``last_action`` are kept, newest first
        k = act.max_delay
        self.action_delay = torch.zeros(L, dtype=torch.int64)
        self.older_actions = torch.zeros(L, k - 1, na) if k > 1 else None
        # Per-lane physical parameters drawn at reset (friction, mass scale, centre-of-mass
        # offset, stiffness and damping scales), written into the simulation for the reset lanes.
        rand = program.randomization
        self.lane_params = torch.ones(L, 12 if rand is not None and rand.cfg.ball is not None else 7)
        self.lane_params[:, 2:5] = 0.0

        self.failed = torch.zeros(L, dtype=torch.bool)  # lanes MuJoCo flagged at the last physics call
        # The buffers the env and the step read or write outside the graphs. On the host, numpy
        # views made once: numpy's small ops and indexing dispatch faster than torch's, and each
        # Tensor.numpy() is a call. On a device, numpy copies that ``fetch`` refreshes.
        self._host_tensors = {name: t for name, t in (
            ("qpos", ctx.qpos), ("qvel", ctx.qvel), ("action", ctx.action), ("last_action", ctx.last_action),
            ("episode_step", ctx.episode_step), ("diverged", ctx.diverged), ("failed", self.failed),
            ("real", self.real), ("reward", self.reward), ("terminated", self.terminated),
            ("truncated", self.truncated), ("done", self.done), ("episode_sums", self.episode_sums),
            ("episode_return", self.episode_return), ("termination_terms", self.termination_terms),
            ("action_delay", self.action_delay), ("lane_params", self.lane_params),
            *((("older_actions", self.older_actions),) if self.older_actions is not None else ()))}
        self.host: dict[str, np.ndarray] = {name: t.cpu().numpy() if self.on_host else t.cpu().numpy().copy()
                                            for name, t in self._host_tensors.items()}
        # for read(): each read field's name and context buffer (of the real lanes), as a numpy view on the host
        self._reads = [(name, getattr(ctx, name)[:n].numpy() if self.on_host else getattr(ctx, name)[:n])
                       for name in program.reads]
        self.read()
        # each term's width as its function returns it; in the observation, times its history
        self.term_dims = {g: self._probe(g, terms) for g, terms in program.observations.items()}
        self.obs_dims = {g: [d * t.cfg.history for t, d in zip(terms, self.term_dims[g])]
                         for g, terms in program.observations.items()}
        self._noise = {g: self._noise_tables(terms, self.term_dims[g])
                       for g, terms in program.observations.items()}
        self._probe_scalar("reward", program.rewards, torch.float32)
        self._probe_scalar("termination", program.terminations, torch.bool)

        self.evaluate = self._graph(self._evaluate, "evaluate", ())  # alone only in tests
        self._reset_graph = self._graph(self._reset, "reset", ())
        # commands whose sampling depends on a statistic of every lane (see reset)
        self._shared = [c for c in ctx.commands.values() if getattr(c, "stats", None) is not None]
        self._stats_graph = self._graph(self._shared_stats, "shared_stats", ()) if self._shared else None
        self._observers = {g: Observe(self, g) for g in program.observations}
        self.observe_graphs = {g: self._graph(o.__call__, f"observe[{g}]", (g,)) for g, o in self._observers.items()}
        self._step_graphs: dict[tuple[str, ...], Graph] = {}
        self._all = torch.ones(L, dtype=torch.bool)
        self._rng_before_obs = ctx.rng.state.clone()

    def fetch(self, *names: str) -> None:
        """Bring ``host[name]`` up to date for each of ``names`` (on the host they are views: nothing
        to do; on a device, one copy each)."""
        if not self.on_host:
            for name in names:
                np.copyto(self.host[name], self._host_tensors[name].cpu().numpy())

    def _graph(self, fn: Callable, name: str, groups: tuple[str, ...]) -> Graph:
        """A graph of this runtime that observes ``groups``; compiled ones get a symbolic lane
        dimension (see lane_tensors), and vector code where the task asks for it there."""
        g = Graph(fn, self.compiled, lanes=self.ctx.num_lanes, name=name, store=self.store,
                  lane_tensors=self.lane_tensors, options=inductor_options(self.program.task.vector_graph(groups)))
        g.check(self._check_guards)
        self._graphs.append(g)
        return g

    def __getstate__(self) -> dict:
        """What compiled graphs record of this runtime to check their guards on another: the
        state they read, without the simulation and the graphs themselves."""
        skip = {"sim", "_graphs", "_step_graphs", "evaluate", "_reset_graph", "_stats_graph", "observe_graphs",
                "host", "_reads", "store"}
        return {k: v for k, v in vars(self).items() if k not in skip}

    def lane_tensors(self) -> list[Tensor]:
        """The per-lane state the graphs read and write: every tensor attribute of the context,
        its RNG, this runtime, the commands and the observers (histories) whose leading dimension
        is the padded lane count.

        Compiled graphs see that dimension as symbolic, so one compiled version (and Inductor's
        cached code on disk) serves every lane count. A constant whose leading dimension happens
        to equal the lane count is taken for per-lane too: that only costs a fresh compile at
        another lane count, never a different result."""
        L, seen, out = self.ctx.num_lanes, set(), []
        for owner in (self.ctx, self.ctx.rng, self, *self.ctx.commands.values(), *self._observers.values()):
            for value in vars(owner).values():
                if isinstance(value, Tensor) and value.dim() and value.shape[0] == L and id(value) not in seen:
                    seen.add(id(value))
                    out.append(value)
        return out

    def kept(self, mask: Tensor) -> Callable[[], None]:
        """The per-lane state of the lanes in ``mask`` now; the function returned puts it back.
        For lanes that sit out a step (NEXT_STEP's restarting lanes): the step's terms evaluate
        every lane, and their reset must find these lanes as the step before left them."""
        rows = torch.nonzero(mask).flatten()
        saved = [(t, t[rows]) for t in self.lane_tensors()]

        def restore() -> None:
            for t, old in saved:
                t[rows] = old
        return restore

    @property
    def check_guards(self) -> bool:
        """Whether compiled graphs run through Dynamo with their guards checked (off by default).

        Each compiled graph has one version, over buffers this runtime owns and never replaces
        or reshapes: its guards can only pass, so graphs skip Dynamo (``runtime.graph``). Tests
        turn the checks on to prove that."""
        return self._check_guards

    @check_guards.setter
    def check_guards(self, on: bool) -> None:
        self._check_guards = on
        for g in self._graphs:
            g.check(on)

    def graphs(self, groups: tuple[str, ...]) -> list[Graph]:
        """The graphs an env observing ``groups`` runs."""
        out = [self.step_graph(groups), self._reset_graph, *(self.observe_graphs[g] for g in groups)]
        return out + ([self._stats_graph] if self._stats_graph is not None else [])

    def unstored(self, groups: tuple[str, ...]) -> list[str]:
        """The graphs of ``graphs(groups)`` that nothing is stored for: those a start compiles."""
        return [g.name for g in self.graphs(groups) if g.store is not None and not g.store.has(g.name)]

    def warmup(self, groups: tuple[str, ...], progress: bool = True, *, only: list[str] | None = None,
               away: Helpers | RankShare | None = None) -> None:
        """Compile or load every graph now, or the graphs named ``only`` (each runs once; the
        state is left for the first reset to overwrite). ``away``: helper processes or the other
        ranks compiling the graphs ``away.names`` (``compile_helpers``); this one compiles the
        rest, then loads theirs."""
        from tqdm import tqdm

        L, dev = self.ctx.num_lanes, self.device
        mask = torch.ones(L, dtype=torch.bool, device=dev)
        outs = [torch.zeros(L, sum(self.obs_dims[g]), device=dev) for g in groups]
        jobs = [("step", self.step_graph(groups), outs),
                ("reset", self._reset_graph, (mask,))]
        jobs += [(f"observe[{g}]", self.observe_graphs[g], (torch.zeros(L, sum(self.obs_dims[g]), device=dev), mask))
                 for g in groups]
        if self._stats_graph is not None:
            jobs.append(("shared statistics", self._stats_graph, (mask,)))
        jobs = [j for j in jobs if only is None or j[1].name in only]
        elsewhere = set(away.names) if away is not None else set()
        jobs = [j for j in jobs if j[1].name not in elsewhere] + [j for j in jobs if j[1].name in elsewhere]
        bar = tqdm(jobs, desc="torch.compile", unit="graph", disable=not progress, leave=False)
        try:
            for name, fn, args in bar:
                if away is not None and fn.name in elsewhere:
                    bar.set_postfix_str(f"waiting for {away.label} compiling {', '.join(sorted(elsewhere))}")
                    away.wait()
                    away = None
                start = fn.first_start()
                if start == "launch":
                    doing = "loading the stored launch"
                elif start == "graph":
                    # the C++ library is Inductor's cache's, built by this torch install or built now
                    doing = "loading the stored graph (seconds more where its C++ is built for this torch install)"
                else:
                    doing = "tracing and compiling, tens of seconds; stored for later starts at any lane count"
                    if away is not None:
                        doing += f"; {len(elsewhere)} more graph(s) in {away.label}"
                bar.set_postfix_str(f"{name}: {doing}")
                fn(*args)
            if away is not None:  # nothing of theirs to load, but ranks wait for each other
                away.wait()
                away = None
        finally:
            if away is not None:
                away.close()

    def mirror(self) -> TaskMirror:
        """The task's reflections through the robot's sagittal plane (``manager/symmetry.py``),
        made at the first call; a TaskConfigError where the task does not say how it mirrors."""
        if self._mirror is None:
            self._mirror = task_mirror(self.program, self.term_dims, self.sim.device)
        return self._mirror

    def observation_columns(self, group: str) -> dict[str, slice]:
        """Each term of observation group ``group`` and its columns in the group's vector."""
        columns, start = {}, 0
        for t, d in zip(self.program.observations[group], self.obs_dims[group]):
            columns[t.name] = slice(start, start + d)
            start += d
        return columns

    # ----------------------------------------------------------------------------- validation
    def _probe(self, group: str, terms: tuple[ResolvedTerm, ...]) -> list[int]:
        dims = []
        for t in terms:
            out = _probed(f"observation[{group}]", t, self.ctx)
            if not (isinstance(out, Tensor) and out.dim() == 2 and out.shape[0] == self.ctx.num_lanes
                    and out.dtype == torch.float32):
                shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
                raise TaskConfigError(f"observation[{group}] term {t.name!r}: must return a float32 "
                                      f"(lanes, d) tensor, got {shape}")
            dims.append(out.shape[1])
        return dims

    def _probe_scalar(self, kind: str, terms: tuple[ResolvedTerm, ...], dtype: torch.dtype) -> None:
        for t in terms:
            out = _probed(kind, t, self.ctx)
            if not (isinstance(out, Tensor) and tuple(out.shape) == (self.ctx.num_lanes,)
                    and out.dtype == dtype):
                got = (tuple(out.shape), out.dtype) if isinstance(out, Tensor) else type(out).__name__
                raise TaskConfigError(f"{kind} term {t.name!r}: must return a {dtype} (lanes,) tensor, "
                                      f"got {got}")

    @staticmethod
    def _noise_tables(terms: tuple[ResolvedTerm, ...], dims: list[int]) -> tuple[Tensor, Tensor] | None:
        if all(t.cfg.noise is None for t in terms):
            return None
        lo = torch.cat([torch.full((d,), (t.cfg.noise or (0.0, 0.0))[0]) for t, d in zip(terms, dims)])
        hi = torch.cat([torch.full((d,), (t.cfg.noise or (0.0, 0.0))[1]) for t, d in zip(terms, dims)])
        return lo, hi

    # ----------------------------------------------------------------------------- graphs
    def read(self) -> None:
        """Copy the sim's state into the float32 context; flag lanes that diverged: MuJoCo raised
        or warned (``self.failed``), values are not finite, or a speed exceeds ``max_speed``.
        Diverged lanes are terminated this step; their numbers are kept finite (zeros) meanwhile.

        In numpy rather than a graph: one cast per field, right after the physics, costs less
        than a compiled graph's call (docs/performance.md). Frames, velocities and sensors are smooth functions of
        the state: when every position is finite and within MuJoCo's bound of a valid state
        (1e10) and every speed within ``max_speed``, they are finite too. Otherwise each field is
        checked: its sum is finite exactly when all its values are (or it overflowed: zeroing then
        changes nothing). On a device the same, in torch, and every field is cleaned without a
        check (a check would wait for the device)."""
        if not self.on_host:
            return self._read_tensors()
        n, a = self.num_envs, self.sim.arrays
        qpos = a["qpos"]
        ok = np.isfinite(qpos).all(-1) & (np.abs(a["qvel"]).max(-1) <= self.program.task.max_speed)  # NaN: False
        np.logical_or(~ok, self.host["failed"][:n], out=self.host["diverged"][:n])
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float32's range -> inf -> 0
            for name, dst in self._reads:
                np.copyto(dst, a[name], casting="same_kind")
            if ok.all() and np.abs(qpos).max() < 1e10:
                return
            for _, dst in self._reads:
                if not np.isfinite(dst.sum()):
                    np.nan_to_num(dst, copy=False, nan=0.0, posinf=0.0, neginf=0.0)

    def _read_tensors(self) -> None:
        n, a, ctx = self.num_envs, self.sim.arrays, self.ctx
        ok = torch.isfinite(a["qpos"]).all(-1) & (a["qvel"].abs().amax(-1) <= self.program.task.max_speed)
        torch.logical_or(~ok, self.failed[:n], out=ctx.diverged[:n])
        for name, dst in self._reads:
            dst.copy_(a[name])
            torch.nan_to_num(dst, nan=0.0, posinf=0.0, neginf=0.0, out=dst)

    def _evaluate(self) -> None:
        ctx = self.ctx
        ctx.episode_step.add_(1)
        for c in ctx.commands.values():
            c.update(ctx)
        terms = torch.stack([_call(t, ctx) * w for t, w in zip(self.program.rewards, self.reward_weights)], -1)
        terms = torch.where(ctx.diverged.unsqueeze(-1), 0.0, terms)
        self.reward_terms.copy_(terms)
        self.reward.copy_(terms.sum(-1))
        self.episode_sums.add_(terms)
        self.episode_return.add_(self.reward)
        flags = torch.stack([_call(t, ctx) for t in self.program.terminations], -1)
        self.termination_terms.copy_(flags)
        terminated = (flags & ~self.time_out_flags).any(-1)
        self.terminated.copy_(terminated)
        self.truncated.copy_((flags & self.time_out_flags).any(-1) & ~terminated)
        for c in ctx.commands.values():
            c.advance(ctx)
        self._events()

    def _events(self) -> None:
        """Count down each lane's event timers; fire the events that reach zero, redraw those."""
        ctx = self.ctx
        self.event_timers.sub_(1.0)
        for k, e in enumerate(self.program.events):
            fire = (self.event_timers[:, k] <= 0) & ~ctx.diverged
            _call(e, ctx, fire)
            ctx.dirty.logical_or_(fire)
            self._redraw_timer(k, fire)

    def _redraw_timer(self, k: int, mask: Tensor) -> None:
        """Steps until event ``k`` fires next, uniform in its interval, for the lanes in ``mask``."""
        lo, hi = self.event_steps[k]
        timer = self.event_timers[:, k]
        timer.copy_(torch.where(mask, self.ctx.rng.range(lo, hi, (), mask), timer))

    def _reset(self, mask: Tensor) -> None:
        ctx = self.ctx
        m = mask.unsqueeze(-1)
        if self.program.randomization is not None:  # first: resets place the robot on the drawn ball
            self._draw_lane_params(mask)
        for c in ctx.commands.values():
            c.reset(ctx, mask)
        for t in self.program.resets:
            _call(t, ctx, mask)
        for c in ctx.commands.values():  # commands that read the state the resets wrote
            if hasattr(c, "placed"):
                c.placed(ctx, mask)
        k = self.program.action.max_delay
        if k:  # k - floor(u * (k + 1)): uniform on 0..k
            drawn = k - torch.clamp((ctx.rng.uniform((), mask) * (k + 1)).long(), max=k)
            self.action_delay.copy_(torch.where(mask, drawn, self.action_delay))
        if self.older_actions is not None:
            self.older_actions.masked_fill_(mask[:, None, None], 0.0)
        ctx.episode_step.masked_fill_(mask, 0)
        ctx.action.masked_fill_(m, 0.0)
        ctx.last_action.masked_fill_(m, 0.0)
        self.episode_sums.masked_fill_(m, 0.0)
        self.episode_return.masked_fill_(mask, 0.0)
        for k in range(len(self.event_steps)):
            self._redraw_timer(k, mask)
        ctx.dirty.masked_fill_(mask, False)  # the reset writes these lanes anyway

    def step_graph(self, groups: tuple[str, ...]) -> Graph:
        """The graph ``(*outs) -> None``: evaluate, then observe ``groups`` into ``outs`` for every
        lane (the RNG state between the two is kept for lanes observed again after an event)."""
        if groups not in self._step_graphs:
            step = EvaluateObserve(self, groups)
            self._step_graphs[groups] = self._graph(step.__call__, f"step[{','.join(groups)}]", groups)
        return self._step_graphs[groups]

    # ----------------------------------------------------------------------------- step parts
    def seed(self, seed: int) -> None:
        self.ctx.rng.seed(seed, self.lane_ids)

    def restart(self) -> None:
        """Forget what the commands learned across episodes (curricula, the adaptive sampler's
        failure statistics): a seeded reset of every lane replays the same run."""
        for c in self.ctx.commands.values():
            if hasattr(c, "restart"):
                c.restart()

    def apply_action(self, actions: np.ndarray) -> None:
        """``actions`` (num_envs, na) float32 -> position targets in the sim's ctrl. In numpy, over
        the same memory: right after the physics a few small numpy ops dispatch faster than
        torch's (on a device: ``actions`` a tensor there, the same in torch). The targets are
        float32, as the terms see them."""
        if not self.on_host:
            return self._apply_action_tensors(actions)
        n, target, k = self.num_envs, self._target, self.program.action.max_delay
        action, last, delay = self.host["action"], self.host["last_action"], self.host["action_delay"][:n]
        if k > 1:
            older = self.host["older_actions"]
            older[:n, 1:] = older[:n, :-1]  # numpy copies overlapping slices as if through a buffer
            older[:n, 0] = last[:n]
        np.copyto(last, action)
        clip = self.program.action.clip
        np.clip(actions, -clip, clip, out=action[:n])
        if k == 1:  # delayed lanes act on the previous step's action
            np.copyto(self._delayed, action[:n])
            np.copyto(self._delayed, last[:n], where=delay[:, None] == 1)
            np.multiply(self._act_scale, self._delayed, out=target)
        elif k > 1:  # each lane on its action from action_delay steps before
            recent = np.concatenate([action[:n, None], last[:n, None], older[:n]], axis=1)
            np.multiply(self._act_scale, np.take_along_axis(recent, delay[:, None, None], axis=1)[:, 0], out=target)
        else:
            np.multiply(self._act_scale, action[:n], out=target)
        np.add(self._act_default, target, out=target)
        if self._act_identity:
            np.copyto(self.sim.arrays["ctrl"], target)
        else:
            self.sim.arrays["ctrl"][:, self._act_ids] = target

    def _apply_action_tensors(self, actions: Tensor) -> None:
        n, ctx, k = self.num_envs, self.ctx, self.program.action.max_delay
        default, scale, ids = self._act
        if k > 1:
            older = self.older_actions
            older[:n, 1:] = older[:n, :-1].clone()
            older[:n, 0] = ctx.last_action[:n]
        ctx.last_action.copy_(ctx.action)
        clip = self.program.action.clip
        torch.clamp(actions, -clip, clip, out=ctx.action[:n])
        act = ctx.action[:n]
        if k == 1:  # delayed lanes act on the previous step's action
            act = torch.where(self.action_delay[:n, None] == 1, ctx.last_action[:n], act)
        elif k > 1:  # each lane on its action from action_delay steps before
            recent = torch.cat([act[:, None], ctx.last_action[:n, None], older[:n]], dim=1)
            act = recent.gather(1, self.action_delay[:n, None, None].expand(-1, 1, act.shape[1]))[:, 0]
        target = default + scale * act
        ctrl = self.sim.arrays["ctrl"]
        if self._act_identity:
            ctrl.copy_(target)
        else:
            ctrl[:, ids] = target.to(ctrl.dtype)

    def read_lanes(self, ids: np.ndarray | Tensor) -> None:
        """Copy lanes ``ids`` (just written by a reset or an event, so finite) from the sim."""
        arrays = self.sim.arrays
        for name, dst in self._reads:
            dst[ids] = arrays[name][ids]
        if self.on_host:
            self.host["diverged"][ids] = False
        else:
            self.ctx.diverged[ids] = False

    def step(self, actions: np.ndarray, outs: dict[str, Tensor], ids: np.ndarray | None = None) -> None:
        """Apply actions, run the physics for lanes ``ids`` (all when None), evaluate, and observe
        every lane into ``outs`` (group -> (num_lanes, d) buffer)."""
        self.apply_action(actions)
        if not self.on_host and ids is not None:
            ids = torch.as_tensor(ids, device=self.device)
        failed = self.sim.step(self.program.task.decimation, ids)
        flagged = self.host["failed"] if self.on_host else self.failed
        flagged[:] = False
        flagged[failed] = True
        self.read()
        self.step_graph(tuple(outs))(*outs.values())
        self.any_ended, self.any_diverged, dirty = self.flags.tolist()
        if dirty:
            self._write_dirty(outs)

    def _write_dirty(self, outs: dict[str, Tensor]) -> None:
        """Write lanes whose state an event rewrote into the simulation, then observe them again
        with the RNG draws of their first observation undone: they see the rewritten state, and
        their random streams advance exactly as if they had been observed once, afterwards."""
        ctx = self.ctx
        dirty = ctx.dirty.clone()
        self._write_lanes(dirty, full=False)
        ctx.dirty.fill_(False)
        ctx.rng.state.copy_(torch.where(dirty, self._rng_before_obs, ctx.rng.state))
        for g, out in outs.items():
            self.observe(g, out, dirty)

    def _draw_lane_params(self, mask: Tensor) -> None:
        """The physical parameters of the lanes in ``mask`` (``Randomization``), from the lane RNG,
        into ``lane_params``: friction, mass scale, centre-of-mass offset (3), stiffness and
        damping scales, then the ball's radius, mass, friction, softness and damping."""
        r = self.program.randomization
        cfg, ball = r.cfg, r.cfg.ball
        u = self.ctx.rng.uniform((self.lane_params.shape[1],), mask)
        cols = [_span(cfg.friction, u[:, 0:1]), _span(cfg.mass_scale, u[:, 1:2]),
                cfg.com_offset * (2.0 * u[:, 2:5] - 1.0), _span(cfg.gain_scale, u[:, 5:7])]
        if ball is not None:
            cols += [_span(getattr(ball, k), u[:, 7 + i:8 + i])
                     for i, k in enumerate(("radius", "mass", "friction", "softness", "damping"))]
        m = mask.unsqueeze(-1)
        self.lane_params.copy_(torch.where(m, torch.cat(cols, dim=-1), self.lane_params))
        if ball is not None:
            self.ctx.ball_radius.copy_(torch.where(mask, self.lane_params[:, 7], self.ctx.ball_radius))

    def _write_lanes(self, mask: Tensor, full: bool) -> None:
        """Write the context's qpos/qvel of the real lanes in ``mask`` into the simulation
        (``full``: as a reset), forward them and read them back."""
        if self.on_host:
            ids = np.flatnonzero(mask.numpy()[:self.num_envs]).astype(np.int32)
            qpos, qvel, params = self.host["qpos"], self.host["qvel"], self.host["lane_params"]
        else:
            ids = torch.nonzero(mask[:self.num_envs]).flatten()
            qpos, qvel, params = self.ctx.qpos, self.ctx.qvel, self.lane_params
        if full and self.program.randomization is not None and len(ids):
            r, p = self.program.randomization, params[ids].astype(np.float64) if self.on_host else params[ids].double()
            self.sim.randomize(ids, r.friction_geoms, r.bodies, r.root, friction=p[:, 0], mass_scale=p[:, 1],
                               com_offset=p[:, 2:5], kp_scale=p[:, 5], kd_scale=p[:, 6])
            if r.ball is not None:
                b = r.ball
                self.sim.randomize_ball(ids, b.body, b.geom, b.joint.dof, radius=p[:, 7], mass=p[:, 8],
                                        friction=p[:, 9], softness=p[:, 10], damping=p[:, 11])
        self.sim.reset(ids, qpos[ids], qvel[ids], full=full)
        self.read_lanes(ids)

    def _shared_stats(self, mask: Tensor) -> None:
        for c in self._shared:
            c.stats.copy_(c.shared_stats(self.ctx, mask))

    def reset(self, mask: Tensor) -> None:
        """Reset the lanes in ``mask`` (bool, (num_lanes,)): runtime state, then the sim. The
        statistics shared by every lane are gathered first and summed over the ranks; in a
        distributed run every rank resets whenever any rank does (its mask may be empty)."""
        mask = torch.from_numpy(mask.numpy() & self.host["real"]) if self.on_host else mask.to(self.device) & self.real
        if self._stats_graph is not None:
            self._stats_graph(mask)
            for c in self._shared:
                self.ranks.sum_(c.stats)
        self._reset_graph(mask)
        self._write_lanes(mask, full=True)

    def observe(self, group: str, out: Tensor, mask: Tensor) -> None:
        self.observe_graphs[group](out, mask.to(self.device))

"""MotrixVectorEnv: a native ``gymnasium.vector.VectorEnv`` over one batched runtime.

    envs = gym.make_vec("Motrix/G1WalkFlat-v0", num_envs=64)
    obs, info = envs.reset(seed=0)
    obs, rew, terminated, truncated, info = envs.step(envs.action_space.sample())

Contracts (see docs/architecture.md):

- Autoreset: ``SAME_STEP`` (default), ``NEXT_STEP`` and ``DISABLED`` with Gymnasium's semantics.
  In SAME_STEP the last observation of lanes that ended is in ``info["final_obs"]`` (object array,
  mask ``info["_final_obs"]``) and ``env.final_obs`` (dense, per group, torch).
- Info: only per-lane arrays with a ``_name`` mask. For lanes whose episode ended:
  ``reward_terms`` (episode sum per reward term), ``termination_terms`` (which fired) and, in
  SAME_STEP inside ``final_info``, ``episode`` = {``r``, ``l``}. The top-level ``episode`` key is
  never written (``RecordEpisodeStatistics`` owns it). Aggregates are in ``env.log``.
- Actions: shape ``(num_envs, action_dim)``, any real dtype (cast to float32), finite; values
  outside the action space are clipped to it. Anything else raises ValueError before any state
  changes.
- Outputs: ``output="numpy"`` or ``"torch"``; float32 observations and rewards, bool flags.
  ``copy=True`` returns arrays that are never written later; with ``copy=False`` observations are
  views of a double buffer, valid until the step after next.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from torch import Tensor

from motrix_gym.arguments import is_int
from motrix_gym.manager.config import TaskConfig
from motrix_gym.manager.resolver import check_groups, resolve
from motrix_gym.manager.terms import term_params
from motrix_gym.mdp.markers import Arrows, Spheres
from motrix_gym.runtime.compile_helpers import Build, Helpers, RankShare
from motrix_gym.runtime.cpu_probe import CpuProbe, check_compiler
from motrix_gym.runtime.distributed import Ranks
from motrix_gym.runtime.graph import import_graph_loader, inductor_options
from motrix_gym.runtime.graph_store import GraphStore
from motrix_gym.runtime.runtime import TorchManagerRuntime
from motrix_gym.runtime.runtime import torch_threads as torch_threads_ctx
from motrix_gym.sim.backend import BACKENDS, make_sim, usable_cores
from motrix_gym.sim.scene import build_model, build_sensing_model, height_map, model_info

OUTPUTS = ("numpy", "torch")


class MotrixVectorEnv(VectorEnv):
    """``num_envs`` lanes of one task, stepped as one batch.

    Args:
        task: a registered task name (``"G1WalkFlat"``) or a TaskConfig.
        num_envs: number of lanes.
        output: ``"numpy"`` or ``"torch"``.
        copy: return observations that are never overwritten (default) or zero-copy views.
        autoreset_mode: an ``AutoresetMode`` (or its value string).
        obs_groups: observation groups to return; one group gives a Box, several a Dict.
        compile: run the runtime's graphs through ``torch.compile`` (default) or eagerly.
        compile_processes: processes that compile the graphs nothing is stored for yet: this one
            and up to ``compile_processes - 1`` helpers (``runtime/compile_helpers.py``). Default:
            the cores this process may use; 1 compiles every graph here.
        device: with backend ``"warp"``, where the simulation, the runtime and torch outputs live
            (``"cpu"`` or ``"cuda"``, ``"cuda:N"``); with ``"mujoco"``, where torch outputs are
            copied to (the simulation and runtime run on the CPU).
        nthread: MuJoCo threads (default: all cores this process may use; backend "mujoco").
        backend: ``"mujoco"`` (C MuJoCo's batch on CPU threads) or ``"warp"`` (MuJoCo Warp: on a
            GPU, or on Warp's CPU device, float32 and single-threaded, for parity tests). Default:
            ``"warp"`` for a CUDA device, else ``"mujoco"``.
        torch_threads: torch intra-op threads while the runtime runs (the caller's setting is
            restored after each call).
        lane_offset: global number of lane 0, for RNG streams shared across processes.
        render_mode: None, ``"rgb_array"`` (``render()`` gives one frame per lane, each drawn
            when read; ``width`` x ``height`` pixels per lane, default 640 x 480, the keywords of
            Gymnasium's MuJoCo envs) or ``"human"`` (a window on one lane, ``viewer_lane`` (0 unless
            set), MuJoCo's viewer, drawn at every ``reset`` and ``step`` and paced to real time;
            ``viewer`` is the window once open;
            with ``distributed``, rank 0's only; the window takes its size from the viewer, so
            ``width`` and ``height`` are refused).
            ``render_markers`` draws what the commands show (``mdp/markers.py``: a velocity
            command's arrows, a motion's reference bodies).
        progress: show a progress bar while the runtime compiles.
        current_kinematics: after the physics substeps, bring body poses, velocities and sensors
            to the new state (default), through a cut-down sensing model (see
            ``scene.build_sensing_model``). False reads them from the physics batch, where they
            describe the start of the last substep (as a plain ``mj_step`` leaves them); its
            model then computes sensors every substep, which costs about as much as that pass.
        **task_options: make-time options of the task.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array", "human"],
                "render_fps": 50}

    def __init__(self, task: str | TaskConfig, num_envs: int = 1, *, output: str = "numpy",
                 copy: bool = True, autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
                 obs_groups: tuple[str, ...] | str = ("policy",), compile: bool = True,
                 device: str | torch.device = "cpu", nthread: int | None = None, torch_threads: int = 1,
                 lane_offset: int = 0, render_mode: str | None = None, width: int | None = None,
                 height: int | None = None,
                 render_markers: bool = True, progress: bool = True,
                 current_kinematics: bool = True, distributed: bool = False, backend: str | None = None,
                 compile_processes: int | None = None, **task_options: Any) -> None:
        self.closed = True  # Gymnasium's flag; True until fully built, so close()/__del__ on a failed init are safe
        if not is_int(num_envs) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        flags = {"copy": copy, "compile": compile, "render_markers": render_markers, "progress": progress,
                 "current_kinematics": current_kinematics, "distributed": distributed}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be a bool (True or False), got {value!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ValueError(f"autoreset_mode must be one of {[m.value for m in AutoresetMode]}, "
                             f"got {autoreset_mode!r}") from None
        if render_mode not in (None, "rgb_array", "human"):
            raise ValueError(f"render_mode must be None, 'rgb_array' or 'human', got {render_mode!r}")
        if render_mode == "human" and (width, height) != (None, None):
            raise ValueError(f"width and height size render_mode='rgb_array' frames; the 'human' window takes its "
                             f"size from MuJoCo's viewer (drag to resize it), got {width!r} x {height!r}")
        width, height = 640 if width is None else width, 480 if height is None else height
        if not all(is_int(x) and 0 < x <= 8192 for x in (width, height)):
            raise ValueError(f"width and height must be ints in [1, 8192], got {width!r} x {height!r}")
        if render_mode == "human":
            from motrix_gym.sim.viewer import check_display

            check_display()  # before anything is built
        if not is_int(torch_threads) or torch_threads < 1:
            raise ValueError(f"torch_threads must be an int >= 1, got {torch_threads!r}")
        if compile_processes is None:
            compile_processes = usable_cores()
        if not is_int(compile_processes) or compile_processes < 1:
            raise ValueError(f"compile_processes must be an int >= 1, got {compile_processes!r}")
        if nthread is not None and not (is_int(nthread) and nthread >= 1):
            raise ValueError(f"nthread must be None or an int >= 1, got {nthread!r}")
        if not is_int(lane_offset) or lane_offset < 0:
            raise ValueError(f"lane_offset must be an int >= 0, got {lane_offset!r}")
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device must be a torch device or its name ('cpu', 'cuda', 'cuda:0'), "
                             f"got {device!r}") from None
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be a CPU or CUDA device, got {device!r}")
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available")
        if self.device.type == "cuda" and self.device.index is None:  # the one tensors report
            self.device = torch.device("cuda", torch.cuda.current_device())
        if backend is None:
            backend = "warp" if self.device.type == "cuda" else "mujoco"
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "warp" and (nthread not in (None, 1) or not current_kinematics):
            raise ValueError("backend 'warp' runs without MuJoCo threads, with current kinematics: "
                             f"nthread must be None or 1 and current_kinematics True, got {nthread!r} and "
                             f"{current_kinematics!r}")
        if distributed and mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"distributed=True runs with autoreset_mode SAME_STEP, got {mode}")
        self.ranks = Ranks.join(num_envs, lane_offset) if distributed else Ranks()
        lane_offset = self.ranks.rank * num_envs if distributed else lane_offset
        groups = (obs_groups,) if isinstance(obs_groups, str) else tuple(obs_groups)

        if isinstance(task, TaskConfig):
            if task_options:
                raise ValueError(f"task options {sorted(task_options)} given with a TaskConfig")
            cfg = task
        else:
            from motrix_gym.envs import task_config
            cfg = task_config(task, **task_options)
        check_groups(cfg)
        unknown = [g for g in groups if g not in cfg.observations]
        if len(set(groups)) < len(groups):
            raise ValueError(f"obs_groups {list(groups)}: a group is named twice")
        if not groups or unknown:
            problem = f"unknown group(s) {unknown}" if unknown else "names no group"
            raise ValueError(f"obs_groups {list(groups)}: {problem}; task {cfg.name!r} has {sorted(cfg.observations)}")

        self.task, self.backend = cfg, backend
        self.runtime = rt = build_runtime(cfg, num_envs, compile=compile, backend=backend, device=self.device,
                                          nthread=nthread, current_kinematics=current_kinematics,
                                          lane_offset=lane_offset, ranks=self.ranks)
        self.sim, program, store = rt.sim, rt.program, rt.store
        self.torch_threads = torch_threads
        if compile:
            away: Helpers | RankShare | None = None
            try:
                if compile_processes > 1 and backend == "mujoco" and not distributed:
                    # started first: their interpreters, imports and models overlap the CPU probe
                    build = Build(cfg, num_envs, groups, current_kinematics, lane_offset, torch_threads)
                    away = Helpers.start(build, compile_processes, rt.unstored(groups))
                elif distributed and store is not None:
                    away = RankShare.start(self.ranks, store, rt.unstored(groups))  # a collective: always
                # Inductor's CPU probe runs on a machine where it is not recorded, else only if a
                # graph has no stored launch that holds here (a start that loads launches imports
                # no compiler)
                folder = GraphStore.default_folder()
                if (not CpuProbe.recorded_in(folder) or store is None
                        or any(g.first_start() != "launch" for g in rt.graphs(groups))):
                    check_compiler()  # before anything compiles: the helpers wait for the go below
                    probe = CpuProbe(folder)  # in a thread: the compiler's import overlaps it
                    import_graph_loader()
                    probe.wait(progress)
                if isinstance(away, Helpers):
                    away.go()
                with torch_threads_ctx(torch_threads):
                    rt.warmup(groups, progress, away=away)
            except BaseException:
                if away is not None:
                    away.close()
                rt.sim.close()  # the lanes and MuJoCo's threads go now, not whenever the traceback does
                raise

        self.num_envs = num_envs
        self.output, self.copy, self.obs_groups = output, copy, groups
        self.autoreset_mode = mode
        self.metadata = {**self.metadata, "autoreset_mode": mode, "render_fps": round(1.0 / cfg.step_dt)}
        self.render_mode, self.render_size = render_mode, (width, height)
        self.render_markers = render_markers
        clip = program.action.clip
        na = len(program.action.joints.names)
        self.single_action_space = gymnasium.spaces.Box(-clip, clip, (na,), np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        boxes = {g: gymnasium.spaces.Box(-np.inf, np.inf, (sum(rt.obs_dims[g]),), np.float32) for g in groups}
        self.single_observation_space = boxes[groups[0]] if len(groups) == 1 else gymnasium.spaces.Dict(boxes)
        self.observation_space = batch_space(self.single_observation_space, num_envs)

        L, dev = rt.ctx.num_lanes, rt.device
        self._obs = [{g: torch.zeros(L, sum(rt.obs_dims[g]), device=dev) for g in groups} for _ in range(2)]
        # numpy views of the buffers on the host; on a device numpy outputs are copies
        self._obs_np = [{g: b.numpy() for g, b in bufs.items()} for bufs in self._obs] if rt.on_host else None
        self._cur = 0
        self._final_obs = {g: torch.zeros(L, sum(rt.obs_dims[g]), device=dev) for g in groups}
        self._pending = torch.zeros(num_envs, dtype=torch.bool, device="cpu")  # ended, awaiting (next-step) reset
        self._seeded = False
        self._has_reset = False
        self._diverged = 0  # lanes whose physics diverged, since make
        self._ended: tuple[np.ndarray, np.ndarray] | None = None  # per-term means and counts, last ends
        self._totals: np.ndarray | None = None  # the commands' log totals, summed over the ranks
        self._renderer = None
        self.viewer = None  # render_mode "human": the window (sim.viewer.LaneViewer), once open
        self._viewer_lane = 0
        self._pulled: int | None = None  # the lane the window's last frame pulled (its forces stay on until replaced)
        self.closed = False

    # ------------------------------------------------------------------------------------ api
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self._check_open()
        with torch_threads_ctx(self.torch_threads):
            out = self._reset(seed, options)
        if self.render_mode == "human":
            self._render(pace=True)
        return out

    def _reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
        if not (options is None or isinstance(options, dict)):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        options = dict(options or {})
        mask_np = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; supported: 'reset_mask'")
        if seed is not None and (not is_int(seed) or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None (all lanes are seeded from one "
                             f"int: lane i uses stream (seed, lane_offset + i)), got {seed!r}")
        n, L = self.num_envs, self.runtime.ctx.num_lanes
        if isinstance(mask_np, Tensor):  # a torch env's own ``terminated | truncated``, as it gave them
            if mask_np.device != self.device:
                raise ValueError(f"options['reset_mask'] is on device {mask_np.device}, the env is on {self.device}")
            if mask_np.dtype != torch.bool:
                raise TypeError(f"options['reset_mask'] must have dtype bool, got {mask_np.dtype}")
            mask_np = mask_np.cpu().numpy()
        if mask_np is not None:
            if not isinstance(mask_np, np.ndarray):
                raise TypeError(f"options['reset_mask'] must be a numpy array or a torch tensor, got {type(mask_np)}")
            if mask_np.shape != (n,):
                raise ValueError(f"options['reset_mask'] must have shape ({n},), got {mask_np.shape}")
            if mask_np.dtype != np.bool_:
                raise TypeError(f"options['reset_mask'] must have dtype bool, got {mask_np.dtype}")
            if not mask_np.any():
                raise ValueError("options['reset_mask'] must contain at least one True")
            if not self._has_reset:
                raise ValueError("the first reset() must reset every lane (no reset_mask)")
        mask = torch.zeros(L, dtype=torch.bool, device="cpu")
        mask[:n] = True if mask_np is None else torch.from_numpy(mask_np)
        rt = self.runtime
        if seed is not None or not self._seeded:
            seed = secrets.randbits(63) if seed is None else seed
            # Gymnasium's record of the seed: the one the lanes now run from, drawn or given, so
            # that ``np_random_seed`` replays an unseeded run
            self._np_random, self._np_random_seed = seeding.np_random(seed)
            if mask_np is None:
                rt.seed(seed)
                rt.restart()
            else:
                state = rt.ctx.rng.state.clone()
                rt.seed(seed)
                rt.ctx.rng.state.copy_(torch.where(mask.to(rt.device), rt.ctx.rng.state, state))
            self._seeded = True
        rt.reset(mask)
        self._pending &= ~mask[:n]
        nxt = self._flip()
        for g in self.obs_groups:
            if mask_np is not None:
                nxt[g].copy_(self._obs[1 - self._cur][g])
            rt.observe(g, nxt[g], mask)
        self._has_reset = True
        return self._out_obs(), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        self._check_open()
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        a = self._validate_actions(actions)
        with torch_threads_ctx(self.torch_threads):
            out = self._step(a)
        if self.render_mode == "human":
            self._render(pace=True)
        return out

    def _step(self, a: np.ndarray) -> tuple[Any, Any, Any, Any, dict]:
        rt, n, L = self.runtime, self.num_envs, self.runtime.ctx.num_lanes
        mode = self.autoreset_mode
        if mode == AutoresetMode.DISABLED and self._pending.any():
            lanes = torch.nonzero(self._pending).flatten().tolist()
            raise ValueError(f"lanes {lanes[:10]} ended; reset them with reset(options={{'reset_mask': m}}) "
                             f"before stepping (autoreset_mode=DISABLED)")
        restart = self._pending.clone() if mode == AutoresetMode.NEXT_STEP else None
        ids = None
        if restart is not None and restart.any():
            # Lanes restarting this step are not stepped, and nothing of theirs (RNG streams,
            # commands, counters, flags) may change before their reset: they restart exactly as
            # they would have in SAME_STEP.
            ids = torch.nonzero(~restart).flatten().numpy().astype(np.int32)
            full = torch.zeros(L, dtype=torch.bool, device="cpu")
            full[:n] = restart
            full = full.to(rt.device)
            put_back = rt.kept(full)
        nxt = self._flip()
        rt.step(a, nxt, ids)  # every lane observed into nxt: final observations of lanes that end
        diverged = int(rt.ctx.diverged[:n].sum()) if rt.any_diverged else 0  # not the restarting lanes' last
        if ids is not None:
            put_back()
        info: dict[str, Any] = {}
        # Fresh arrays, never written again by the env (tensors on a device backend).
        if rt.on_host:
            reward, terminated, truncated = (rt.host[k][:n].copy() for k in ("reward", "terminated", "truncated"))
        else:
            reward, terminated, truncated = (t[:n].clone() for t in (rt.reward, rt.terminated, rt.truncated))
        done, any_done = rt.done, rt.any_ended
        if restart is not None and any_done:
            done = done.clone()
            done[:n] &= ~restart.to(rt.device)
            any_done = bool(done.any())
        if any_done or self.ranks.distributed:
            rt.fetch("episode_sums", "termination_terms", "episode_return", "episode_step")
        # distributed: every rank learns what ended on any rank, and resets when any rank does
        reset_now = self._aggregate(done, any_done, diverged)
        again = None  # lanes reset now, observed again
        if any_done:
            self._episode_info(done, info)
            if mode == AutoresetMode.SAME_STEP:
                for g, b in self._obs[self._cur].items():
                    self._final_obs[g].copy_(b)
                info["final_obs"], info["_final_obs"] = self._final_obs_info(done[:n])
            else:
                self._pending |= done[:n].cpu()
        if reset_now and mode == AutoresetMode.SAME_STEP:
            rt.reset(done)
            again = done
        if ids is not None:
            rt.reset(full)
            self._pending &= ~restart
            r = restart.numpy() if rt.on_host else restart.to(rt.device)
            reward[r], terminated[r], truncated[r] = 0.0, False, False
            again = full if again is None else again | full
        if again is not None:
            for g in self.obs_groups:
                rt.observe(g, nxt[g], again)
        out = self._out_np
        return self._out_obs(), out(reward), out(terminated), out(truncated), info

    def render(self) -> Sequence[np.ndarray] | None:
        """One (height, width, 3) uint8 frame per lane, as Gymnasium's ``VectorEnv.render`` gives
        (None without a ``render_mode``). The state is captured now; frame ``i`` is drawn when it
        is read, so reading lane 0 of thousands costs one frame. In ``"human"`` mode: lane
        ``viewer_lane`` in the window (opened by the first call, on rank 0 of a distributed batch;
        once the user closes it, nothing), and None."""
        return self._render(pace=False)

    @property
    def viewer_lane(self) -> int:
        """The lane ``render_mode="human"`` shows (of this process's lanes), which a body dragged
        in the window pulls; 0 unless set."""
        return self._viewer_lane

    @viewer_lane.setter
    def viewer_lane(self, lane: int) -> None:
        if want := _want_lane(self, lane):
            raise ValueError(f"viewer_lane must be {want}, got {lane!r}")
        self._viewer_lane = lane

    def _render(self, pace: bool) -> Sequence[np.ndarray] | None:
        """:meth:`render`; ``pace``: the window shows a new state (from ``reset`` or ``step``),
        at most once per control step of wall time."""
        self._check_open()
        if self.render_mode is None or (self.viewer is not None and not self.viewer.running):
            return None  # nothing to draw, or a window the user closed
        if self.render_mode == "human" and self.ranks.rank != 0:
            return None  # one window for the whole batch: rank 0's
        shown = self._viewer_lane
        lanes = slice(shown, shown + 1) if self.render_mode == "human" else slice(None)  # the window shows one
        qpos = _host(self.sim.qpos[lanes])
        with torch_threads_ctx(self.torch_threads):  # the markers are small batched ops, as the step's
            markers = self._markers()
        arrows = [(_host(m.start[lanes]), _host(m.end[lanes]), m.rgba, m.width) for m in markers
                  if isinstance(m, Arrows)]
        spheres = [(_host(m.pos[lanes]), m.rgba, m.radius) for m in markers if isinstance(m, Spheres)]
        if self.render_mode == "human":
            self._show(shown, *_lane(0, qpos, arrows, spheres), pace, _host(self.sim.qvel[shown]),
                       _host(self.sim.ctrl[shown]))
            return None
        from motrix_gym.sim.render import LaneFrames

        return LaneFrames(self.num_envs, functools.partial(self._draw, qpos, arrows, spheres))

    def _camera(self) -> dict[str, Any]:
        """The task's camera (``TaskConfig.camera``), as the renderer and the viewer take it (the
        renderer also takes its ``lookat_height``; the viewer's tracking camera looks at the
        robot's centre of mass)."""
        cam = self.task.camera
        return {"distance": cam.distance or min(3.0, max(1.2, 3.5 * self.task.scene.robot.base_height)),
                "azimuth": cam.azimuth, "elevation": cam.elevation, "follow": self.runtime.program.root.body}

    def _draw(self, qpos: np.ndarray, arrows: list[tuple], spheres: list[tuple], i: int) -> np.ndarray:
        """Lane ``i``'s frame of a state that :meth:`render` captured."""
        self._check_open()
        if self._renderer is None:
            from motrix_gym.sim.render import LaneRenderer

            self._renderer = LaneRenderer(build_model(self.task.scene, self.task.sim_dt, visual=True),
                                          *self.render_size, **self._camera(),
                                          lookat_height=self.task.camera.lookat_height)
        return self._renderer.render(*_lane(i, qpos, arrows, spheres))

    def _show(self, lane: int, qpos: np.ndarray, arrows: list[tuple], spheres: list[tuple], pace: bool,
              qvel: np.ndarray, ctrl: np.ndarray) -> None:
        """Lane ``lane``'s state in the window; ``pace``: a new state, drawn at most once per
        control step of wall time (a state drawn again, as by a ``render()`` after ``step``, waits
        for nothing, so that such a loop still runs in real time). A body the user drags in the
        window pulls that lane's robot until the next frame drawn; released, it lets go. Another
        lane shown ends the drag: the point it pulls towards was set on the other lane's robot."""
        if self.viewer is None:
            from motrix_gym.sim.viewer import LaneViewer

            self.viewer = LaneViewer(build_model(self.task.scene, self.task.sim_dt, visual=True),
                                     period=self.task.step_dt, **self._camera())
        self.viewer.show(qpos, arrows, spheres, pace, qvel, ctrl)
        if self._pulled is not None and self._pulled != lane:
            self.viewer.end_drag()
        forces = self.viewer.forces()
        if self._pulled is not None and forces is None:
            self.sim.apply_forces(self._pulled, np.zeros((self.viewer.model.nbody, 6)))
        if forces is not None:
            self.sim.apply_forces(lane, forces)
        self._pulled = None if forces is None else lane

    # Gymnasium's SyncVectorEnv gives one result per sub-environment; here the lanes share one env.
    def call(self, name: str, *args: Any, **kwargs: Any) -> Sequence[Any]:
        """One result per lane: ``render`` gives each lane's frame (None each without a
        ``render_mode``); any other attribute is the env's, called once with the arguments when
        callable, and the same for every lane."""
        if name == "render":
            frames = self.render(*args, **kwargs)
            return (None,) * self.num_envs if frames is None else frames
        value = getattr(self, name)
        return (value(*args, **kwargs) if callable(value) else value,) * self.num_envs

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The env's attribute ``name``, once per lane."""
        return (getattr(self, name),) * self.num_envs

    def set_attr(self, name: str, values: Any) -> None:
        """Set one of the env's settings that may change between steps (``SETTABLE``): to
        ``values``, or to its one value when it is a list or tuple of one value per lane (the
        lanes share the env, so they cannot differ). The value is checked as ``make`` checks it;
        everything else was fixed when the env was made."""
        if name not in SETTABLE:
            what = "is fixed when the env is made" if hasattr(self, name) else "is not an attribute of the env"
            raise AttributeError(f"set_attr({name!r}): {name!r} {what}; set_attr changes {', '.join(SETTABLE)}")
        if isinstance(values, (list, tuple)):
            if len(values) != self.num_envs or not all(_same(v, values[0]) for v in values):
                raise ValueError(f"set_attr({name!r}): the {self.num_envs} lanes share one env, so give one value "
                                 f"or {self.num_envs} equal ones, got {values!r}")
            values = values[0]
        if want := SETTABLE[name](self, values):
            raise ValueError(f"set_attr({name!r}): must be {want}, got {values!r}")
        setattr(self, name, values)

    def _markers(self) -> list[Arrows | Spheres]:
        """What the command terms and the observation functions that draw (``mdp/markers.py``)
        show now, if ``render_markers``; a function observed with the same parameters in several
        groups, once (with other parameters, such as a wider scan for the critic, once for each)."""
        if not self.render_markers:
            return []
        ctx = self.runtime.ctx
        observed = {}
        for terms in self.runtime.program.observations.values():
            for t in terms:
                if hasattr(t.func, "markers"):
                    params = term_params(t)
                    observed.setdefault((t.func, repr(params)), (t.func, params))
        with torch.no_grad():
            return ([m for c in ctx.commands.values() if hasattr(c, "markers") for m in c.markers(ctx)]
                    + [m for func, params in observed.values() for m in func.markers(ctx, **params)])

    def close(self, **kwargs: Any) -> None:
        if self.closed:
            return
        self.closed = True
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self.viewer is not None:
            self.viewer.close()
        self.sim.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    @property
    def final_obs(self) -> dict[str, Tensor]:
        """The dense final-observation slot, per group: (num_envs, d) float32 views on the
        runtime's device, written at every step where a lane ended; its rows are final
        observations for the lanes whose episode ended at the last step (SAME_STEP). For torch
        trainers that bootstrap without the per-lane ``info`` objects."""
        return {g: b[: self.num_envs] for g, b in self._final_obs.items()}

    # ------------------------------------------------------------------------------------ parts
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this MotrixVectorEnv is closed")

    def _flip(self) -> dict[str, Tensor]:
        self._cur = 1 - self._cur
        return self._obs[self._cur]

    def _validate_actions(self, actions: Any) -> np.ndarray | Tensor:
        """``actions`` as a (num_envs, na) float32 array, read only (it may share their memory); for
        a device backend a float32 tensor on its device."""
        shape = (self.num_envs, self.single_action_space.shape[0])
        on_host = self.runtime.on_host
        if isinstance(actions, Tensor):
            if actions.device != self.device:
                raise ValueError(f"actions are on device {actions.device}, the env expects {self.device}")
            if actions.is_complex() or actions.dtype == torch.bool:
                raise ValueError(f"actions must have a real dtype, got {actions.dtype}")
            if not on_host:
                return self._validate_tensor(actions.detach(), shape)
            t = actions.detach().cpu()
            arr = (t.float() if t.dtype == torch.bfloat16 else t).numpy()  # numpy has no bfloat16
        else:
            arr = np.asarray(actions)
            if arr.dtype.kind not in "fiu":
                raise ValueError(f"actions must have a real (float or integer) dtype, got {arr.dtype}")
        if arr.shape != shape:
            raise ValueError(f"actions must have shape {shape}, got {arr.shape}")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            lanes = np.flatnonzero(~np.isfinite(arr).all(-1)).tolist()
            raise ValueError(f"actions contain NaN or Inf in lanes {lanes[:10]}")
        with np.errstate(over="ignore"):  # finite values beyond float32's range become inf, then clipped
            arr = arr.astype(np.float32, copy=False)
        return arr if on_host else torch.from_numpy(arr).to(self.runtime.device)

    def _validate_tensor(self, t: Tensor, shape: tuple[int, int]) -> Tensor:
        """The checks of ``_validate_actions`` on the device (one wait for it, for the finite check)."""
        if tuple(t.shape) != shape:
            raise ValueError(f"actions must have shape {shape}, got {tuple(t.shape)}")
        if t.is_floating_point():
            finite = torch.isfinite(t).all(-1)
            if not bool(finite.all()):
                lanes = torch.nonzero(~finite).flatten().tolist()
                raise ValueError(f"actions contain NaN or Inf in lanes {lanes[:10]}")
        return t.to(torch.float32).to(self.runtime.device)

    def _episode_info(self, done: Tensor, info: dict[str, Any]) -> None:
        """Per-lane episode results for lanes that ended, and the figures of ``log`` (in numpy,
        whose small ops dispatch faster than torch's)."""
        rt, n = self.runtime, self.num_envs
        host = rt.host
        d = done.cpu().numpy()[:n]
        col = d[:, None]
        sums = host["episode_sums"][:n] * col  # fresh (n, terms) arrays, split in columns
        flags = host["termination_terms"][:n] & col
        out = self._out_np
        info["reward_terms"] = dict(zip(rt.reward_names, map(out, sums.T)))
        info["termination_terms"] = dict(zip(rt.termination_names, map(out, flags.T)))
        info["_reward_terms"], info["_termination_terms"] = out(d.copy()), out(d.copy())
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            ret = np.where(d, host["episode_return"][:n], np.float32(0.0))
            length = np.where(d, host["episode_step"][:n], 0).astype(np.int32)
            final = {k: info.pop(k) for k in ("reward_terms", "_reward_terms", "termination_terms",
                                              "_termination_terms")}
            final["episode"] = {"r": out(ret), "l": out(length)}
            final["_episode"] = out(d.copy())
            info["final_info"], info["_final_info"] = final, out(d.copy())

    def _aggregate(self, done: Tensor, any_done: bool, diverged: int) -> bool:
        """Update the figures of ``log`` from the lanes that ended this step, summed over the
        ranks (one all_reduce per step when distributed; locally only on steps where lanes
        ended otherwise); returns whether any lane of any rank ended."""
        rt, n = self.runtime, self.num_envs
        if not self.ranks.distributed:
            self._diverged += diverged
            if any_done:
                d = done.cpu().numpy()[:n]
                self._ended = (rt.host["episode_sums"][:n][d].sum(0) / d.sum() / self.task.episode_length_s,
                               rt.host["termination_terms"][:n][d].sum(0).astype(np.float64))
            return any_done
        d = done.cpu().numpy()[:n]
        totals = [(t, c) for cmd in rt.ctx.commands.values() if hasattr(cmd, "log_totals")
                  for t, c in cmd.log_totals().values()]
        v = torch.from_numpy(np.concatenate((
            [float(d.sum()), float(diverged)], rt.host["episode_sums"][:n][d].sum(0),
            rt.host["termination_terms"][:n][d].sum(0), np.asarray(totals, np.float64).reshape(-1)))
        ).to(torch.float64)
        v = self.ranks.sum_(v).numpy()
        ended, nr, nt = v[0], len(rt.reward_names), len(rt.termination_names)
        self._diverged += int(v[1])
        if ended > 0:
            self._ended = v[2:2 + nr] / ended / self.task.episode_length_s, v[2 + nr:2 + nr + nt]
        self._totals = v[2 + nr + nt:].reshape(-1, 2)
        return bool(ended > 0)

    @property
    def log(self) -> dict[str, float]:
        """Isaac-Lab-style aggregates: ``Episode_Reward/<term>`` (mean episode sum per second) and
        ``Episode_Termination/<term>`` (how many lanes it ended) over the lanes that ended at the
        last step where any did; ``Physics/diverged_lanes`` since make; the commands' own
        figures (``Motion/...``) as they are now."""
        rt = self.runtime
        log = {"Physics/diverged_lanes": float(self._diverged)}
        if self._ended is not None:
            means, fired = self._ended
            log.update({f"Episode_Reward/{k}": float(v) for k, v in zip(rt.reward_names, means)})
            log.update({f"Episode_Termination/{k}": float(v) for k, v in zip(rt.termination_names, fired)})
        totals = iter(self._totals) if self.ranks.distributed and self._totals is not None else None
        for c in rt.ctx.commands.values():
            if hasattr(c, "log"):
                log.update(c.log())
            for name, (t, count) in (c.log_totals() if hasattr(c, "log_totals") else {}).items():
                if totals is not None:  # summed over the ranks at the last step
                    t, count = next(totals)
                log[name] = float(t) / max(float(count), 1.0)
        return log

    def _final_obs_info(self, done: Tensor) -> tuple[Any, Any]:
        n = self.num_envs
        if self.output == "torch":
            dense = {g: (self._final_obs[g][:n] * done.unsqueeze(-1)).to(self.device) for g in self.obs_groups}
            return (dense[self.obs_groups[0]] if len(dense) == 1 else dense), done.to(self.device)
        d = done.cpu().numpy()
        final = {g: b.cpu().numpy() for g, b in self._final_obs.items()}
        out = np.full(n, None, dtype=object)
        for i in np.flatnonzero(d).tolist():
            per = {g: b[i].copy() for g, b in final.items()}
            out[i] = per[self.obs_groups[0]] if len(per) == 1 else per
        return out, d.copy()

    def _out_np(self, a: np.ndarray | Tensor) -> Any:
        """A fresh numpy array (or, from a device backend, tensor) as a per-lane result."""
        if isinstance(a, Tensor):
            return a.to(self.device) if self.output == "torch" else a.cpu().numpy()
        return torch.from_numpy(a).to(self.device) if self.output == "torch" else a

    def _out_obs(self) -> Any:
        """The observation buffer just written, as the step's or reset's result."""
        n = self.num_envs
        if self.output == "torch":
            out = {g: (b[:n].clone() if self.copy else b[:n]).to(self.device) for g, b in self._obs[self._cur].items()}
        elif self._obs_np is None:  # on a device: copies
            out = {g: b[:n].cpu().numpy() for g, b in self._obs[self._cur].items()}
        else:
            out = {g: (b[:n].copy() if self.copy else b[:n]) for g, b in self._obs_np[self._cur].items()}
        return out[self.obs_groups[0]] if len(out) == 1 else out


def build_runtime(cfg: TaskConfig, num_envs: int, *, compile: bool, backend: str = "mujoco",
                  device: torch.device | str = "cpu", nthread: int | None = None, current_kinematics: bool = True,
                  lane_offset: int = 0, ranks: Ranks | None = None) -> TorchManagerRuntime:
    """The runtime of task ``cfg`` over a new simulation of ``num_envs`` lanes (arguments as
    ``MotrixVectorEnv`` takes them, checked); its graphs are neither compiled nor loaded yet."""
    model = build_model(cfg.scene, cfg.sim_dt, sensors=not current_kinematics)
    program = resolve(cfg, model_info(model, height_map(cfg.scene.terrain)))
    sensing = build_sensing_model(cfg.scene, cfg.sim_dt, program.sensors) if current_kinematics else None
    sim = make_sim(backend, model, num_envs, nthread, reads=program.reads, sensing=sensing,
                   stage=program.read_stage, device=str(device) if backend == "warp" else "cpu")
    # the options a graph may be compiled with (the program says which, by its task's vector_kernels)
    options = inductor_options(False), inductor_options(True)
    store = GraphStore.of(program, str(sim.device), *options) if compile else None
    return TorchManagerRuntime(program, sim, compile=compile, lane_offset=lane_offset, ranks=ranks,
                               store=store)


def _lane(i: int, qpos: np.ndarray, arrows: list[tuple], spheres: list[tuple]) -> tuple:
    """Lane ``i``'s configuration, arrows and spheres, of the batch's that ``render`` captured."""
    return (qpos[i], [(a, b, rgba, w) for start, end, rgba, w in arrows for a, b in zip(start[i], end[i])],
            [(p, rgba, r) for pos, rgba, r in spheres for p in pos[i]])


def _host(t: torch.Tensor) -> np.ndarray:
    """A numpy copy of ``t``: lazily drawn frames outlive the step that rewrites the tensor."""
    return t.detach().cpu().numpy().copy()


def _want_bool(env: MotrixVectorEnv, value: Any) -> str | None:
    """What ``value`` should be, or None where it is: a bool."""
    return None if isinstance(value, bool) else "True or False"


def _want_lane(env: MotrixVectorEnv, value: Any) -> str | None:
    """What ``value`` should be, or None where it is: one of ``env``'s lanes."""
    ok = is_int(value) and 0 <= value < env.num_envs
    return None if ok else f"an int in [0, {env.num_envs - 1}] (a lane of this env)"


# The settings an env reads afresh at each call, which ``set_attr`` may change: each one's check
# (as make's or the attribute's own), which says what it wants of a bad value (None: good).
SETTABLE: dict[str, Callable[[MotrixVectorEnv, Any], str | None]] = {
    "render_markers": _want_bool,
    "copy": _want_bool,
    "viewer_lane": _want_lane,
}


def _same(a: Any, b: Any) -> bool:
    """``a`` is ``b`` or equals it (arrays, whose ``==`` is elementwise, only when identical)."""
    if a is b:
        return True
    eq = a == b
    return isinstance(eq, bool) and eq

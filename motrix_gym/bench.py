"""``python -m motrix_gym bench``: the env step against the raw physics it runs, side by side.

For each task and lane count, in one process:

- **env**: ``env.step(actions)`` with fixed random actions, each step timed on its own (full step:
  validation, action term, physics, evaluate, autoreset, observe, numpy outputs). Before each
  step, untimed, the batch's complete state (qpos, qvel, warm start, ...) is recorded.
- **raw**: a bare simulation of the same backend, compiled physics model (with
  ``current_kinematics`` its sensors are off: the env reads them from the sensing model), lanes and
  threads (``sim/raw.py``: a ``mujoco.batch.Batch``, or a second ``mujoco_warp`` data) replays
  those states: state restored (untimed), then ``ctrl[:] = targets; step(nstep=decimation)``
  timed, with the targets the env computed. It
  simulates what the env simulated (same contacts, resets, warm starts, changing controls, and the
  per-lane model values of randomised tasks, as the lanes had them at the end of the env pass),
  so the ratio isolates the framework's overhead.
- env and raw passes alternate ``--repeats`` times; medians are reported.
- **runtime**: the read (numpy) and the step graph (evaluate + observe every lane), the reset
  graph and the observe graph alone (compiled as configured, and eager), median per call; reset
  and observe are timed with every lane masked (their cost does not depend on the mask).
- ``--device cuda`` (backend warp): the simulation and runtime on the GPU, actions given as
  tensors there, raw stepping replayed as the env steps (a CUDA graph); every timing waits for
  the device.
- **RSS per lane**: resident memory after warm-up minus that before the env was made (torch and
  MuJoCo already imported), divided by lanes.
- **first step**: seconds from ``make_vec`` to the end of the first step (compilation included).
- ``--startup``: interpreter start to the first compiled step in fresh processes: cold (empty
  Inductor cache and temporary folder), warm at the same lane count, warm at new lane counts
  (1024, 4096); warm starts as medians of ``--startup-repeats`` rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from motrix_gym.arguments import TASK_HELP, add_task_arguments, count, device_name, out_path, task_id
from motrix_gym.sim.backend import BACKENDS


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env_id", nargs="?", type=task_id, help=TASK_HELP)
    p.add_argument("--all", action="store_true", help="every registered task")
    p.add_argument("--num-envs", type=count(1), nargs="+", default=[256])
    p.add_argument("--steps", type=count(1), default=20, help="env steps per timed repeat")
    p.add_argument("--repeats", type=count(1), default=5)
    p.add_argument("--nthread", type=count(1), default=None)
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="simulation backend (default: warp on a CUDA device, else mujoco)")
    p.add_argument("--device", type=device_name, default="cpu", help="cpu, or cuda / cuda:N (backend warp)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--current-kinematics", action=argparse.BooleanOptionalAction, default=True,
                   help="bring body frames and sensors to the new state after stepping (default)")
    p.add_argument("--json", type=out_path((".json",)), default=None, help="also write the results to this .json file")
    p.add_argument("--startup", action="store_true",
                   help="also time make -> first compiled step in fresh processes, cold and warm cache")
    p.add_argument("--startup-repeats", type=count(1), default=None,
                   help="with --startup: rounds of warm starts (default 1; medians reported)")
    add_task_arguments(p)


def _median_time(fn: Any, n: int, sync: Any = lambda: None) -> float:
    times = []
    for _ in range(n):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_task(env_id: str, num_envs: int, steps: int, repeats: int, compile: bool,
               nthread: int | None, current_kinematics: bool = True, backend: str | None = None,
               device: str = "cpu", task_options: dict[str, Any] | None = None) -> dict[str, Any]:
    import gymnasium as gym
    import torch

    import motrix_gym  # noqa: F401
    from motrix_gym.sim.raw import engine_versions, raw_replay

    rss0 = rss_mb()
    t0 = time.perf_counter()
    env = gym.make_vec(env_id, num_envs=num_envs, compile=compile, nthread=nthread, progress=False,
                       current_kinematics=current_kinematics, backend=backend, device=device, **(task_options or {}))
    env.reset(seed=0)
    u = env.unwrapped
    rt, sim, backend = u.runtime, u.sim, u.backend
    dev = rt.device
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    gen = np.random.default_rng(0)
    na = env.single_action_space.shape[0]
    actions = (gen.standard_normal((steps, num_envs, na)) * 0.5).astype(np.float32)
    # as a trainer passes them: numpy to a host backend, tensors on the device to a device backend
    given = actions if rt.on_host else torch.from_numpy(actions).to(dev)
    env.step(given[0])
    compile_s = time.perf_counter() - t0
    for a in given[1:4]:
        env.step(a)

    act = rt.program.action
    default = rt.ctx.default_qpos[act.joints.qpos].cpu().numpy().astype(np.float64)
    clip = act.clip
    targets = default + act.scale.cpu().numpy() * np.clip(actions, -clip, clip)
    ctrl_cols = act.actuator_ids.cpu().numpy()
    raw = raw_replay(backend, sim)
    dec = rt.program.task.decimation

    def env_pass() -> tuple[float, list[Any]]:
        states, total = [], 0.0
        for a in given:
            states.append(raw.record())
            sync()
            t = time.perf_counter()
            env.step(a)
            sync()
            total += time.perf_counter() - t
        return total / steps, states

    def raw_pass(states: list[Any], velocity: bool) -> float:
        raw.sync_models()  # as the env's lanes ended the pass (lanes reset during it drew anew)
        return sum(raw.replay(s, ctrl_cols, tgt, dec, velocity) for s, tgt in zip(states, targets)) / steps

    env_t, raw_t, vel_t = [], [], []
    for _ in range(repeats):
        e, states = env_pass()
        env_t.append(e)
        raw_t.append(raw_pass(states, False))
        vel_t.append(raw_pass(states, True))
    env_s, raw_s = statistics.median(env_t), statistics.median(raw_t)
    ratios = [e / r for e, r in zip(env_t, raw_t)]
    vel_ratios = [e / r for e, r in zip(env_t, vel_t)]

    mask = torch.ones(rt.ctx.num_lanes, dtype=torch.bool, device=dev)
    out = torch.zeros(rt.ctx.num_lanes, sum(rt.obs_dims["policy"]), device=dev)
    step, observe = rt.step_graph(u.obs_groups), rt.observe_graphs["policy"]
    graphs = {
        "step": (lambda *o: (rt.read(), step(*o)), lambda *o: (rt.read(), step.eager(*o)),
                 [torch.zeros(rt.ctx.num_lanes, sum(rt.obs_dims[g]), device=dev) for g in u.obs_groups]),
        "reset": (rt._reset_graph, rt._reset, (mask,)),
        "observe": (observe, observe.eager, (out, mask)),
    }
    runtime_ms, eager_ms = {}, {}
    for name, (fast, eager, args) in graphs.items():
        fast(*args)
        runtime_ms[name] = 1e3 * _median_time(lambda f=fast, a=args: f(*a), 3 * repeats, sync)
        eager_ms[name] = 1e3 * _median_time(lambda f=eager, a=args: f(*a), 3 * repeats, sync)
    rss = rss_mb()
    env.close()
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "backend": backend,
        "device": str(dev),
        "nthread": sim.nthread,
        "compile": compile,
        "current_kinematics": current_kinematics,
        "task_options": task_options or {},
        "env_steps_per_s": num_envs / env_s,
        "raw_steps_per_s": num_envs / raw_s,
        "overhead_ratio": statistics.median(ratios),
        # against a raw step that also brings kinematics and sensors to the new state, as the env
        # does: what remains is the runtime and the Python around it
        "overhead_ratio_vs_raw_vel": statistics.median(vel_ratios),
        "env_ms": 1e3 * env_s,
        "raw_ms": 1e3 * raw_s,
        "runtime_ms": runtime_ms,
        "runtime_eager_ms": eager_ms,
        "rss_mb_per_lane": (rss - rss0) / num_envs,
        "make_to_first_step_s": compile_s,
        **engine_versions(backend),
        "torch": torch.__version__,
    }


STARTUP = """
import time, sys
t = time.perf_counter()
import gymnasium as gym, numpy as np, motrix_gym
env = gym.make_vec(sys.argv[1], num_envs=int(sys.argv[2]), progress=False)
env.reset(seed=0)
env.step(np.zeros(env.action_space.shape, np.float32))
print(time.perf_counter() - t)
"""


def check_startup_task(env_id: str) -> None:
    """A ValueError unless ``env_id`` is a built-in task: start-up is timed in fresh processes,
    which have not imported the module that registered a task of your own."""
    from motrix_gym.envs import task_name
    from motrix_gym.registry import BUILTIN

    if task_name(env_id) not in BUILTIN:
        raise ValueError(f"start-up is timed in fresh processes, which know the built-in tasks only, not {env_id}")


def startup_times(env_id: str, num_envs: int, new_lanes: tuple[int, ...] = (1024, 4096),
                  repeats: int = 1) -> dict[str, Any]:
    """Seconds from interpreter start to the end of the first compiled step, each in a fresh
    process sharing one Inductor cache: with the cache empty (cold), again at the same lane
    count (warm), then at each of ``new_lanes`` (warm, new lane count: the graphs' lane
    dimension is symbolic, so the code compiled first serves them). The warm starts run in
    ``repeats`` rounds, each round every lane count once; medians are reported, every sample
    under ``samples_s``."""
    if repeats < 1:
        raise ValueError(f"startup repeats must be >= 1, got {repeats}")
    check_startup_task(env_id)
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        # Inductor keeps its precompiled headers in the temporary folder, outside its cache
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TMPDIR": cache}

        def run(n: int) -> float:
            out = subprocess.run([sys.executable, "-c", STARTUP, env_id, str(n)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            return float(out.split()[-1])

        cold = run(num_envs)
        lanes = [num_envs, *(n for n in new_lanes if n != num_envs)]
        samples: dict[str, list[float]] = {str(n): [] for n in lanes}
        for _ in range(repeats):
            for n in lanes:
                samples[str(n)].append(run(n))
    median = {n: statistics.median(v) for n, v in samples.items()}
    warm = median.pop(str(num_envs))
    return {"cold_s": cold, "warm_s": warm, "warm_new_lanes_s": median, "cold_over_warm": cold / warm,
            "samples_s": samples}


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'task':<26} {'lanes':>5} {'env st/s':>9} {'raw st/s':>9} {'ratio':>6} {'vs VEL':>6} {'step ms':>8} "
            f"{'reset ms':>8} {'obs ms':>7} {'x eager':>7} {'MB/lane':>7} {'first s':>7}")
    print(head)
    print("-" * len(head))
    for r in rows:
        rt, eager = r["runtime_ms"], r["runtime_eager_ms"]
        speedup = sum(eager.values()) / max(sum(rt.values()), 1e-9)
        print(f"{r['env_id']:<26} {r['num_envs']:>5} {r['env_steps_per_s']:>9,.0f} {r['raw_steps_per_s']:>9,.0f} "
              f"{r['overhead_ratio']:>6.3f} {r['overhead_ratio_vs_raw_vel']:>6.3f} "
              f"{rt['step']:>8.3f} {rt['reset']:>8.3f} {rt['observe']:>7.3f} "
              f"{speedup:>7.2f} {r['rss_mb_per_lane']:>7.3f} {r['make_to_first_step_s']:>7.1f}")


def main(args: argparse.Namespace) -> None:
    from motrix_gym.registry import BUILTIN, env_id

    ids = [env_id(t) for t in BUILTIN] if args.all else [args.env_id]
    rows = []
    for i in ids:
        for n in args.num_envs:
            rows.append(bench_task(i, n, args.steps, args.repeats, args.compile, args.nthread,
                                   args.current_kinematics, args.backend, args.device, args.task_options))
    print_table(rows)
    if args.task_options:
        print(f"task options: {args.task_options}")
    if args.startup:
        for r in rows:
            r["startup"] = startup_times(r["env_id"], r["num_envs"], repeats=args.startup_repeats or 1)
            st = r["startup"]
            others = ", ".join(f"{s:.1f} s at {n} lanes" for n, s in st["warm_new_lanes_s"].items())
            print(f"{r['env_id']} x{r['num_envs']}: start to first compiled step {st['cold_s']:.1f} s cold, "
                  f"{st['warm_s']:.1f} s warm; then, new lane counts: {others}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)

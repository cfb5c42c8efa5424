"""One process with every core against one process per core, the same lanes in all.

    python scripts/threads_vs_processes.py --task Motrix/G1WalkFlat-v0 --lanes 256 2048 --json out.json

For each total lane count: env-steps/s of one process with ``--cores`` MuJoCo threads, and the
``--cores`` torchrun ranks of one thread each, every rank ``distributed=True`` with its share of
the lanes (so the reductions over ranks are paid for): all ranks' env-steps over the slowest
rank's time. Random actions, compiled runtime, only the stepping timed (not making the envs);
each figure is the median of ``--repeats`` runs, the two settings alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def seconds(task: str, lanes: int, nthread: int, steps: int, distributed: bool) -> float:
    """Wall time of ``steps`` steps of random actions, after 5 untimed ones."""
    import numpy as np

    import motrix_gym  # noqa: F401
    from motrix_gym.envs import task_name
    from motrix_gym.vector_env import MotrixVectorEnv

    env = MotrixVectorEnv(task_name(task), lanes, nthread=nthread, progress=False,
                          distributed=distributed)
    env.reset(seed=0)
    acts = (np.random.default_rng(0).standard_normal((steps + 5,) + env.action_space.shape) * 0.5).astype(np.float32)
    for a in acts[:5]:
        env.step(a)
    t = time.perf_counter()
    for a in acts[5:]:
        env.step(a)
    out = time.perf_counter() - t
    env.close()
    return out


def worker(task: str, lanes: int, steps: int) -> None:
    """A torchrun rank; rank 0 prints the ranks' env-steps over the slowest rank's time."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    took = torch.tensor([seconds(task, lanes, 1, steps, True)], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        print(f"RATE {dist.get_world_size() * lanes * steps / float(took):.1f}")
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", default="Motrix/G1WalkFlat-v0")
    p.add_argument("--lanes", type=int, nargs="+", default=[256, 2048])
    p.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", nargs=3, metavar=("TASK", "LANES", "STEPS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))
        return
    uneven = [n for n in args.lanes if n % args.cores]
    if uneven:
        p.error(f"--lanes {uneven} do not split evenly over --cores {args.cores}")
    rows = []
    for total in args.lanes:
        share = total // args.cores
        ranks_cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.cores}",
                     __file__, "--worker", args.task, str(share), str(args.steps)]
        one, many = [], []
        for _ in range(args.repeats):  # alternating, so that both see the same machine
            one.append(total * args.steps / seconds(args.task, total, args.cores, args.steps, False))
            out = subprocess.run(ranks_cmd, check=True, capture_output=True, text=True).stdout
            many.append(float(out.split("RATE")[-1].split()[0]))
        rows.append({"task": args.task, "lanes": total, "cores": args.cores,
                     "one_process_steps_per_s": statistics.median(one), "ranks_steps_per_s": statistics.median(many),
                     "one_process_runs": one, "ranks_runs": many})
        r = rows[-1]
        print(f"{args.task} {total} lanes: 1 process x {args.cores} threads {r['one_process_steps_per_s']:,.0f}, "
              f"{args.cores} processes x 1 thread {r['ranks_steps_per_s']:,.0f} env-steps/s "
              f"({r['ranks_steps_per_s'] / r['one_process_steps_per_s']:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

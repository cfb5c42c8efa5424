"""Run the benchmark behind docs/performance.md and draw its scaling plot.

    python scripts/performance_report.py --json docs/performance.json --plot docs/performance.png

Every registered task at 64 / 512 / 2048 lanes on all cores, plus one tracking task on 1 core, each
row measured by ``motrix_gym.bench.bench_task`` (env and raw physics side by side, medians).
"""

from __future__ import annotations

import argparse
import json

from motrix_gym import bench
from motrix_gym.registry import BUILTIN, env_id


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lanes", type=int, nargs="+", default=[64, 512, 2048])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default="docs/performance.json")
    p.add_argument("--plot", default="docs/performance.png")
    p.add_argument("--tasks", nargs="+", default=list(BUILTIN),
                   help="measure only these tasks; their rows replace those already in --json")
    p.add_argument("--extras", action=argparse.BooleanOptionalAction, default=True,
                   help="also the 1-thread and current_kinematics=False rows")
    args = p.parse_args()
    rows = []
    for task in args.tasks:
        for n in args.lanes:
            rows.append(bench.bench_task(env_id(task), n, args.steps, args.repeats, True, None))
            bench.print_table(rows[-1:])
    if args.extras:
        for n in args.lanes:  # how the same task scales with cores
            rows.append(bench.bench_task(env_id("G1WbtDance"), n, args.steps, args.repeats, True, 1))
            bench.print_table(rows[-1:])
        for task in ("G1WbtDance", "G1WalkFlat"):  # without the forward pass after stepping
            rows.append(bench.bench_task(env_id(task), max(args.lanes), args.steps, args.repeats, True, None, False))
            bench.print_table(rows[-1:])
    if set(args.tasks) != set(BUILTIN):  # keep the other tasks' rows from the last full run
        with open(args.json) as f:
            kept = [r for r in json.load(f) if r["env_id"] not in {env_id(t) for t in args.tasks}
                    or not (r["nthread"] > 1 and r["current_kinematics"])]
        rows = [*rows, *kept] if not args.extras else [*rows, *[r for r in kept if r["nthread"] > 1
                                                               and r["current_kinematics"]]]
    order = {env_id(t): i for i, t in enumerate(BUILTIN)}
    rows.sort(key=lambda r: (not (r["nthread"] > 1 and r["current_kinematics"]), order[r["env_id"]],
                             r["num_envs"]))
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    bench.print_table(rows)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for task in BUILTIN:
        pts = [(r["num_envs"], r["env_steps_per_s"], r["raw_steps_per_s"]) for r in rows
               if r["env_id"] == env_id(task) and r["nthread"] > 1 and r["current_kinematics"]]
        xs, env_s, _ = zip(*pts)
        a.plot(xs, env_s, "o-", label=task)
        b.plot(xs, [r["overhead_ratio"] for r in rows
                    if r["env_id"] == env_id(task) and r["nthread"] > 1 and r["current_kinematics"]],
               "o-", label=task)
    one = [(r["num_envs"], r["env_steps_per_s"]) for r in rows if r["nthread"] == 1]
    a.plot(*zip(*one), "k--", label="G1WbtDance, 1 thread")
    a.set(xscale="log", xlabel="lanes", ylabel="env-steps/s", title="throughput (2 cores)")
    b.axhline(1.10, color="gray", linestyle=":", label="target at 2048")
    b.set(xscale="log", xlabel="lanes", ylabel="env step / raw physics step", title="overhead ratio")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=100)


if __name__ == "__main__":
    main()

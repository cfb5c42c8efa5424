"""A rank of a distributed run, or one whole process (for tests/test_distributed.py).

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/distributed_worker.py TASK LANES OUT [MODE]
    python tests/distributed_worker.py TASK LANES OUT [MODE]          # one process, no torch.distributed

Steps the task with fixed random actions, indexed by global lane, and saves every step's
observations, rewards and flags of this process's lanes, its env.log at the end and which
graphs it loaded, to OUT/rank<r>.npz (OUT/single.npz without torch.distributed). An error is
saved as its message. MODE: ``eager`` (default), ``compile``, or ``compile-break`` (compiled,
with a reward term that cannot be compiled: a graph break).
"""

import json
import os
import sys

import numpy as np

TOTAL_LANES, STEPS = 8, 70


def main() -> None:
    task, lanes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "eager"
    distributed = "RANK" in os.environ
    name = "single"
    import torch

    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        name = f"rank{dist.get_rank()}"
    try:
        record(task, lanes, os.path.join(out, name), mode)
    finally:  # a rank that exits with gloo's group alive can abort in its teardown
        if distributed:
            torch.distributed.destroy_process_group()
    if distributed:  # gloo's threads can still abort the interpreter's exit (std::terminate): skip it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def record(task: str, lanes: int, out: str, mode: str) -> None:
    import motrix_gym  # noqa: F401
    from conftest import with_a_graph_break
    from motrix_gym.envs import task_config
    from motrix_gym.vector_env import MotrixVectorEnv

    cfg = with_a_graph_break(task) if mode == "compile-break" else task_config(task)
    try:
        env = MotrixVectorEnv(cfg, lanes, compile=mode != "eager", distributed="RANK" in os.environ, progress=False)
    except (ValueError, RuntimeError) as e:
        with open(f"{out}.error", "w") as f:
            f.write(str(e))
        return
    first = env.runtime.lane_offset
    na = env.single_action_space.shape[0]
    actions = (np.random.default_rng(0).standard_normal((STEPS, TOTAL_LANES, na)) * 2.0).astype(np.float32)
    obs, _ = env.reset(seed=7)
    rec = {"obs": [obs], "rew": [], "term": [], "trunc": []}
    for a in actions:
        obs, rew, term, trunc, _ = env.step(a[first:first + lanes])
        rec["obs"].append(obs)
        rec["rew"].append(rew)
        rec["term"].append(term)
        rec["trunc"].append(trunc)
    probs = env.runtime.ctx.commands["motion"].probs.numpy() if "motion" in env.runtime.ctx.commands else np.zeros(1)
    np.savez(f"{out}.npz", **{k: np.stack(v) for k, v in rec.items()}, probs=probs, log=json.dumps(env.log),
             loaded=json.dumps({g.name: g.loaded for g in env.runtime.graphs(env.obs_groups)}))
    env.close()


if __name__ == "__main__":
    main()

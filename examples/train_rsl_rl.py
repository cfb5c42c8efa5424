"""PPO with rsl_rl on one process or many: every torchrun rank runs ``--num-envs`` lanes of one
distributed env and rsl_rl averages the gradients over the ranks.

    python examples/train_rsl_rl.py --env-id Motrix/G1WalkFlat-v0 --num-envs 64 --iterations 50
    torchrun --nproc_per_node=2 examples/train_rsl_rl.py --env-id Motrix/G1WalkFlat-v0 --num-envs 64 --distributed
    # several machines: the same command on each, with --nnodes=2 --node-rank=<0|1>
    #   --rdzv-backend=c10d --rdzv-endpoint=<host of node 0>:29400 in place of --nproc_per_node alone

Rank 0 writes the run directory (TensorBoard, checkpoints, curve) and prints the whole run's
episode figures; the process group uses gloo on CPUs and NCCL when CUDA is there.
"""

from __future__ import annotations

import argparse

import torch

from motrix_gym.learn.train import last_episodes, train


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="Motrix/G1WalkFlat-v0")
    p.add_argument("--num-envs", type=int, default=64, help="lanes per rank")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--iterations", type=int, default=None)
    budget.add_argument("--minutes", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-dir", default="logs")
    p.add_argument("--eval-lanes", type=int, default=64)
    p.add_argument("--distributed", action="store_true", help="one rank of a torchrun launch")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    args = p.parse_args()
    if args.distributed:
        import torch.distributed as dist

        # The env's own collectives use CPU tensors: gloo on the CPU, NCCL for CUDA tensors.
        dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    try:
        run(args)
    finally:  # a rank that exits with the group alive can abort in gloo's teardown
        if args.distributed:
            torch.distributed.destroy_process_group()


def run(args: argparse.Namespace) -> None:
    budget = {"iterations": args.iterations} if args.iterations is not None else {"minutes": args.minutes or 20.0}
    res = train(args.env_id, num_envs=args.num_envs, seed=args.seed, log_dir=args.log_dir, compile=args.compile,
                eval_lanes=args.eval_lanes, distributed=args.distributed, **budget)
    rank = torch.distributed.get_rank() if args.distributed else 0
    print(f"rank {rank}: {res.episodes} episodes ended in this rank's lanes")
    if rank == 0:
        s = res.summary
        print(f"whole run: {s['ranks']} rank(s), {s['iterations']} iterations, {s['env_steps']:,} env steps, "
              f"{s['episodes']} episodes; {last_episodes(s)}; run directory {res.run_dir}")


if __name__ == "__main__":
    main()

"""Many processes as one batch of lanes, over torch.distributed's default process group.

Rank r of R, each with ``n`` lanes, runs global lanes ``r * n`` to ``(r + 1) * n - 1``. Lanes are
independent except through statistics they share (the adaptive motion sampler's failure counts)
and the aggregates of ``env.log``; those are summed over the ranks with ``all_reduce`` at the
point where one process would combine them. The sampler's counts are integers, exact in any
order, so R ranks of n lanes run what one process of R * n lanes runs, bit for bit; the log's
means are float sums, equal up to rounding. Only torch.distributed's collectives carry anything
between processes, besides the compiled graphs ranks on one machine share through their graph
store (``compile_helpers.RankShare``).
"""

from __future__ import annotations

import torch
from torch import Tensor


class Ranks:
    """This process's place among the ranks (one rank, world 1, when not distributed)."""

    def __init__(self, rank: int = 0, world: int = 1) -> None:
        self.rank, self.world = rank, world

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @classmethod
    def default_group(cls) -> Ranks:
        """This process's place in torch.distributed's default process group, which must exist
        and have a backend for CPU tensors (the env's own collectives use them)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("distributed=True needs torch.distributed's default process group: call "
                               "torch.distributed.init_process_group(backend) first ('gloo' on CPUs, "
                               "'cpu:gloo,cuda:nccl' where ranks also use GPUs; torchrun sets the environment it "
                               "reads)")
        config = dist.get_backend_config()
        if "cpu:" not in config:
            raise RuntimeError(f"distributed=True exchanges lane counts and start-up facts as CPU tensors, but the "
                               f"default process group has no backend for the CPU ({config!r}): initialise it with "
                               "'gloo', or with 'cpu:gloo,cuda:nccl' where ranks also use GPUs")
        return cls(dist.get_rank(), dist.get_world_size())

    @classmethod
    def join(cls, num_envs: int, lane_offset: int) -> Ranks:
        """The default process group's ranks, after checking on every rank that all of them
        have the same ``num_envs`` and none set a ``lane_offset`` of its own; a mismatch is the
        same ValueError on every rank, after one collective, so no rank waits for another."""
        import torch.distributed as dist

        ranks = cls.default_group()
        world = ranks.world
        mine = torch.tensor([num_envs, lane_offset], dtype=torch.int64, device="cpu")
        every = [torch.zeros(2, dtype=torch.int64, device="cpu") for _ in range(world)]
        dist.all_gather(every, mine)
        counts = [int(t[0]) for t in every]
        offsets = [int(t[1]) for t in every]
        if len(set(counts)) > 1:
            raise ValueError(f"distributed=True: every rank needs the same num_envs; ranks 0..{world - 1} have "
                             f"{counts}")
        if any(offsets):
            raise ValueError("distributed=True sets lane_offset = rank * num_envs itself; ranks passed lane_offset "
                             f"{offsets}")
        return ranks

    def sum_(self, t: Tensor) -> Tensor:
        """``t`` summed over the ranks, in place (nothing to do for one rank)."""
        if self.distributed:
            import torch.distributed as dist

            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def gather(self, obj: object) -> list[object]:
        """Every rank's ``obj`` (picklable), in rank order (``[obj]`` for one rank)."""
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        every: list[object] = [None] * self.world
        dist.all_gather_object(every, obj)
        return every

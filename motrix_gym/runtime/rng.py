"""Per-lane SplitMix64 random streams on int64 tensors.

Each lane owns one 64-bit state. A draw advances only the lanes it is asked for (``mask``), so a
lane's stream depends on its own history alone: lane ``i`` draws the same numbers whether it runs
among 8 or 2048 lanes. States are stored as int64; the arithmetic wraps modulo 2**64 exactly as
the unsigned reference does, and right shifts are made logical by masking the sign extension.

    rng = LaneRng(num_lanes=64)
    rng.seed(7, lane_ids=torch.arange(64))
    u = rng.uniform((3,), mask=None)        # (64, 3) float32 in [0, 1)
"""

from __future__ import annotations

import torch
from torch import Tensor

from motrix_gym.arguments import is_int

_U64 = 1 << 64


def _i64(c: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return c - _U64 if c >= 1 << 63 else c


GOLDEN = _i64(0x9E3779B97F4A7C15)
MUL1 = _i64(0xBF58476D1CE4E5B9)
MUL2 = _i64(0x94D049BB133111EB)


MAX_DRAWS = 1 << 16
# k * GOLDEN for k = 1..MAX_DRAWS, wrapped to int64. A table rather than ``arange * GOLDEN``:
# Inductor folds the latter into an index expression and overflows evaluating it exactly.
_GOLDEN_STEPS = torch.tensor([_i64(k * (GOLDEN % _U64) % _U64) for k in range(1, MAX_DRAWS + 1)],
                             dtype=torch.int64, device="cpu")


def _shr(x: Tensor, k: int) -> Tensor:
    """Logical right shift of int64 bits."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def mix64(z: Tensor) -> Tensor:
    """SplitMix64's output function (a bijection of 64-bit values)."""
    z = (z ^ _shr(z, 30)) * MUL1
    z = (z ^ _shr(z, 27)) * MUL2
    return z ^ _shr(z, 31)


def check_seed(seed: object) -> None:
    """ValueError unless ``seed`` can seed the lanes: an int in [0, 2**64)."""
    if not is_int(seed) or not 0 <= seed < _U64:
        raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")


def seed_states(seed: int, lane_ids: Tensor) -> Tensor:
    """Initial state of each lane from ``(seed, global lane id)``."""
    check_seed(seed)
    base = mix64(torch.tensor(_i64(seed), dtype=torch.int64, device=lane_ids.device))
    return mix64(base ^ mix64(lane_ids.to(torch.int64) + 1))


class LaneRng:
    """One SplitMix64 stream per lane; every random draw of the runtime comes from here."""

    def __init__(self, num_lanes: int, device: torch.device | str = "cpu") -> None:
        self.state = torch.zeros(num_lanes, dtype=torch.int64, device=device)
        self.steps = _GOLDEN_STEPS.to(self.state.device)  # on the lanes' device: no copy per draw

    def seed(self, seed: int, lane_ids: Tensor) -> None:
        self.state.copy_(seed_states(seed, lane_ids))

    def bits(self, n: int, mask: Tensor | None = None) -> Tensor:
        """``(lanes, n)`` raw 64-bit outputs; lanes outside ``mask`` keep their state."""
        if not 0 < n <= MAX_DRAWS:
            raise ValueError(f"a draw takes 1 to {MAX_DRAWS} numbers per lane, asked for {n}")
        out = mix64(self.state.unsqueeze(-1) + self.steps[:n])
        advanced = self.state + _i64(n * GOLDEN % _U64)
        self.state.copy_(advanced if mask is None else torch.where(mask, advanced, self.state))
        return out

    def uniform(self, shape: tuple[int, ...] = (), mask: Tensor | None = None) -> Tensor:
        """``(lanes, *shape)`` float32 uniform in [0, 1), from the top 24 bits (exact in float32)."""
        n = 1
        for s in shape:
            n *= s
        u = _shr(self.bits(n, mask), 40).to(torch.float32) * (1.0 / (1 << 24))
        return u.reshape(self.state.shape[0], *shape)

    def range(self, lo: Tensor | float, hi: Tensor | float, shape: tuple[int, ...] = (),
              mask: Tensor | None = None) -> Tensor:
        """Uniform in ``[lo, hi)``, broadcast to ``(lanes, *shape)``."""
        return lo + (hi - lo) * self.uniform(shape, mask)

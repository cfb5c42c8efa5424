"""Event terms: ``func(env, mask, **params)`` rewrites the state of the lanes in ``mask``
mid-episode (the runtime writes them into the simulation afterwards)."""

from __future__ import annotations

import torch
from torch import Tensor

from motrix_gym.manager.terms import NonNegative
from motrix_gym.runtime.context import Context

Amplitudes3 = tuple[NonNegative, NonNegative, NonNegative]  # x, y, z


def push_by_velocity(env: Context, mask: Tensor, lin: Amplitudes3 = (0.5, 0.5, 0.2),
                     ang: Amplitudes3 = (0.5, 0.5, 0.8)) -> None:
    """Add uniform random root velocity (world linear, body angular) to the lanes in ``mask``: each
    axis in [-a, a] for its amplitude a in ``lin`` and ``ang``."""
    u = env.rng.uniform((6,), mask) * 2.0 - 1.0
    scale = torch.tensor([*lin, *ang], device=env.device)
    v = env.qvel[:, env.root_dof:env.root_dof + 6]
    v.copy_(torch.where(mask.unsqueeze(-1), v + u * scale, v))

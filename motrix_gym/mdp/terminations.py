"""Termination terms: ``(lanes,)`` bool."""

from __future__ import annotations

import math
from typing import Annotated

from torch import Tensor

from motrix_gym.manager.resolver import SensorSlice
from motrix_gym.manager.terms import AtLeast, AtMost
from motrix_gym.mdp.observations import in_contact, projected_gravity
from motrix_gym.runtime.context import Context

TiltLimit = Annotated[float, AtLeast(0.0, strict=True), AtMost(math.pi, strict=True)]  # from upright, rad


def time_out(env: Context) -> Tensor:
    return env.episode_step >= env.max_episode_steps


def illegal_contact(env: Context, sensors: tuple[SensorSlice, ...]) -> Tensor:
    """Any of the given contact sensors touches the ground."""
    return in_contact(env, sensors).any(-1)


def bad_orientation(env: Context, limit_angle: TiltLimit) -> Tensor:
    """Root tilted more than ``limit_angle`` radians from upright, in (0, pi): no tilt exceeds pi."""
    cos_tilt = -projected_gravity(env)[:, 2]
    return cos_tilt < math.cos(limit_angle)


def root_height_below(env: Context, min_height: float) -> Tensor:
    """The root is less than ``min_height`` above the ground under it."""
    return env.root_height() < min_height


def physics_diverged(env: Context) -> Tensor:
    """Lanes whose state went non-finite or too fast (flagged by the runtime after stepping)."""
    return env.diverged

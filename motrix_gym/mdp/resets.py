"""Reset terms: write the state of the lanes in ``mask`` (in place, other lanes untouched)."""

from __future__ import annotations

import torch

from motrix_gym.math import quat_from_axis_angle, quat_mul
from motrix_gym.runtime.context import Context


def reset_default_pose(env: Context, mask: torch.Tensor, joint_noise: float = 0.0,
                       yaw_range: float = 0.0, vel_noise: float = 0.0) -> None:
    """Default pose, root yaw uniform in +-``yaw_range``, joints +-``joint_noise`` (clamped to
    their limits), every velocity uniform in +-``vel_noise``."""
    nq, nv = env.qpos.shape[1], env.qvel.shape[1]
    u = env.rng.uniform((1 + nq + nv,), mask) * 2.0 - 1.0
    qpos = env.default_qpos + joint_noise * u[:, 1:1 + nq] * env.joint_noise_mask
    qpos = torch.maximum(torch.minimum(qpos, env.qpos_limits[:, 1]), env.qpos_limits[:, 0])
    z = torch.tensor([0.0, 0.0, 1.0], device=env.device).expand(env.num_lanes, 3)
    yaw = quat_from_axis_angle(z, yaw_range * u[:, 0])
    qpos = torch.cat((qpos[:, :3], quat_mul(yaw, qpos[:, 3:7]), qpos[:, 7:]), dim=-1)
    qvel = vel_noise * u[:, 1 + nq:]
    m = mask.unsqueeze(-1)
    env.qpos.copy_(torch.where(m, qpos, env.qpos))
    env.qvel.copy_(torch.where(m, qvel, env.qvel))

"""Reset terms: write the state of the lanes in ``mask`` (in place, other lanes untouched)."""

from __future__ import annotations

import torch

from motrix_gym.manager.terms import NonNegative
from motrix_gym.math import quat_from_axis_angle, quat_mul
from motrix_gym.mdp.command_names import TerrainCurriculumName
from motrix_gym.runtime.context import Context


def reset_default_pose(env: Context, mask: torch.Tensor, joint_noise: NonNegative = 0.0,
                       yaw_range: NonNegative = 0.0, vel_noise: NonNegative = 0.0,
                       origins: TerrainCurriculumName | None = None, xy_noise: NonNegative = 0.0,
                       lift: NonNegative = 0.0) -> None:
    """Default pose, root yaw uniform in +-``yaw_range``, joints +-``joint_noise`` (clamped to
    their limits), every velocity uniform in +-``vel_noise``. The root stands at the ``origin``
    of the command named ``origins`` (a terrain curriculum; none: the world origin), moved by up
    to ``xy_noise`` in x and y, ``lift`` m above its default height over the ground there (so
    that noisy joints do not push a foot into the ground)."""
    nq, nv = env.qpos.shape[1], env.qvel.shape[1]
    u = env.rng.uniform((3 + nq + nv,), mask) * 2.0 - 1.0
    qpos = env.default_qpos + joint_noise * u[:, 3:3 + nq] * env.joint_noise_mask
    qpos = torch.maximum(torch.minimum(qpos, env.qpos_limits[:, 1]), env.qpos_limits[:, 0])
    a = env.root_qpos
    xy = xy_noise * u[:, 1:3]
    if origins is not None:
        xy = xy + env.commands[origins].origin[:, :2]
    z = env.default_qpos[a + 2] + lift + env.terrain.height(xy[:, 0], xy[:, 1])
    z_axis = torch.tensor([0.0, 0.0, 1.0], device=env.device).expand(u.shape[0], 3)
    yaw = quat_from_axis_angle(z_axis, yaw_range * u[:, 0])
    root = torch.cat((xy, z.unsqueeze(-1), quat_mul(yaw, qpos[:, a + 3:a + 7])), dim=-1)
    qpos = torch.cat((qpos[:, :a], root, qpos[:, a + 7:]), dim=-1)
    qvel = vel_noise * u[:, 3 + nq:]
    m = mask.unsqueeze(-1)
    env.qpos.copy_(torch.where(m, qpos, env.qpos))
    env.qvel.copy_(torch.where(m, qvel, env.qvel))

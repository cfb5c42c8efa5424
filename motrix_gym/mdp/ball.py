"""Terms of a robot standing on a free ball: the ball's state seen from the base, how centred it
is under the feet, and the reset that stands the robot on top of it.

The ball is a ``FreeBody`` reference (its free joint's addresses); its per-lane radius is
``env.ball_radius`` (drawn at reset when the task randomises it). Base-frame values reflect
through the base's x-z plane, world-frame ones through the world's (``@reflects``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from motrix_gym.manager.resolver import RootIndex
from motrix_gym.manager.terms import NonNegative, Positive, reflects
from motrix_gym.math import quat_apply_inverse, quat_from_axis_angle, quat_mul
from motrix_gym.mdp.command_names import FeetStateName
from motrix_gym.runtime.context import Context


@reflects((1, -1, 1))
def ball_pos_w(env: Context, ball: RootIndex) -> Tensor:
    return env.qpos[:, ball.qpos:ball.qpos + 3]


@reflects((1, -1, 1))
def ball_vel_w(env: Context, ball: RootIndex) -> Tensor:
    return env.qvel[:, ball.dof:ball.dof + 3]


@reflects((1, -1, 1))
def ball_pos_b(env: Context, ball: RootIndex) -> Tensor:
    """The ball's centre relative to the base, in the base frame."""
    return quat_apply_inverse(env.root_quat(), ball_pos_w(env, ball) - env.root_pos())


@reflects((1, -1, 1))
def ball_vel_b(env: Context, ball: RootIndex) -> Tensor:
    """The ball's velocity relative to the base's, in the base frame."""
    return quat_apply_inverse(env.root_quat(), ball_vel_w(env, ball) - env.root_lin_vel_w())


@reflects((1, -1, 1, 1, -1, 1))
def ball_state_w(env: Context, ball: RootIndex) -> Tensor:
    """World position and linear velocity of the ball (6)."""
    return torch.cat((ball_pos_w(env, ball), ball_vel_w(env, ball)), dim=-1)


def ball_offset(env: Context, ball: RootIndex, feet: FeetStateName) -> Tensor:
    """Horizontal distance (m) of the ball's centre from the midpoint of the soles (the
    ``FeetState`` command named ``feet``)."""
    mid = env.commands[feet].sole_pos(env)[..., :2].mean(1)
    return (ball_pos_w(env, ball)[:, :2] - mid).norm(dim=-1)


# -------------------------------------------------------------------- rewards
def ball_centred(env: Context, ball: RootIndex, feet: FeetStateName, std: Positive) -> Tensor:
    """exp(-offset^2 / std^2): 1 with the ball right under the middle of the feet."""
    return torch.exp(-ball_offset(env, ball, feet).square() / std**2)


def height_above_ball(env: Context, ball: RootIndex, target: float) -> Tensor:
    """Squared difference of the base's height above the ball's top from ``target``."""
    top = ball_pos_w(env, ball)[:, 2] + env.ball_radius
    return (env.root_pos()[:, 2] - top - target).square()


def upright(env: Context) -> Tensor:
    """The cosine of the base's tilt (1 upright)."""
    q = env.root_quat()
    g = torch.tensor([0.0, 0.0, -1.0], device=env.device).expand(q.shape[0], 3)
    return -quat_apply_inverse(q, g)[:, 2]


# -------------------------------------------------------------------- terminations
def ball_off_centre(env: Context, ball: RootIndex, feet: FeetStateName, max_offset: Positive) -> Tensor:
    """The ball rolled more than ``max_offset`` times its radius out from under the feet."""
    return ball_offset(env, ball, feet) > max_offset * env.ball_radius


def base_below_ball_top(env: Context, ball: RootIndex, min_height: float) -> Tensor:
    """The base is less than ``min_height`` above the ball's top (it slid down the ball)."""
    top = ball_pos_w(env, ball)[:, 2] + env.ball_radius
    return env.root_pos()[:, 2] - top < min_height


# -------------------------------------------------------------------- reset
def reset_on_ball(env: Context, mask: Tensor, ball: RootIndex, stance_height: float, foot_reach: NonNegative,
                  foot_radius: NonNegative, sink: NonNegative = 0.0, ball_xy_noise: NonNegative = 0.0,
                  ball_vel_noise: NonNegative = 0.0, base_xy_noise: NonNegative = 0.0, joint_noise: NonNegative = 0.0,
                  yaw_range: NonNegative = 0.0) -> None:
    """The ball at rest on the ground (its centre moved by up to ``ball_xy_noise``, velocities up
    to ``ball_vel_noise``); the robot in its default pose (the stance on the ball) above it,
    level, its base moved by up to ``base_xy_noise`` and turned by up to ``yaw_range``, joints
    +-``joint_noise``. The stance puts every sole ``foot_reach`` m from the base's vertical axis
    and ``stance_height`` m below the base: the base's height is where soles of ``foot_radius``
    rest on this lane's ball, less ``sink`` (the soft ball gives a little under the feet, so all
    four touch despite the noise)."""
    nq, nv = env.qpos.shape[1], env.qvel.shape[1]
    u = env.rng.uniform((8 + nq,), mask) * 2.0 - 1.0
    r = env.ball_radius
    centre = torch.stack((ball_xy_noise * u[:, 0], ball_xy_noise * u[:, 1], r), dim=-1)
    reach = (r + foot_radius).square() - foot_reach**2
    base_z = centre[:, 2] + reach.clamp_min(0.0).sqrt() + stance_height - sink
    base = torch.stack((centre[:, 0] + base_xy_noise * u[:, 2], centre[:, 1] + base_xy_noise * u[:, 3], base_z), -1)
    z_axis = torch.tensor([0.0, 0.0, 1.0], device=env.device).expand(u.shape[0], 3)
    a = env.root_qpos
    quat = quat_mul(quat_from_axis_angle(z_axis, yaw_range * u[:, 4]), env.default_qpos[a + 3:a + 7].expand(
        u.shape[0], 4))
    qpos = env.default_qpos + joint_noise * u[:, 8:8 + nq] * env.joint_noise_mask
    qpos = torch.maximum(torch.minimum(qpos, env.qpos_limits[:, 1]), env.qpos_limits[:, 0])
    qpos = torch.cat((qpos[:, :a], base, quat, qpos[:, a + 7:]), dim=-1)
    qpos = torch.cat((qpos[:, :ball.qpos], centre, qpos[:, ball.qpos + 3:]), dim=-1)
    qvel = torch.zeros_like(env.qvel)
    ball_vel = ball_vel_noise * u[:, 5:8]
    qvel = torch.cat((qvel[:, :ball.dof], ball_vel, qvel[:, ball.dof + 3:]), dim=-1)
    m = mask.unsqueeze(-1)
    env.qpos.copy_(torch.where(m, qpos, env.qpos))
    env.qvel.copy_(torch.where(m, qvel[:, :nv], env.qvel))

"""Reward terms: ``(lanes,)`` float32 per-step values, before weight and ``step_dt``."""

from __future__ import annotations

import torch
from torch import Tensor

from motrix_gym.manager.resolver import JointIndex, SensorSlice
from motrix_gym.manager.terms import Fraction, NonNegative, Positive
from motrix_gym.mdp.command_names import FeetStateName, GaitClockName, VelocityCommandName
from motrix_gym.mdp.observations import base_lin_vel, in_contact, projected_gravity
from motrix_gym.runtime.context import Context


def track_lin_vel_xy(env: Context, command: VelocityCommandName, std: Positive) -> Tensor:
    """exp(-|v_xy - v_cmd|^2 / std^2), velocity in the root frame."""
    err = (env.commands[command].value[:, :2] - base_lin_vel(env)[:, :2]).square().sum(-1)
    return torch.exp(-err / std**2)


def track_ang_vel_z(env: Context, command: VelocityCommandName, std: Positive) -> Tensor:
    err = (env.commands[command].value[:, 2] - env.root_ang_vel_b()[:, 2]).square()
    return torch.exp(-err / std**2)


def flat_orientation(env: Context) -> Tensor:
    """Squared tilt: the xy part of gravity in the root frame."""
    return projected_gravity(env)[:, :2].square().sum(-1)


def ang_vel_xy(env: Context) -> Tensor:
    return env.root_ang_vel_b()[:, :2].square().sum(-1)


def action_rate(env: Context) -> Tensor:
    return (env.action - env.last_action).square().sum(-1)


def joint_pose(env: Context, joints: JointIndex) -> Tensor:
    """Squared deviation of the joints from the default pose."""
    return (env.qpos[:, joints.qpos] - env.default_qpos[joints.qpos]).square().sum(-1)


def feet_phase(env: Context, clock: GaitClockName, sensors: tuple[SensorSlice, SensorSlice]) -> Tensor:
    """Fraction of feet whose contact matches the gait clock (left stance in the first half
    of the period, right in the second; both in stance for standing lanes)."""
    gait = env.commands[clock]
    standing = env.commands[gait.command].standing
    contact = in_contact(env, sensors)
    left_stance = gait.phase < 0.5
    want = torch.stack((left_stance | standing, ~left_stance | standing), dim=-1)
    return (contact == want).float().mean(-1)


def feet_air_time(env: Context, feet: FeetStateName, command: VelocityCommandName, threshold: NonNegative) -> Tensor:
    """On each touchdown, the air time of that foot's swing beyond ``threshold`` s, summed over
    feet (zero for lanes the velocity ``command`` asks to stand)."""
    f = env.commands[feet]
    reward = ((f.last_air_time - threshold) * f.first_contact).sum(-1)
    return reward * (~env.commands[command].standing).float()


def foot_slip(env: Context, feet: FeetStateName) -> Tensor:
    """Squared horizontal speed of the soles that touch the ground, summed over feet."""
    f = env.commands[feet]
    return (f.vel[..., :2].square().sum(-1) * f.contact).sum(-1)


def lin_vel_z(env: Context) -> Tensor:
    """Squared vertical speed of the base (in its own frame)."""
    return base_lin_vel(env)[:, 2].square()


def base_height(env: Context, target: float) -> Tensor:
    """Squared difference of the root's height above the ground from ``target``."""
    return (env.root_height() - target).square()


def joint_torques(env: Context) -> Tensor:
    """Sum of squared actuator forces (N m), as the physics applied them in its last substep."""
    return env.actuator_force.square().sum(-1)


def joint_acc(env: Context, joints: JointIndex) -> Tensor:
    """Sum of squared joint accelerations (rad/s^2) of the physics' last substep."""
    return env.qacc[:, joints.dof].square().sum(-1)


def joint_limits(env: Context, soft: Fraction = 0.9) -> Tensor:
    """How far joints are beyond ``soft`` x their range (rad, summed); ``soft`` in (0, 1], as
    MuJoCo holds joints within their range."""
    lo, hi = env.qpos_limits[:, 0], env.qpos_limits[:, 1]
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * soft
    finite = torch.isfinite(half)
    mid, half = torch.where(finite, mid, 0.0), torch.where(finite, half, 1.0)
    excess = ((env.qpos - mid).abs() - half).clamp_min(0.0) * finite
    return excess.sum(-1)


def undesired_contacts(env: Context, sensors: tuple[SensorSlice, ...]) -> Tensor:
    """Number of listed bodies touching the ground."""
    return in_contact(env, sensors).float().sum(-1)


def alive(env: Context) -> Tensor:
    return torch.ones_like(env.episode_step, dtype=torch.float32)

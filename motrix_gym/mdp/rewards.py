"""Reward terms: ``(lanes,)`` float32 per-step values, before weight and ``step_dt``."""

from __future__ import annotations

import torch
from torch import Tensor

from motrix_gym.manager.resolver import JointIndex, SensorSlice
from motrix_gym.mdp.observations import base_lin_vel, in_contact, projected_gravity
from motrix_gym.runtime.context import Context


def track_lin_vel_xy(env: Context, command: str, std: float) -> Tensor:
    """exp(-|v_xy - v_cmd|^2 / std^2), velocity in the root frame."""
    err = (env.commands[command].value[:, :2] - base_lin_vel(env)[:, :2]).square().sum(-1)
    return torch.exp(-err / std**2)


def track_ang_vel_z(env: Context, command: str, std: float) -> Tensor:
    err = (env.commands[command].value[:, 2] - env.qvel[:, 5]).square()
    return torch.exp(-err / std**2)


def flat_orientation(env: Context) -> Tensor:
    """Squared tilt: the xy part of gravity in the root frame."""
    return projected_gravity(env)[:, :2].square().sum(-1)


def ang_vel_xy(env: Context) -> Tensor:
    return env.qvel[:, 3:5].square().sum(-1)


def action_rate(env: Context) -> Tensor:
    return (env.action - env.last_action).square().sum(-1)


def joint_pose(env: Context, joints: JointIndex) -> Tensor:
    """Squared deviation of the joints from the default pose."""
    return (env.qpos[:, joints.qpos] - env.default_qpos[joints.qpos]).square().sum(-1)


def feet_phase(env: Context, clock: str, sensors: tuple[SensorSlice, SensorSlice]) -> Tensor:
    """Fraction of feet whose contact matches the gait clock (left stance in the first half
    of the period, right in the second; both in stance for standing lanes)."""
    gait = env.commands[clock]
    standing = env.commands[gait.command].standing
    contact = in_contact(env, sensors)
    left_stance = gait.phase < 0.5
    want = torch.stack((left_stance | standing, ~left_stance | standing), dim=-1)
    return (contact == want).float().mean(-1)


def feet_air_time(env: Context, clock: str, threshold: float) -> Tensor:
    """On touchdown, reward air time beyond ``threshold`` s (zero for standing lanes)."""
    gait = env.commands[clock]
    reward = ((gait.last_air_time - threshold) * gait.first_contact).sum(-1)
    return reward * (~env.commands[gait.command].standing).float()


def alive(env: Context) -> Tensor:
    return torch.ones(env.num_lanes, device=env.device)

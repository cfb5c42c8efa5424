"""Observation terms: ``(lanes, d)`` float32 tensors.

``@reflects`` says how each reflects with the robot through its sagittal (x-z) plane: a vector
keeps x and z and negates y, an angular velocity (an axial vector) negates x and z; joint values
take their counterparts'. A command's or a clock's reflection is the task's to say."""

from __future__ import annotations

import torch
from torch import Tensor

from motrix_gym.manager.resolver import JointIndex, SensorSlice
from motrix_gym.manager.terms import CommandName, reflects
from motrix_gym.math import quat_apply_inverse
from motrix_gym.mdp.command_names import GaitClockName
from motrix_gym.runtime.context import Context


@reflects((1, -1, 1))
def base_lin_vel(env: Context) -> Tensor:
    """Root linear velocity in the root frame (a free joint's linear velocity is world-frame)."""
    return quat_apply_inverse(env.root_quat(), env.root_lin_vel_w())


@reflects((-1, 1, -1))
def base_ang_vel(env: Context) -> Tensor:
    """Root angular velocity in the root frame (a free joint's angular velocity is local)."""
    return env.root_ang_vel_b()


@reflects((1, -1, 1))
def projected_gravity(env: Context) -> Tensor:
    """Unit gravity direction in the root frame."""
    q = env.root_quat()
    g = torch.tensor([0.0, 0.0, -1.0], device=env.device).expand(q.shape[0], 3)
    return quat_apply_inverse(q, g)


@reflects("joints")
def joint_pos_rel(env: Context, joints: JointIndex) -> Tensor:
    return env.qpos[:, joints.qpos] - env.default_qpos[joints.qpos]


@reflects("joints")
def joint_vel(env: Context, joints: JointIndex) -> Tensor:
    return env.qvel[:, joints.dof]


@reflects("actions")
def last_action(env: Context) -> Tensor:
    return env.action


def command(env: Context, name: CommandName) -> Tensor:
    """The ``value`` of a command term, e.g. a velocity target."""
    return env.commands[name].value


def gait_phase(env: Context, name: GaitClockName) -> Tensor:
    """sin and cos of a gait clock's phase."""
    phi = 2.0 * torch.pi * env.commands[name].phase
    return torch.stack((torch.sin(phi), torch.cos(phi)), dim=-1)


def in_contact(env: Context, sensors: tuple[SensorSlice, ...]) -> Tensor:
    """(lanes, len(sensors)) bool: which contact sensors report a contact."""
    return torch.stack([env.sensordata[:, s.adr] > 0 for s in sensors], dim=-1)

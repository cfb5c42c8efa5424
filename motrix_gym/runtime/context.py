"""The data every term sees: batched float32 state, actions, episode counters and the lane RNG.

All tensors have a leading lane dimension padded to a multiple of 64 (``num_lanes``); only the
first ``num_envs`` rows are simulated. Padding keeps ATen's vectorised kernels on the same code
path for every lane whatever the number of lanes, so a lane's numbers do not depend on how many
lanes run beside it. Tensors are allocated once and only ever written in place.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from motrix_gym.math.heightfield import HeightField
from motrix_gym.runtime.rng import LaneRng

LANE_PAD = 64


def padded(n: int) -> int:
    return -(-n // LANE_PAD) * LANE_PAD


class Context:
    """State buffers of one batch of lanes.

    Attributes (``L`` = padded lanes):
        qpos, qvel: (L, nq), (L, nv) generalized coordinates and velocities.
        xpos, xquat: (L, nbody, 3), (L, nbody, 4) body frames in the world.
        sensordata: (L, nsensordata).
        cvel, subtree_com: (L, nbody, 6), (L, nbody, 3) when the task reads them.
        action, last_action: (L, na) policy actions this step and the step before.
        episode_step: (L,) int64 env steps since the lane's reset.
        default_qpos: (nq,) the robot's default configuration.
        body_names, joint_names: the model's bodies (world first) and hinge joints, in order.
        robot_body_names: the robot's bodies (its root first), in model order.
        root_body, root_qpos, root_dof: the robot's root body and the addresses of its free
            joint's coordinates (x, y, z, quaternion) and velocities (world linear, local angular).
        terrain: the ground's heights (``math.heightfield.HeightField``; flat: zeros).
        terrain_tiles, terrain_tile_size: a generated terrain's tile centres (rows = difficulty
            levels, columns = sub-terrains) and their side; None and 0 on flat ground.
        commands: command objects by name.
        rng: the lane RNG.
        step_dt: seconds per env step.
    """

    def __init__(self, num_envs: int, nq: int, nv: int, nbody: int, nsensordata: int, na: int,
                 step_dt: float, max_episode_steps: int, default_qpos: Tensor,
                 device: torch.device | str = "cpu") -> None:
        self.num_envs = num_envs
        self.num_lanes = L = padded(num_envs)
        f32 = dict(dtype=torch.float32, device=device)
        self.device = torch.device(device)
        self.qpos = default_qpos.to(**f32).repeat(L, 1)
        self.qvel = torch.zeros(L, nv, **f32)
        self.xpos = torch.zeros(L, nbody, 3, **f32)
        self.xquat = torch.zeros(L, nbody, 4, **f32)
        self.xquat[..., 0] = 1.0
        self.sensordata = torch.zeros(L, nsensordata, **f32)
        self.action = torch.zeros(L, na, **f32)
        self.last_action = torch.zeros(L, na, **f32)
        self.episode_step = torch.zeros(L, dtype=torch.int64, device=device)
        self.default_qpos = default_qpos.to(**f32)
        self.step_dt = step_dt
        self.max_episode_steps = max_episode_steps
        self.rng = LaneRng(L, device=device)
        self.commands: dict[str, Any] = {}
        # Lanes whose physics diverged this step (set by the runtime before evaluate).
        self.diverged = torch.zeros(L, dtype=torch.bool, device=device)
        # Lanes whose qpos/qvel a term rewrote mid-episode (events, teleports): the runtime
        # writes them into the simulation after the graph and clears the mask.
        self.dirty = torch.zeros(L, dtype=torch.bool, device=device)
        # This step's episode ends (the runtime's buffers), for commands that learn from failures.
        self.terminated = torch.zeros(L, dtype=torch.bool, device=device)
        self.truncated = torch.zeros(L, dtype=torch.bool, device=device)
        self.root_body, self.root_qpos, self.root_dof = 1, 0, 0
        self.terrain = HeightField.flat(device)
        self.terrain_tiles: Tensor | None = None  # (rows, cols, 3) tile centres of a generated terrain
        self.terrain_tile_size = 0.0
        self.ball_radius = torch.zeros(L, device=device)  # per lane, when the scene has a ball

    # The robot's root, from its free joint (the resolver names it; other free bodies exist).
    def root_pos(self) -> Tensor:
        return self.qpos[:, self.root_qpos:self.root_qpos + 3]

    def root_quat(self) -> Tensor:
        return self.qpos[:, self.root_qpos + 3:self.root_qpos + 7]

    def root_lin_vel_w(self) -> Tensor:
        return self.qvel[:, self.root_dof:self.root_dof + 3]

    def root_ang_vel_b(self) -> Tensor:
        return self.qvel[:, self.root_dof + 3:self.root_dof + 6]

    def root_height(self) -> Tensor:
        """The root's height above the ground under it."""
        p = self.root_pos()
        return p[:, 2] - self.terrain.height(p[:, 0], p[:, 1])

    def episode_ran(self) -> Tensor:
        """Lanes whose episode ran a step: at a reset, those with an episode to judge (a lane
        reset again before its next step ended its episode at the reset before, judged there)."""
        return self.episode_step > 0

    def add_read(self, name: str, shape: tuple[int, ...]) -> None:
        """A float32 buffer for one more simulation field (e.g. ``cvel``)."""
        setattr(self, name, torch.zeros(self.num_lanes, *shape, device=self.device))

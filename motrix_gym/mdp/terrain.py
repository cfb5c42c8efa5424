"""Terms of generated terrain: the per-lane terrain curriculum and the height scan.

Heights come from ``env.terrain`` (``math.heightfield``), which answers on the triangles MuJoCo
collides with, batched over every lane and point: no ray casts.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from motrix_gym.manager.terms import NonNegative, NonNegativeInt, Positive, draws, reflects
from motrix_gym.math import yaw_cos_sin
from motrix_gym.mdp.command_names import VelocityCommandName
from motrix_gym.mdp.markers import SENSED, Spheres
from motrix_gym.runtime.context import Context


class TerrainCurriculum:
    """Each lane's tile: a difficulty level (row) and a sub-terrain (column); ``origin`` (L, 3)
    is the tile's platform centre, where the lane's robot spawns.

    At a reset that ends an episode (one that ran a step), a lane that walked farther than half
    a tile from where it started moves one level up; one that walked less than half of what its
    velocity command (named ``command``) asks over a whole episode moves one down: the
    straight-line distance a robot tracking that command exactly would cover
    (``commanded_distance``; a turning command walks an arc, and asks for less than its speed
    times the episode). A lane beyond the hardest level goes to a random one. The first reset of
    a lane draws its level in ``[0, max_init_level]`` and its column uniformly. With
    ``enabled=False`` (play) every reset draws a level over all rows. All draws come from the
    lane RNG.
    """

    def __init__(self, env: Context, command: VelocityCommandName, max_init_level: NonNegativeInt = 4,
                 enabled: bool = True) -> None:
        if env.terrain_tiles is None:
            raise ValueError("terrain curriculum: the scene's terrain is flat (it needs generated tiles)")
        L, dev = env.num_lanes, env.device
        self.rows, self.cols = env.terrain_tiles.shape[:2]
        self.tiles = env.terrain_tiles.to(dev).reshape(-1, 3)
        self.command, self.enabled = command, enabled
        self.max_init_level = min(max_init_level, self.rows - 1)
        self.num_envs = env.num_envs
        self.level = torch.zeros(L, dtype=torch.long, device=dev)
        self.col = torch.zeros(L, dtype=torch.long, device=dev)
        self.origin = torch.zeros(L, 3, device=dev)
        self.started = torch.zeros(L, dtype=torch.bool, device=dev)  # the lane has had an episode

    def reset(self, env: Context, mask: Tensor) -> None:
        u = env.rng.uniform((3,), mask)
        first = mask & ~self.started
        walked = (env.root_pos()[:, :2] - self.origin[:, :2]).norm(dim=-1)
        cmd = env.commands[self.command].value
        asked = commanded_distance(cmd[:, :2], cmd[:, 2], env.max_episode_steps * env.step_dt)
        ran = env.episode_ran()
        up = ran & (walked > 0.5 * env.terrain_tile_size)
        down = ran & (walked < 0.5 * asked) & ~up
        level = self.level + up.long() - down.long()
        level = torch.where(level >= self.rows, (u[:, 0] * self.rows).long(), level.clamp(min=0))
        if not self.enabled:
            level = (u[:, 0] * self.rows).long()
        level = torch.where(first, (u[:, 1] * (self.max_init_level + 1)).long(), level)
        col = torch.where(first, (u[:, 2] * self.cols).long(), self.col)
        self.level.copy_(torch.where(mask, level.clamp(max=self.rows - 1), self.level))
        self.col.copy_(torch.where(mask, col.clamp(max=self.cols - 1), self.col))
        self.origin.copy_(torch.where(mask.unsqueeze(-1), self.tiles[self.level * self.cols + self.col], self.origin))
        self.started.logical_or_(mask)

    def update(self, env: Context) -> None:
        pass

    def advance(self, env: Context) -> None:
        pass

    def restart(self) -> None:
        """Every lane draws its first level again at its next reset."""
        self.started.fill_(False)

    def log_totals(self) -> dict[str, tuple[float, float]]:
        """Sums and counts whose ratio ``env.log`` reports (summed over ranks when distributed)."""
        return {"Curriculum/terrain_level": (float(self.level[:self.num_envs].sum()), float(self.num_envs))}


def commanded_distance(v: Tensor, wz: Tensor, seconds: float) -> Tensor:
    """Straight-line distance (m) covered in ``seconds`` by a robot that tracks the base-frame
    velocity ``v`` (lanes, 2) and yaw rate ``wz`` (lanes,) exactly: the chord of an arc,
    ``|v| 2 |sin(wz t / 2) / wz|``, and ``|v| t`` without turning."""
    half = wz * (seconds / 2)
    return v.norm(dim=-1) * seconds * torch.sinc(half / math.pi).abs()


def scan_points(size: tuple[float, float], resolution: float) -> Tensor:
    """(P, 2) grid offsets in the base's yaw frame: x forward over ``size[0]``, y left over ``size[1]``."""
    nx, ny = round(size[0] / resolution) + 1, round(size[1] / resolution) + 1
    x = torch.linspace(-size[0] / 2, size[0] / 2, nx)
    y = torch.linspace(-size[1] / 2, size[1] / 2, ny)
    gx, gy = torch.meshgrid(x, y, indexing="ij")
    return torch.stack((gx.flatten(), gy.flatten()), dim=-1)


def scan_mirror(size: tuple[NonNegative, NonNegative] = (1.6, 1.0), resolution: Positive = 0.1,
                offset: float = 0.5) -> list[int]:
    """The permutation that reflects a ``height_scan`` (its parameters) through the base's x-z
    plane: each point takes the height of the point at the same x and opposite y (the grid is
    symmetric, so that point is the one nearest the reflection)."""
    p = scan_points(size, resolution)
    return torch.cdist(p * torch.tensor([1.0, -1.0]), p).argmin(dim=1).tolist()


def scanned_ground(env: Context, size: tuple[float, float], resolution: float) -> tuple[Tensor, Tensor, Tensor]:
    """World x, y and ground height of each lane's scan points: (lanes, points) each."""
    p = scan_points(size, resolution).to(env.device)
    pos = env.root_pos()
    c, s = yaw_cos_sin(env.root_quat().unsqueeze(1))  # (lanes, 1): broadcast over the points
    px, py = p[:, 0], p[:, 1]
    wx = pos[:, 0:1] + c * px - s * py
    wy = pos[:, 1:2] + s * px + c * py
    return wx, wy, env.terrain.height(wx, wy)


def scan_markers(env: Context, size: tuple[float, float], resolution: float, offset: float) -> tuple[Spheres]:
    """The ground points a ``height_scan`` with these parameters reads, as small red spheres."""
    return (Spheres(torch.stack(scanned_ground(env, size, resolution), dim=-1), SENSED, radius=0.015),)


@draws(scan_markers)
@reflects(scan_mirror)
def height_scan(env: Context, size: tuple[NonNegative, NonNegative] = (1.6, 1.0), resolution: Positive = 0.1,
                offset: float = 0.5) -> Tensor:
    """Height of the base above the ground at a yaw-aligned grid of points around it, minus
    ``offset`` and clipped to [-1, 1] (m): (lanes, points), x-major."""
    _, _, ground = scanned_ground(env, size, resolution)
    return (env.root_pos()[:, 2:3] - ground - offset).clamp(-1.0, 1.0)

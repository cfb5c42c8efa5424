"""Tasks of your own: ``Motrix/G1WalkFlat-v0`` with its velocity-tracking rewards weighted
twice, registered as ``Motrix/G1WalkEager-v0``; and the Go1 on a terrain of its own, ridges of
steps, registered as ``Motrix/Go1WalkRidge-v0``. Import this module and the ids work wherever
the built-in ones do; on the command line, name the module before the task:

    python -m motrix_gym train examples.custom_task:G1WalkEager --minutes 5
    python -m motrix_gym play examples.custom_task:G1WalkEager --out eager.gif

The family's builder (``velocity``) gives the task for any robot and terrain; a task is a table
of terms, so changing one is ``dataclasses.replace``; a sub-terrain is a function of its tile.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from motrix_gym.envs.robots import G1_LEGS, GO1_LEGS
from motrix_gym.envs.walk.rl_cfg import QUADRUPED, WALK
from motrix_gym.envs.walk.velocity import registered, velocity
from motrix_gym.manager.config import SubTerrain, TaskConfig, TerrainConfig
from motrix_gym.manager.terms import NonNegative, Positive
from motrix_gym.registry import register_task
from motrix_gym.sim.terrain import Tile, flat

TRACKING = ("track_lin_vel", "track_ang_vel")


def g1_walk_eager(mode: str = "train", command: Iterable[float] | None = None) -> TaskConfig:
    """G1 on flat ground, tracking rewards x2. ``mode`` and ``command`` are the velocity
    family's make-time options (``play`` passes ``mode="play"``)."""
    cfg = velocity("G1WalkEager", G1_LEGS, mode=mode, command=command)
    return replace(cfg, rewards=tuple(replace(t, weight=2 * t.weight) if t.name in TRACKING else t
                                      for t in cfg.rewards))


ENV_ID = register_task("G1WalkEager", g1_walk_eager, ppo=WALK, robot="Unitree G1 29-DoF",
                       family="velocity tracking, flat, tracking rewards x2")


def ridge(tile: Tile, height: NonNegative = 0.1, width: Positive = 0.5) -> np.ndarray:
    """Steps ``width`` m deep up from the tile's two x borders to a level band across its middle,
    ``height`` m each on the hardest row (the row's difficulty scales them)."""
    x = np.minimum(tile.x, tile.size - tile.x)  # distance to the nearer x border
    return np.floor(np.minimum(x, tile.inner) / width) * height * tile.difficulty


RIDGES = TerrainConfig(sub_terrains=(SubTerrain("flat", flat, proportion=0.2),
                                     SubTerrain("ridge", ridge, proportion=0.8, params={"height": 0.08})))
RIDGE_ID = register_task("Go1WalkRidge", registered("Go1WalkRidge", GO1_LEGS, RIDGES, scan=True), ppo=QUADRUPED,
                         robot="Unitree Go1 12-DoF", family="velocity tracking, ridges of steps, height scan")

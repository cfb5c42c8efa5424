"""A task of your own: ``Motrix/G1WalkFlat-v0`` with its velocity-tracking rewards weighted
twice, registered as ``Motrix/G1WalkEager-v0``. Import this module and the id works wherever the
built-in ones do; on the command line, name the module before the task:

    python -m motrix_gym train examples.custom_task:G1WalkEager --minutes 5
    python -m motrix_gym play examples.custom_task:G1WalkEager --out eager.gif

The family's builder (``velocity``) gives the task for any robot and terrain; a task is a table
of terms, so changing one is ``dataclasses.replace``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from motrix_gym.envs.robots import G1_LEGS
from motrix_gym.envs.walk.rl_cfg import WALK
from motrix_gym.envs.walk.velocity import velocity
from motrix_gym.manager.config import TaskConfig
from motrix_gym.registry import register_task

TRACKING = ("track_lin_vel", "track_ang_vel")


def g1_walk_eager(mode: str = "train", command: Iterable[float] | None = None) -> TaskConfig:
    """G1 on flat ground, tracking rewards x2. ``mode`` and ``command`` are the velocity
    family's make-time options (``play`` passes ``mode="play"``)."""
    cfg = velocity("G1WalkEager", G1_LEGS, mode=mode, command=command)
    return replace(cfg, rewards=tuple(replace(t, weight=2 * t.weight) if t.name in TRACKING else t
                                      for t in cfg.rewards))


ENV_ID = register_task("G1WalkEager", g1_walk_eager, ppo=WALK, robot="Unitree G1 29-DoF",
                       family="velocity tracking, flat, tracking rewards x2")

"""The motrix-gym tasks, installed as ``motrix_gym.envs``.

``TASKS`` maps each task name to the ``module:function`` that builds its TaskConfig; modules are
imported only when a task is made.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskEntry:
    builder: str  # "module:function" returning a TaskConfig
    robot: str
    family: str


TASKS: dict[str, TaskEntry] = {
    "G1WbtDance": TaskEntry("motrix_gym.envs.wbt.g1:dance", "Unitree G1 29-DoF", "motion tracking, dance clip"),
    "G1WbtKick": TaskEntry("motrix_gym.envs.wbt.g1:kick", "Unitree G1 29-DoF", "motion tracking, kick clip"),
    "G1WbtMix": TaskEntry("motrix_gym.envs.wbt.g1:mix", "Unitree G1 29-DoF",
                          "motion tracking, dance + kick + squat + wave"),
    "G1WalkFlat": TaskEntry("motrix_gym.envs.walk.g1:walk_flat", "Unitree G1 29-DoF", "velocity tracking, flat"),
}


def task_config(name: str, **options: Any) -> Any:
    """Build the TaskConfig of task ``name`` with make-time ``options``."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; available: {sorted(TASKS)}")
    module, func = TASKS[name].builder.split(":")
    return getattr(importlib.import_module(module), func)(**options)

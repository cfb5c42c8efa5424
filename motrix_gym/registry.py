"""Gymnasium registration of the Motrix ids, from the one task table ``motrix_gym.envs.TASKS``
(cheap: that table names builders as strings, so neither torch nor MuJoCo is imported)."""

from __future__ import annotations

import gymnasium

from motrix_gym.envs import TASKS, unknown_task

NAMESPACE = "Motrix"
REGISTERED = tuple(TASKS)  # task names, in the table's order


def env_id(task: str) -> str:
    return f"{NAMESPACE}/{task}-v0"


def check_id(value: object) -> str:
    """``value`` if it is a registered id, else a ValueError that lists the registered tasks."""
    if not (isinstance(value, str) and value in {env_id(task) for task in REGISTERED}):
        raise unknown_task(value)
    return value


def register_all() -> None:
    for task in REGISTERED:
        if env_id(task) in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id(task),
            entry_point="motrix_gym.env:MotrixEnv",
            vector_entry_point="motrix_gym.vector_env:MotrixVectorEnv",
            kwargs={"task": task},
            disable_env_checker=False,
        )

"""Gymnasium registration of the Motrix ids (cheap: imports neither torch nor MuJoCo)."""

from __future__ import annotations

import gymnasium

NAMESPACE = "Motrix"

# Task name -> registered version. A task is listed here only once it works end to end.
REGISTERED = ("G1WbtDance", "G1WbtKick", "G1WbtMix", "T1WbtDance", "T1WbtKick", "G1WalkFlat")


def env_id(task: str) -> str:
    return f"{NAMESPACE}/{task}-v0"


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

"""The motrix-gym tasks, installed as ``motrix_gym.envs``.

``TASKS`` maps each task name to the ``module:function`` that builds its TaskConfig; modules are
imported only when a task is made. ``motrix_gym.registry.register_task`` adds tasks of your own.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskEntry:
    builder: str | Callable[..., Any]  # returns a TaskConfig; "module:function" is imported when first made
    robot: str
    family: str
    ppo: Any  # train's default PpoConfig, or "module:name" of one


G1, T1, GO1 = "Unitree G1 29-DoF", "Booster T1 29-DoF", "Unitree Go1 12-DoF"
WBT, WALK = "motrix_gym.envs.wbt.tracking", "motrix_gym.envs.walk.velocity"
WBT_PPO, WALK_PPO = "motrix_gym.envs.wbt.rl_cfg:TRACKING", "motrix_gym.envs.walk.rl_cfg:WALK"
QUAD_PPO = "motrix_gym.envs.walk.rl_cfg:QUADRUPED"

TASKS: dict[str, TaskEntry] = {
    "G1WbtDance": TaskEntry(f"{WBT}:g1_dance", G1, "motion tracking, dance clip", WBT_PPO),
    "G1WbtKick": TaskEntry(f"{WBT}:g1_kick", G1, "motion tracking, kick clip", WBT_PPO),
    "G1WbtMix": TaskEntry(f"{WBT}:g1_mix", G1, "motion tracking, dance + kick + squat + wave", WBT_PPO),
    "T1WbtDance": TaskEntry(f"{WBT}:t1_dance", T1, "motion tracking, dance clip", WBT_PPO),
    "T1WbtKick": TaskEntry(f"{WBT}:t1_kick", T1, "motion tracking, kick clip", WBT_PPO),
    "G1WalkFlat": TaskEntry(f"{WALK}:g1_flat", G1, "velocity tracking, flat", WALK_PPO),
    "G1WalkRough": TaskEntry(f"{WALK}:g1_rough", G1, "velocity tracking, rough heightfield", WALK_PPO),
    "G1WalkStairs": TaskEntry(f"{WALK}:g1_stairs", G1, "velocity tracking, stairs, height scan", WALK_PPO),
    "G1WalkSlope": TaskEntry(f"{WALK}:g1_slope", G1, "velocity tracking, slopes, height scan", WALK_PPO),
    "T1WalkFlat": TaskEntry(f"{WALK}:t1_flat", T1, "velocity tracking, flat", WALK_PPO),
    "T1WalkRough": TaskEntry(f"{WALK}:t1_rough", T1, "velocity tracking, rough heightfield", WALK_PPO),
    "Go1WalkFlat": TaskEntry(f"{WALK}:go1_flat", GO1, "quadruped velocity tracking, flat", QUAD_PPO),
    "Go1WalkRough": TaskEntry(f"{WALK}:go1_rough", GO1, "quadruped velocity tracking, rough", QUAD_PPO),
    "Go1WalkStairs": TaskEntry(f"{WALK}:go1_stairs", GO1, "quadruped velocity tracking, stairs, height scan",
                               QUAD_PPO),
    "Go1BallBalance": TaskEntry("motrix_gym.envs.ball.balance:go1_ball", GO1, "balance on a free yoga ball",
                                "motrix_gym.envs.ball.rl_cfg:BALANCE"),
}


def _load(ref: Any) -> Any:
    if not isinstance(ref, str):
        return ref
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def unknown_task(value: object) -> ValueError:
    """The one error for a task that is not in the table, listing those that are."""
    return ValueError(f"unknown task {value!r}; registered: {', '.join(TASKS)}, each as Motrix/<name>-v0")


def task_name(env_id: str) -> str:
    """``"Motrix/G1WalkFlat-v0"`` (or ``"G1WalkFlat"``) -> ``"G1WalkFlat"``."""
    name = env_id.split(":")[-1].removeprefix("Motrix/").removesuffix("-v0") if isinstance(env_id, str) else None
    if name not in TASKS:
        raise unknown_task(env_id)
    return name


def robot_label(name: str, cfg: Any) -> str:
    """Task ``name``'s robot as the table describes it, else (a task registered without a
    description) the name of its TaskConfig ``cfg``'s robot model."""
    return TASKS[name].robot or cfg.scene.robot.name


def ppo_config(name: str) -> Any:
    """The PpoConfig that ``train`` uses for task ``name`` by default."""
    return _load(TASKS[task_name(name)].ppo)


def _takes(builder: Callable[..., Any]) -> tuple[str, ...] | None:
    params = inspect.signature(builder).parameters
    return None if any(p.kind is p.VAR_KEYWORD for p in params.values()) else tuple(params)


def task_options(name: str) -> tuple[str, ...] | None:
    """The make-time options task ``name``'s builder takes, in its order (None: any keyword, which
    it passes on)."""
    return _takes(_load(TASKS[name].builder))


def task_config(name: str, overrides: Any = None, **options: Any) -> Any:
    """Build the TaskConfig of task ``name`` (``"G1WalkFlat"`` or its id, ``"Motrix/G1WalkFlat-v0"``)
    with make-time ``options``, then change it by ``overrides`` (``{"rewards.alive.weight": 0.0,
    ...}``: ``manager/overrides.py``), which every task takes.

    An option the task does not take is a TypeError naming it, as Python reports an unexpected
    keyword argument (trainers such as TorchRL rely on that wording to fall back, e.g. to their
    own frame skipping: a task's control rate is fixed by its decimation)."""
    name = task_name(name)
    builder = _load(TASKS[name].builder)
    params = _takes(builder)  # None: any keyword, checked where it is passed on
    unknown = [] if params is None else sorted(k for k in options if k not in params)
    if unknown:
        takes = sorted(params) or "none"
        raise TypeError(f"Motrix/{name}-v0 got an unexpected keyword argument {unknown[0]!r} "
                        f"(its task options: {takes}; unknown: {unknown})")
    from motrix_gym.manager.config import TaskConfig

    cfg = builder(**options)
    if not isinstance(cfg, TaskConfig):
        raise TypeError(f"the builder of Motrix/{name}-v0 returned a {type(cfg).__name__}, not a TaskConfig")
    if overrides is None:
        return cfg
    from motrix_gym.manager.overrides import apply

    return apply(cfg, overrides)

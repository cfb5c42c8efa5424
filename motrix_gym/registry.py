"""Gymnasium registration of the Motrix ids, from the one task table ``motrix_gym.envs.TASKS``
(cheap: that table names builders as strings, so neither torch nor MuJoCo is imported), and of
tasks of your own (``register_task``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium

from motrix_gym.envs import TASKS, TaskEntry, unknown_task

NAMESPACE = "Motrix"
BUILTIN = tuple(TASKS)  # the tasks this package ships, in the table's order


def env_id(task: str) -> str:
    return f"{NAMESPACE}/{task}-v0"


def check_id(value: object) -> str:
    """``value`` if it is a registered id, else a ValueError that lists the registered tasks."""
    if not (isinstance(value, str) and value in {env_id(task) for task in TASKS}):
        raise unknown_task(value)
    return value


def check_task_options(value: object) -> dict[str, Any]:
    """A copy of ``value``, a task's make-time options (None: none), else a ValueError."""
    if not (value is None or isinstance(value, Mapping)):
        raise ValueError(f"task_options must be a mapping of the task's make-time options, got {value!r}")
    return dict(value or {})


def _register(task: str) -> None:
    gymnasium.register(
        id=env_id(task),
        entry_point="motrix_gym.env:MotrixEnv",
        vector_entry_point="motrix_gym.vector_env:MotrixVectorEnv",
        kwargs={"task": task},
        disable_env_checker=False,
    )


def register_all() -> None:
    for task in BUILTIN:
        if env_id(task) not in gymnasium.registry:
            _register(task)


def _is_ref(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[\w.]+:\w+", value) is not None


def register_task(name: str, builder: Callable[..., Any] | str, *, ppo: Any, robot: str = "",
                  family: str = "") -> str:
    """Register a task of your own as ``Motrix/<name>-v0``; returns the id. ``gym.make_vec`` and
    ``gym.make``, the adapters, ``train``, ``play`` and ``bench`` (not ``--startup``, whose fresh
    processes know the built-in tasks only) then take it as they take the built-in tasks (on the
    command line, name the module that registers it before the task, as
    Gymnasium's ``make`` takes ``module:id``: ``python -m motrix_gym train mytasks:MyTask``).

    ``builder(**options)`` returns the task's ``TaskConfig`` (a callable, or ``"module:function"``
    imported when the task is first made); ``options`` are the keywords of ``make_vec`` that are
    not the env's own, and ``play`` passes ``mode="play"``. ``ppo`` is the ``PpoConfig`` that
    ``train`` uses by default (or ``"module:name"`` of one). ``robot`` and ``family`` describe
    the task in ``list``.

    Registering a name again replaces the task (a notebook cell run twice), except the built-in
    names, which are refused."""
    from motrix_gym.learn.config import PpoConfig

    if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name)):
        raise ValueError(f"a task name is letters, digits and underscores, starting with a letter, got {name!r}")
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in task; register yours under another name")
    if not (callable(builder) or _is_ref(builder)):
        raise TypeError(f"task {name!r}: builder must be a callable that returns a TaskConfig or a "
                        f"'module:function' string, got {builder!r}")
    if not (isinstance(ppo, PpoConfig) or _is_ref(ppo)):
        raise TypeError(f"task {name!r}: ppo must be a PpoConfig or a 'module:name' string, got {ppo!r}")
    if not (isinstance(robot, str) and isinstance(family, str)):
        raise TypeError(f"task {name!r}: robot and family must be strings, got {robot!r} and {family!r}")
    TASKS[name] = TaskEntry(builder, robot, family, ppo)
    _register(name)
    return env_id(name)

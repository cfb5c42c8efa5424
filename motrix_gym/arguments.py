"""Checks of the values users pass: ``is_int`` for the API's counts, lanes and seeds,
``is_number`` for the numbers of task configs, and the
command line's argument types that check a number's range or a device's name, so that a bad
value is argparse's one-line error naming the option, before anything runs.

    p.add_argument("--steps", type=count(1), default=200)
    p.add_argument("--minutes", type=amount(positive=True))
    p.add_argument("--device", type=device_name, default="cpu")
    p.add_argument("--command", type=velocity_command)
    p.add_argument("--task-option", type=task_option, action="append")
    p.add_argument("--out", type=out_path((".gif",)))
    p.add_argument("env_id", type=task_id)
"""

from __future__ import annotations

import argparse
import math
import numbers
import re
from collections.abc import Callable
from pathlib import Path


def is_int(x: object) -> bool:
    """An int that is not a bool (``True`` is an int to Python, never a count, lane or seed here)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: object, finite: bool = True) -> bool:
    """A real number that is not a bool, and finite unless ``finite`` is False."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and (not finite or math.isfinite(x))


def count(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An int in ``[lo, hi]`` (no upper bound when ``hi`` is None)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            within = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"must be {within}, got {value}")
        return value

    return parse


SEED = count(0, 2**64 - 1)  # every lane's stream is seeded from one such int


def amount(positive: bool) -> Callable[[str], float]:
    """A finite float, > 0 (``positive``) or >= 0."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise argparse.ArgumentTypeError(f"must be a finite number {'> 0' if positive else '>= 0'}, "
                                             f"got {text}")
        return value

    return parse


def velocity_command(text: str) -> tuple[float, float, float]:
    """``VX,VY,WZ``: three finite numbers."""
    parts = text.split(",")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected VX,VY,WZ, three finite numbers, got {text!r}")
    return values


def task_option(text: str) -> tuple[str, bool | int | float | tuple[float, ...] | str]:
    """``NAME=VALUE``, one make-time option of a task, its value read as ``--ppo`` reads one:
    ``true`` or ``false``, a number, comma-separated numbers (a tuple), else the text itself. The
    task checks the value when it is built."""
    name, eq, raw = text.partition("=")
    if not eq or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with NAME a task option's name, got {text!r}")
    if raw in ("true", "false"):
        return name, raw == "true"
    try:
        numbers = [int(p) if p.strip().lstrip("+-").isdigit() else float(p) for p in raw.split(",")]
    except ValueError:
        return name, raw
    if not all(math.isfinite(v) for v in numbers):
        raise argparse.ArgumentTypeError(f"{name}: expected finite numbers, got {raw!r}")
    return name, numbers[0] if len(numbers) == 1 else tuple(float(v) for v in numbers)


OVERRIDE_HELP = ("change one value of the task's config (repeatable), read as the value it replaces: "
                 "rewards.alive.weight=0, observations.policy.joint_pos.noise=-0.02,0.02, "
                 "events.push.interval_s=2,4, episode_length_s=10")


def override(text: str) -> tuple[str, str]:
    """``PATH=VALUE``: a dotted path into a task's config and the text of its new value, read
    when the task is known (``manager.overrides.read``)."""
    path, eq, raw = text.partition("=")
    if not eq or not path or any(c.isspace() for c in path):  # the task checks the path itself
        raise argparse.ArgumentTypeError(f"expected PATH=VALUE with PATH a dotted path such as "
                                         f"rewards.alive.weight, got {text!r}")
    return path, raw


def add_task_arguments(p: argparse.ArgumentParser, option_help: str = "a make-time option of the task "
                       "(repeatable): heading_command=true, mode=play, ...") -> None:
    """``--task-option NAME=VALUE`` and ``--override PATH=VALUE`` (repeatable) on ``p``: how every
    command that makes a task makes a variant of it."""
    p.add_argument("--task-option", type=task_option, action="append", default=[], metavar="NAME=VALUE",
                   help=option_help)
    p.add_argument("--override", type=override, action="append", default=[], metavar="PATH=VALUE",
                   help=OVERRIDE_HELP)


def dataset_id(text: str) -> str:
    """A Minari dataset id, checked by Minari where it is installed (``dataset`` says how to
    install it where it is not)."""
    try:
        from motrix_gym.integrations.minari import check_dataset_id

        check_dataset_id(text)
    except ImportError:
        pass
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def device_name(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``, where this machine has that device."""
    if re.fullmatch(r"cpu|cuda(:[0-9]+)?", text) is None:
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    if text != "cpu":
        import torch

        index = int(text.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text} is not available here ({torch.cuda.device_count()} CUDA "
                                             f"device(s))")
    return text


def check_out_path(out: str | Path, suffixes: tuple[str, ...]) -> Path:
    """``out`` as a path to be written later, checked now: one of ``suffixes``, an existing folder."""
    path = Path(out)
    if path.suffix not in suffixes:
        raise ValueError(f"{str(out)!r} does not end in one of {suffixes}")
    if not path.parent.is_dir():
        raise ValueError(f"{str(out)!r}: folder {str(path.parent)!r} does not exist")
    return path


def out_path(suffixes: tuple[str, ...]) -> Callable[[str], str]:
    """A path ending in one of ``suffixes`` whose folder exists (nothing is written to it here)."""
    def parse(text: str) -> str:
        try:
            check_out_path(text, suffixes)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text

    return parse


TASK_HELP = ("a task id (Motrix/G1WalkFlat-v0) or its name (G1WalkFlat), after the module that registers it "
             "if it is your own (mytasks:MyTask); `list` prints them")
MARKERS_HELP = "draw what the commands ask: velocity arrows, a motion's reference bodies"


def import_tasks(module: str) -> None:
    """Import ``module``, which registers tasks of its own (``registry.register_task``); any
    error is an ArgumentTypeError that names the module."""
    import importlib

    try:
        importlib.import_module(module)
    except Exception as e:
        raise argparse.ArgumentTypeError(f"importing {module!r} failed: {type(e).__name__}: {e}") from None


def task_id(text: str) -> str:
    """A registered task, by its id (``Motrix/G1WalkFlat-v0``) or its name (``G1WalkFlat``),
    optionally after the module that registers it (``mytasks:MyTask``, as Gymnasium's ``make``
    takes ``module:id``): the id."""
    from motrix_gym.envs import TASKS
    from motrix_gym.registry import check_id, env_id

    module, _, text = text.rpartition(":")
    if module:
        import_tasks(module)
    if text in TASKS:
        return env_id(text)
    try:
        return check_id(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e} (or <name>)") from None

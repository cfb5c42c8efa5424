"""Checkpoints are data: tensors, numbers, strings and containers of them, never code.

``torch.load(..., weights_only=True)`` refuses anything else (rsl_rl's own ``OnPolicyRunner.load``
unpickles arbitrary objects, which runs whatever a downloaded file contains).
"""

from __future__ import annotations

import os
import pickle
import re
import time
import zipfile
from pathlib import Path
from typing import Any

import torch

FORMAT = "motrix-gym/rsl_rl-ppo/1"


class CheckpointError(ValueError):
    """A file that is not a motrix-gym checkpoint made of plain data, no checkpoint where one is
    looked for, or a checkpoint that does not fit the task or settings it is used with."""


# a run's folder: its start time, a number where another run started in the same second, and the
# run's name if it has one (starting with a letter, so that it is not read as that number)
_STAMP = "%Y-%m-%d_%H-%M-%S"
RUN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_RUN = re.compile(r"(\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d)(?:_(\d+))?(?:_(" + RUN_NAME.pattern + "))?")
_MODEL = re.compile(r"model_(\d+)\.pt")


def task_folder(log_dir: str | Path, env_id: str) -> Path:
    """Where ``train`` puts the runs of ``env_id``: ``<log_dir>/<task>``."""
    from motrix_gym.envs import task_name

    return Path(log_dir) / task_name(env_id)


def check_log_dir(folder: Path) -> Path:
    """``folder`` if runs can be written in it (it is a folder, or can be made as one), else a
    ValueError naming what is in the way."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"cannot write runs in {str(folder)!r}: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write runs in {str(folder)!r}: {str(existing)!r} is not writable")
    return folder


def check_run_name(name: str) -> str:
    """``name`` if it can end a run folder's name, else a ValueError saying what it may be."""
    if not (isinstance(name, str) and RUN_NAME.fullmatch(name)):
        raise ValueError(f"a run name is 1-64 letters, digits, '_', '.' or '-', starting with a letter, "
                         f"got {name!r}")
    return name


def new_run(parent: Path, name: str | None = None) -> Path:
    """A new run folder in ``parent``, named by the time and then ``name`` (``latest`` reads the
    time back)."""
    stamp, k = time.strftime(_STAMP), 0
    tail = "" if name is None else f"_{check_run_name(name)}"
    # runs of one second are numbered whatever their names, so that the newest has the highest number
    taken = {int(m.group(2) or 0) for p in (parent.iterdir() if parent.is_dir() else ())
             if (m := _RUN.fullmatch(p.name)) and m.group(1) == stamp}
    while True:
        while k in taken:
            k += 1
        run = parent / ((stamp if k == 0 else f"{stamp}_{k}") + tail)
        try:
            run.mkdir(parents=True, exist_ok=False)
            return run
        except FileExistsError:
            k += 1


def _runs(folder: Path) -> list[Path]:
    """The run folders in ``folder``, oldest first."""
    runs = [(m.group(1), int(m.group(2) or 0), p) for p in (folder.iterdir() if folder.is_dir() else ())
            if p.is_dir() and (m := _RUN.fullmatch(p.name))]
    return [p for *_, p in sorted(runs)]


def _last_of(run: Path) -> Path | None:
    models = [(int(m.group(1)), p) for p in run.iterdir() if (m := _MODEL.fullmatch(p.name))]
    return max(models)[1] if models else None


def latest(log_dir: str | Path, env_id: str) -> Path:
    """The checkpoint of the highest iteration in the newest run of ``env_id`` under ``log_dir``
    that saved one."""
    folder = task_folder(log_dir, env_id)
    for run in reversed(_runs(folder)):
        if (last := _last_of(run)) is not None:
            return last
    raise CheckpointError(f"no run of {env_id} under {str(folder)!r} has saved a model_<it>.pt: train it first, "
                          f"or name a checkpoint")


def resolve(path: str | Path) -> Path:
    """``path``, or the checkpoint of the highest iteration in it where it is a run's folder."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    if not path.is_dir():
        return path
    if (last := _last_of(path)) is None:
        runs = _runs(path)
        hint = f": it holds {len(runs)} of train's runs (newest {runs[-1].name}); name one" if runs else ""
        raise CheckpointError(f"{str(path)!r} is a folder without a model_<it>.pt{hint}")
    return last


def save(path: Path, state: dict[str, Any], meta: dict[str, Any]) -> None:
    """``state``: rsl_rl's ``alg.save()``; ``meta``: env id, PPO config, iteration (plain data).
    The file appears at ``path`` whole or not at all: it is written beside it and renamed, so that
    a run killed while saving leaves the previous checkpoint there for ``--resume``."""
    part = path.with_name(path.name + ".part")
    try:
        with open(part, "wb") as f:
            torch.save({**state, "iter": meta["iteration"], "infos": {"format": FORMAT, **meta}}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def _refused(message: str) -> str:
    """What torch's weights-only unpickler refused (``Unsupported global: GLOBAL m.C ...``), from the
    advice it is wrapped in."""
    found = re.search(r"WeightsUnpickler error: ([^\n]*?\.)(?:\s|$)", message)
    lines = message.strip().splitlines()
    return found.group(1) if found else (lines[-1] if lines else "refused by torch.load(weights_only=True)")


def load(path: str | Path) -> dict[str, Any]:
    """The checkpoint at ``path``, loaded as data only."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    if not zipfile.is_zipfile(path):
        raise CheckpointError(f"checkpoint {str(path)!r} is not the zip archive that torch.save writes")
    with zipfile.ZipFile(path) as archive:
        if any(name.split("/")[1:2] == ["code"] for name in archive.namelist()):  # torch.jit.save's layout
            raise CheckpointError(f"{str(path)!r} is a TorchScript module (play --export jit writes one for "
                                  "torch.jit.load and libtorch), not a checkpoint: give its model_<it>.pt, or a "
                                  "policy.onnx")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(f"checkpoint {str(path)!r} holds objects other than tensors and plain data, so it is "
                              f"not loaded (it would run code from the file): {_refused(str(e))}") from None
    except Exception as e:
        raise CheckpointError(f"checkpoint {str(path)!r} cannot be read: {type(e).__name__}: {e}") from None
    infos = ckpt.get("infos") if isinstance(ckpt, dict) else None
    if not isinstance(infos, dict) or infos.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {str(path)!r} was not written by `python -m motrix_gym train` "
                              f"(no {FORMAT!r} header)")
    return ckpt

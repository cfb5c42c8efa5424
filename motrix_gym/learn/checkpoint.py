"""Checkpoints are data: tensors, numbers, strings and containers of them, never code.

``torch.load(..., weights_only=True)`` refuses anything else (rsl_rl's own ``OnPolicyRunner.load``
unpickles arbitrary objects, which runs whatever a downloaded file contains).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

FORMAT = "motrix-gym/rsl_rl-ppo/1"


class CheckpointError(ValueError):
    """A file that is not a motrix-gym checkpoint made of plain data."""


def save(path: Path, state: dict[str, Any], meta: dict[str, Any]) -> None:
    """``state``: rsl_rl's ``alg.save()``; ``meta``: env id, PPO config, iteration (plain data)."""
    torch.save({**state, "iter": meta["iteration"], "infos": {"format": FORMAT, **meta}}, path)


def load(path: str | Path) -> dict[str, Any]:
    """The checkpoint at ``path``, loaded as data only."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"checkpoint {str(path)!r} holds objects other than tensors and plain data, so it is "
                              f"not loaded (it would run code from the file): {first}") from None
    except Exception as e:  # not a torch file at all
        raise CheckpointError(f"checkpoint {str(path)!r} cannot be read: {e}") from None
    infos = ckpt.get("infos") if isinstance(ckpt, dict) else None
    if not isinstance(infos, dict) or infos.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {str(path)!r} was not written by `python -m motrix_gym train` "
                              f"(no {FORMAT!r} header)")
    return ckpt

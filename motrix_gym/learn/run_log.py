"""Where a training run's figures go: TensorBoard events in the run's folder always, and with
``logger="wandb"`` a Weights & Biases run as well, with the same keys at the same iterations
(W&B, as Isaac Lab's and mjlab's trainers offer it).

W&B reads its own settings from the environment (``WANDB_MODE=offline`` keeps the run on disk
for a later ``wandb sync``; ``WANDB_ENTITY``, ``WANDB_API_KEY``); its files go under the run's
folder (``<run>/wandb/``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from motrix_gym.sim.backend import MissingExtra

LOGGERS = ("tensorboard", "wandb")
DEFAULT_PROJECT = "motrix_gym"


class LoggerError(RuntimeError):
    """A logger could not start the run (W&B without a login, ...); the message says why."""


def check_logger(logger: str, project: str | None) -> None:
    """A ValueError naming what is wrong with ``logger`` / ``project``."""
    if logger not in LOGGERS:
        raise ValueError(f"logger must be one of {LOGGERS}, got {logger!r}")
    if project is not None:
        if logger != "wandb":
            raise ValueError(f"a W&B project ({project!r}) needs logger 'wandb', not {logger!r}")
        if not (isinstance(project, str) and project.strip()):
            raise ValueError(f"the W&B project must be a non-empty name, got {project!r}")


def require(logger: str) -> None:
    """A MissingExtra when ``logger`` needs a package that is not installed: before a run starts."""
    if logger == "wandb":
        try:
            import wandb  # noqa: F401
        except ImportError:
            raise MissingExtra("logger 'wandb' needs the wandb package: pip install -e \".[wandb]\"") from None


class RunLog:
    """A run's scalars, videos and final figures (``logger``: one of ``LOGGERS``). Rank 0 of a
    run makes one; ``project`` (W&B's project) defaults to ``WANDB_PROJECT``, else motrix_gym."""

    def __init__(self, run_dir: Path, logger: str = "tensorboard", config: Mapping[str, Any] | None = None,
                 project: str | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        check_logger(logger, project)
        self.wandb = None
        if logger == "wandb":
            import wandb

            task, name = run_dir.parent.name, run_dir.name
            try:
                self.wandb = wandb.init(project=project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
                                        name=f"{task}_{name}", group=task, dir=run_dir, config=dict(config or {}))
            except wandb.errors.Error as e:
                raise LoggerError(f"W&B could not start the run: {e} (WANDB_MODE=offline keeps a run on disk "
                                  "for a later wandb sync)") from e
        self.tensorboard = SummaryWriter(str(run_dir), flush_secs=10)

    def scalars(self, values: Mapping[str, float], it: int) -> None:
        """One iteration's figures, each under its key (``Loss/value``, ...)."""
        for key, value in values.items():
            self.tensorboard.add_scalar(key, value, it)
        if self.wandb is not None:
            self.wandb.log(dict(values), step=it)

    def video(self, path: Path, it: int) -> None:
        """A checkpoint's video (W&B shows it beside the curves; TensorBoard's run folder holds the file)."""
        if self.wandb is not None:
            import wandb

            self.wandb.log({"video": wandb.Video(str(path), format=path.suffix[1:])}, step=it)

    def summary(self, values: Mapping[str, Any]) -> None:
        """The run's final figures, nested dicts flattened to ``a/b/c`` keys (W&B's run summary)."""
        if self.wandb is not None:
            self.wandb.summary.update(_flat(values))

    def close(self, failed: bool = False) -> None:
        self.tensorboard.close()
        if self.wandb is not None:
            import wandb

            self.wandb.finish(exit_code=1 if failed else 0)
            self.wandb = None
            wandb.teardown()  # the next run reads W&B's settings from the environment afresh


def _flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}/"))
        elif value is not None:
            out[f"{prefix}{key}"] = value
    return out

"""What the runtime needs of a physics backend, and nothing that names the engine behind it.

``sim/mujoco_batch.py`` implements it over ``mujoco.batch.Batch``, ``sim/warp_batch.py`` over
MuJoCo Warp; ``make_sim`` imports the one asked for. The runtime reads and writes
the state through ``arrays`` (``(num_envs, ...)`` views over the backend's own memory), and
knows the model only through ``resolver.ModelInfo``. A host backend (``tensors`` False) gives
numpy views and takes lane ids as numpy arrays; a device backend (``tensors`` True) gives torch
tensors on ``device`` and takes and returns lane ids as tensors there.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    import mujoco

BACKENDS = ("mujoco", "warp")


class MissingExtra(ImportError):
    """Optional packages (a backend's, a video format's) are not installed; the message names the
    extra that installs them."""


def usable_cores() -> int:
    """Cores this process may use: those it may run on, or fewer where its cgroups allow less CPU
    time (a container's ``--cpus``, systemd's ``CPUQuota``), rounded up: threads and processes
    beyond the quota only share its time."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    quota = cpu_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def cpu_quota(root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs' worth of time per period that this process's cgroups allow: the least over its
    cgroup and those above it, in cgroup v2 (``cpu.max``) and v1 (``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``); None where none sets one or none can be read. A cgroup's folder is
    looked for under the hierarchy's mount by its path in ``membership``, and the mount itself is
    read too: a container sees its own cgroup there, whatever its path on the host."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:  # hierarchy-id:controllers:path, the controllers empty in v2
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":
            mounts, read = [root], _quota_v2
        elif "cpu" in controllers.split(","):
            mounts, read = [root / controllers, root / "cpu"], _quota_v1
        else:
            continue
        rel = path.lstrip("/")
        for mount in dict.fromkeys(mounts):
            folder = mount if ".." in rel.split("/") else mount / rel  # a path above the namespace's root
            for d in {mount, folder, *(p for p in folder.parents if p.is_relative_to(mount))}:
                if (q := read(d)) is not None:
                    quotas.append(q)
    return min(quotas, default=None)


def _quota_v2(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()
        return None if quota == "max" or int(period) <= 0 else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _quota_v1(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota < 0 or period <= 0 else quota / period


class SimBackend(Protocol):
    num_envs: int
    nthread: int
    device: torch.device
    tensors: bool
    # "qpos", "qvel", "ctrl" and every field the task reads (see ResolvedProgram.reads)
    arrays: dict[str, np.ndarray] | dict[str, Tensor]

    def step(self, nstep: int, ids: np.ndarray | None = None) -> np.ndarray:
        """Advance lanes ``ids`` (all when None) by ``nstep`` substeps; return the ids of lanes
        that became unstable."""

    def reset(self, ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, full: bool = True) -> None:
        """Write lanes ``ids``' positions and velocities (``full``: as a reset) and bring their
        derived fields up to date."""

    def randomize(self, ids: np.ndarray, friction_geoms: tuple[int, ...], bodies: tuple[int, ...], root: int,
                  friction: np.ndarray, mass_scale: np.ndarray, com_offset: np.ndarray, kp_scale: np.ndarray,
                  kd_scale: np.ndarray) -> None:
        """Per-lane physical parameters for lanes ``ids``."""

    def randomize_ball(self, ids: np.ndarray, body: int, geom: int, dof: int, radius: np.ndarray,
                       mass: np.ndarray, friction: np.ndarray, softness: np.ndarray, damping: np.ndarray) -> None:
        """Per-lane ball for lanes ``ids``."""

    def apply_forces(self, lane: int, forces: np.ndarray) -> None:
        """Forces and torques ``(nbody, 6)`` (world frame, at each body's centre of mass) on lane
        ``lane`` at every substep from now on, until replaced (zeros: none) or a full reset
        clears them: a push by hand in the live window."""

    def close(self) -> None:
        """Free the lanes."""


def make_sim(backend: str, model: mujoco.MjModel, num_envs: int, nthread: int | None, reads: tuple[str, ...],
             sensing: mujoco.MjModel | None, stage: int, device: str = "cpu") -> SimBackend:
    """The ``backend`` simulation of ``num_envs`` lanes of ``model`` (``sensing``: the sensing
    model or None), reading ``reads`` up to ``stage``, on ``device`` (the C backend runs on the
    CPU only)."""
    if backend == "mujoco":
        if device != "cpu":
            raise ValueError(f"backend 'mujoco' runs on the CPU, got device {device!r} (backend 'warp' runs on a GPU)")
        from motrix_gym.sim.mujoco_batch import MujocoBatchSim
        return MujocoBatchSim(model, num_envs, nthread, reads=reads, sensing=sensing, stage=stage)
    if backend == "warp":
        from motrix_gym.sim.warp_batch import WarpBatchSim
        return WarpBatchSim(model, num_envs, reads=reads, sensing=sensing, stage=stage, device=device)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")

"""Raw physics for ``bench``: a bare simulation of the env's own model and lanes that replays the
states the env stepped through, so that the env's time can be set against the physics alone.

``record()`` copies the env simulation's complete state (untimed); ``replay(state, cols, targets,
nstep, velocity)`` restores it (untimed), then times writing ``targets`` into the controls
``cols`` and stepping ``nstep`` substeps, with ``velocity``: followed by a forward pass to the
velocity stage, as the env's sensing pass brings its reads to the new state. The per-lane model
values (randomised physics) are those of the env at the time ``sync_models`` is called.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from motrix_gym.sim.backend import SimBackend
from motrix_gym.sim.engine import batch, mujoco


class MujocoRaw:
    """A bare ``mujoco.batch.Batch`` of the physics model, with the env's lanes and threads."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.raw = batch.Batch(sim.model, sim.num_envs, sim.nthread)
        self.ctrl = self.raw.bind("ctrl")

    def record(self) -> np.ndarray:
        return self.sim.batch.state.copy()

    def sync_models(self) -> None:
        expanded = False
        for field in batch.MODEL_FIELDS:
            values = self.sim.batch.expanded(field)
            if values is not None:
                self.raw.expand(field)[:] = values
                expanded = True
        if expanded:
            self.raw.set_const()

    def replay(self, state: np.ndarray, cols: np.ndarray, targets: np.ndarray, nstep: int, velocity: bool) -> float:
        stage = mujoco.mjtStage.mjSTAGE_VEL if velocity else mujoco.mjtStage.mjSTAGE_NONE
        self.raw.state[:] = state
        t = time.perf_counter()
        self.ctrl[:, cols] = targets
        self.raw.step(nstep=nstep, stage=stage)
        return time.perf_counter() - t


class WarpRaw:
    """A second ``mujoco_warp`` data over the env's own (per-lane) physics model, stepped as the
    env steps its own (``warp_batch.Replay``: a CUDA graph on a GPU)."""

    STATE = ("qpos", "qvel", "act", "qacc_warmstart", "time", "ctrl")

    def __init__(self, sim: Any) -> None:
        from motrix_gym.sim import warp_batch

        self.sim, self.wb = sim, warp_batch
        with warp_batch.wp.ScopedDevice(sim.wp_device):
            self.data = warp_batch.mjw.make_data(sim.model, nworld=sim.num_envs, nconmax=sim.nconmax,
                                                 njmax=sim.njmax)
        to = sim._torch
        self.ctrl = to(self.data.ctrl)
        self._state = {f: to(getattr(self.data, f)) for f in self.STATE}
        self._runs: dict[tuple[int, bool], Any] = {}

    def record(self) -> dict[str, Any]:
        return {f: self.sim._torch(getattr(self.sim.d, f)).clone() for f in self.STATE}

    def sync_models(self) -> None:
        pass  # the raw data steps the env's model itself

    def _run(self, nstep: int, velocity: bool) -> Any:
        key = (nstep, velocity)
        if key not in self._runs:
            mjw, m, d = self.wb.mjw, self.sim.m, self.data
            step = self.wb.substeps(m, d, nstep)

            def run() -> None:
                step()
                if velocity:
                    mjw.fwd_position(m, d, factorize=False)
                    mjw.fwd_velocity(m, d)
            self._runs[key] = self.wb.Replay(run, self.sim.wp_device)
        return self._runs[key]

    def replay(self, state: dict[str, Any], cols: np.ndarray, targets: Any, nstep: int, velocity: bool) -> float:
        for f, v in state.items():
            self._state[f].copy_(v)
        run, sync = self._run(nstep, velocity), self.wb.wp.synchronize_device
        targets = torch.as_tensor(targets, device=self.ctrl.device).to(self.ctrl.dtype)
        sync(self.sim.wp_device)
        t = time.perf_counter()
        self.ctrl[:, cols] = targets
        run()
        sync(self.sim.wp_device)
        return time.perf_counter() - t


def raw_replay(backend: str, sim: SimBackend) -> MujocoRaw | WarpRaw:
    """The raw physics of ``sim`` (made by ``backend.make_sim(backend, ...)``)."""
    return {"mujoco": MujocoRaw, "warp": WarpRaw}[backend](sim)


def engine_versions(backend: str) -> dict[str, str]:
    """The versions of the packages ``backend`` simulates with."""
    out = {"mujoco": mujoco.__version__}
    if backend == "warp":
        from motrix_gym.sim import warp_batch

        out |= {"mujoco_warp": warp_batch.mjw.__version__, "warp": warp_batch.wp.__version__}
    return out

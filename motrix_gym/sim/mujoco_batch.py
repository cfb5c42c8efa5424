"""The MuJoCo backend: one ``mujoco.batch.Batch`` holding every lane.

Controls go in and state comes out through torch views over Batch's own arrays (no copies, no
per-lane Python). ``step`` runs ``decimation`` substeps on MuJoCo's thread pool with the GIL
released. ``reset`` is masked: only the given lanes are reset and written.

MuJoCo's step leaves body frames, velocities and sensors at the state before its last substep.
Given a sensing model (``scene.build_sensing_model``), a second batch forwards each new state
through that model: the same numbers as a forward pass of the physics model, at about a third of
the cost, and the physics batch never runs a forward pass of its own.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor

from motrix_gym.sim.backend import usable_cores
from motrix_gym.sim.engine import batch as mjbatch
from motrix_gym.sim.engine import mujoco
from motrix_gym.sim.lane_params import write_ball, write_robot

READ_FIELDS = ("qpos", "qvel", "xpos", "xquat", "sensordata")
STATE = ("qpos", "qvel", "ctrl")  # views of the physics batch's rows
# outputs of the physics batch's last substep; every other read is derived by the sensing batch
PHYSICS = (*STATE, "actuator_force", "qacc")
# MuJoCo's warnings of an unstable simulation: bad qpos, qvel, qacc, consecutive in mjtWarning (a
# slice of the counters is a view).
_W = mujoco.mjtWarning
if not int(_W.mjWARN_BADQPOS) + 2 == int(_W.mjWARN_BADQVEL) + 1 == int(_W.mjWARN_BADQACC):
    raise ImportError("mujoco's mjtWarning no longer lists BADQPOS, BADQVEL, BADQACC consecutively")
UNSTABLE = slice(int(_W.mjWARN_BADQPOS), int(_W.mjWARN_BADQACC) + 1)


class MujocoBatchSim:
    """``num_envs`` simulations of ``model`` stepped together.

    ``views`` maps each field in ``reads`` (and ``ctrl``) to a float64 torch tensor of shape
    ``(num_envs, ...)`` sharing memory with the batch (``arrays``: the same as numpy arrays);
    ``qpos``, ``qvel`` and ``ctrl`` are also attributes. Derived fields come from the sensing
    batch when ``sensing`` is given (current at the new state), else from the physics batch (as
    MuJoCo's step leaves them: one substep old). ``stage`` is the latest stage they need: after
    a reset (and with ``sensing``, after every step) forward passes stop there; position-stage
    reads skip the velocity stage.
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, nthread: int | None = None,
                 reads: tuple[str, ...] = READ_FIELDS, sensing: mujoco.MjModel | None = None,
                 stage: int = mujoco.mjtStage.mjSTAGE_VEL) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.model = model
        self.num_envs = num_envs
        self.device, self.tensors = torch.device("cpu"), False  # arrays: numpy views
        self.nthread = usable_cores() if nthread is None else nthread
        if self.nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread}")
        if isinstance(stage, bool) or stage not in (mujoco.mjtStage.mjSTAGE_POS, mujoco.mjtStage.mjSTAGE_VEL):
            raise ValueError(f"stage must be mjSTAGE_POS (1) or mjSTAGE_VEL (2), got {stage!r}")
        self.stage = mujoco.mjtStage(stage)
        self.batch = mjbatch.Batch(model, num_envs, self.nthread)
        self.sensing = None if sensing is None else mjbatch.Batch(sensing, num_envs, self.nthread)
        derived = self.batch if self.sensing is None else self.sensing
        # The same memory as numpy arrays: indexing a few lanes costs less in numpy than in torch.
        self.arrays = {name: (self.batch if name in PHYSICS else derived).bind(name) for name in (*reads, *STATE)}
        with warnings.catch_warnings():
            # Derived fields are read-only numpy arrays; the tensors over them are only read.
            warnings.simplefilter("ignore", UserWarning)
            self.views: dict[str, Tensor] = {name: torch.from_numpy(a) for name, a in self.arrays.items()}
        if self.sensing is not None:
            self._sensed = self.sensing.bind("qpos"), self.sensing.bind("qvel")
        self.qpos, self.qvel, self.ctrl = self.views["qpos"], self.views["qvel"], self.views["ctrl"]
        self.batch.reset(None, stage=mujoco.mjtStage.mjSTAGE_NONE)  # every lane at the model's defaults
        # A full reset writes this row: the same as Batch.reset, without a call into the pool.
        self._default_state = self.batch.state[0].copy()
        if self.sensing is None:
            self.batch.forward(None, stage=stage)
        self._sense(None)
        # Per lane and warning, how often MuJoCo found a bad qpos/qvel/qacc (it then resets the
        # lane itself): a view of the batch's counters.
        self._unstable = self.batch.warning[:, UNSTABLE, 1]
        self._unstable_seen = self._unstable.copy()

    def step(self, nstep: int, ids: np.ndarray | None = None) -> np.ndarray:
        """Advance lanes ``ids`` (all when None) by ``nstep`` substeps.

        Returns the ids of lanes that became unstable: MuJoCo raised (the lane keeps its previous
        state) or found non-finite or huge values (and reset the lane to the model's defaults).
        """
        failed = np.zeros(0, dtype=np.int64)
        for call in (lambda: self.batch.step(ids, nstep=nstep), lambda: self._sense(ids)):
            try:
                call()
            except mjbatch.SimulationError as e:
                failed = np.union1d(failed, np.asarray(e.ids, dtype=np.int64))
        if (self._unstable == self._unstable_seen).all():  # the usual case
            return failed
        warned = np.flatnonzero((self._unstable != self._unstable_seen).any(-1))
        self._unstable_seen = self._unstable.copy()
        return np.union1d(failed, warned)

    def _sense(self, ids: np.ndarray | None) -> None:
        """Forward lanes ``ids`` (all when None) of the sensing batch from the physics batch's
        positions and velocities (MuJoCo's ``SimulationError`` passes through)."""
        if self.sensing is None:
            return
        (qpos, qvel), a = self._sensed, self.arrays
        if ids is None:
            np.copyto(qpos, a["qpos"])
            np.copyto(qvel, a["qvel"])
        else:
            qpos[ids], qvel[ids] = a["qpos"][ids], a["qvel"][ids]
        self.sensing.forward(ids, stage=self.stage)

    def reset(self, ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, full: bool = True) -> None:
        """Reset lanes ``ids`` (sorted, unique) to ``qpos``/``qvel`` rows (numpy arrays, any float
        dtype) and bring their derived fields up to date (the sensing batch's forward pass, or the
        physics batch's without one).

        ``full`` also clears everything else of the lanes (time, warm start, controls); without
        it only positions and velocities are written (a push, a teleport mid-episode).
        """
        if len(ids) == 0:
            return
        if full:
            self.batch.state[ids] = self._default_state
        self.arrays["qpos"][ids] = qpos
        self.arrays["qvel"][ids] = qvel
        if self.sensing is None:
            self.batch.forward(ids, stage=self.stage)
        else:  # the physics batch's next step computes everything from the state anyway
            self._sense(ids)
        np.copyto(self._unstable_seen, self._unstable)

    def apply_forces(self, lane: int, forces: np.ndarray) -> None:
        """``SimBackend.apply_forces``: MuJoCo's ``xfrc_applied`` of the physics batch."""
        self.batch.bind("xfrc_applied")[lane] = forces

    def randomize(self, ids: np.ndarray, friction_geoms: tuple[int, ...], bodies: tuple[int, ...], root: int,
                  friction: np.ndarray, mass_scale: np.ndarray, com_offset: np.ndarray, kp_scale: np.ndarray,
                  kd_scale: np.ndarray) -> None:
        """Per-lane model values for lanes ``ids``: the sliding friction of ``friction_geoms``, the
        masses and inertias of ``bodies`` scaled, the centre of mass of ``root`` moved, the
        position actuators' stiffness and damping scaled. The sensing batch gets the same masses
        and centres of mass (its frames and ``subtree_com`` depend on them); both recompute the
        constants derived from them (``set_const``)."""
        if len(ids) == 0:
            return
        write_robot(self.model, [b.expand for b in self._batches()], ids, friction_geoms, bodies, root, friction,
                    mass_scale, com_offset, kp_scale, kd_scale)
        for batch in self._batches():
            batch.set_const(ids)

    def randomize_ball(self, ids: np.ndarray, body: int, geom: int, dof: int, radius: np.ndarray, mass: np.ndarray,
                       friction: np.ndarray, softness: np.ndarray, damping: np.ndarray) -> None:
        """Per-lane ball for lanes ``ids``: radius (its collision bounds follow), mass and the
        hollow shell's inertia, sliding friction, contact time constant and damping of its six
        velocities. The sensing batch gets its size (its contacts with the feet)."""
        if len(ids) == 0:
            return
        write_ball([b.expand for b in self._batches()], ids, body, geom, dof, radius, mass, friction, softness,
                   damping)
        for batch in self._batches():  # the bounds MuJoCo's collision tests use follow the radius
            batch.expand("geom_rbound")[ids, geom] = radius
            batch.expand("geom_aabb")[ids, geom, 3:] = radius[:, None]
        self.batch.set_const(ids)

    def _batches(self) -> list[mjbatch.Batch]:
        """The physics batch, then the sensing batch when there is one."""
        return [self.batch] if self.sensing is None else [self.batch, self.sensing]

    def close(self) -> None:
        """Free the lanes and MuJoCo's thread pool (every view of the batch is dropped)."""
        self.views.clear()
        self.arrays.clear()
        self._sensed = ()
        self._unstable = self._unstable_seen = None  # type: ignore[assignment]
        self.qpos = self.qvel = self.ctrl = None  # type: ignore[assignment]
        self.batch = self.sensing = None  # type: ignore[assignment]

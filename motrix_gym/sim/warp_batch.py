"""The MuJoCo Warp backend: every lane a world of one ``mujoco_warp`` model, on Warp's CPU device.

It implements ``backend.SimBackend`` over the same compiled models as ``mujoco_batch``: the
physics model steps ``decimation`` substeps, and a sensing model (``scene.build_sensing_model``)
forwards each new state so that frames, velocities and sensors describe it. ``arrays`` are numpy
views of Warp's own float32 arrays (on the CPU device they share memory), so the runtime reads and
writes them exactly as it does the C backend's.

Warp cannot step or forward a subset of its worlds, which sets three rules here:

- ``step(ids)`` steps every world, then puts back what the runtime reads of the lanes outside
  ``ids`` (those lanes are about to be reset, and must look unstepped until then);
- ``reset`` and ``randomize`` forward every world of the sensing model; the lanes not written
  recompute the same values from the same state;
- per-lane model fields are batched from the start (``put_model``'s ``batch_sizes``), and the
  constants derived from them are recomputed by ``mujoco_warp.set_const`` on a scratch data, so
  that the live lanes' state is never touched.

Lanes whose state becomes non-finite or leaves MuJoCo's bound (1e10) are reported as failed and
reset to the model's defaults, as C MuJoCo does; so are lanes that overflow the contact or
constraint buffers (``nconmax``, ``njmax``), with a warning the first time.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from motrix_gym.sim.engine import mujoco
from motrix_gym.sim.lane_params import write_ball, write_robot

try:
    import mujoco_warp as mjw
    import warp as wp
except ImportError as e:  # optional dependency
    raise ImportError("backend='warp' needs mujoco-warp and warp-lang: pip install 'motrix-gym[warp]'") from e

# At its default level (info) Warp prints a line for every kernel module it loads, dozens per
# model; a level the user chose is kept.
if wp.config.log_level == wp.LOG_INFO:
    wp.config.log_level = wp.LOG_WARNING

STATE = ("qpos", "qvel", "ctrl")
PHYSICS = (*STATE, "actuator_force", "qacc")  # read from the physics data; the rest from the sensing data
# Model fields written per lane by ``randomize`` / ``randomize_ball``, and those ``set_const``
# derives from them (a field left unbatched would hold lane 0's value for every lane).
LANE_FIELDS = ("geom_friction", "body_mass", "body_inertia", "body_ipos", "actuator_gainprm", "actuator_biasprm",
               "geom_size", "geom_rbound", "geom_aabb", "geom_solref", "dof_damping")
DERIVED_FIELDS = ("body_subtreemass", "dof_invweight0", "body_invweight0", "actuator_acc0", "tendon_invweight0")
_O = mjw.OverflowType
# Buffers that, once full, drop contacts or constraints. Reaching the solver's iteration limit is
# not among them: C MuJoCo stops there too.
OVERFLOWS = _O.NEFC | _O.NJMAX_NNZ | _O.BROADPHASE | _O.NARROWPHASE | _O.CCD | _O.HFIELD | _O.NVMAX
MAX_VALUE = 1e10  # mjMAXVAL: C MuJoCo resets a lane whose qpos, qvel or qacc exceeds it
DEVICES = ("cpu",)


def _put(model: mujoco.MjModel, num_envs: int, lane_fields: bool) -> mjw.Model:
    sizes = {f: num_envs for f in (*LANE_FIELDS, *DERIVED_FIELDS)} if lane_fields else {}
    m = mjw.put_model(model, batch_sizes={f: n for f, n in sizes.items() if getattr(model, f).size})
    m.opt.warn_overflow = 0  # overflowing lanes fail instead (``_overflowed``), with one warning
    return m


class WarpBatchSim:
    """``num_envs`` worlds of ``model`` on Warp's ``device``, stepped together.

    ``nconmax`` and ``njmax`` size the contact and constraint buffers per world (a lane that
    needs more fails); by default 64 contacts (192 on a heightfield), and rows for all of them at
    the model's largest contact dimension plus every joint limit. ``lane_fields``: batch the
    model fields that ``randomize`` writes.
    ``sensing`` is required: without it, a forward pass of every world after a reset would move
    the other lanes' derived fields from the start of their last substep to its end.
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, reads: tuple[str, ...],
                 sensing: mujoco.MjModel | None, stage: int = mujoco.mjtStage.mjSTAGE_VEL, *,
                 device: str = "cpu", nconmax: int | None = None, njmax: int | None = None,
                 lane_fields: bool = True) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if device not in DEVICES:
            raise ValueError(f"the warp backend runs on Warp's device {DEVICES}, got {device!r}")
        if sensing is None:
            raise ValueError("the warp backend needs current kinematics (a sensing model)")
        if isinstance(stage, bool) or stage not in (mujoco.mjtStage.mjSTAGE_POS, mujoco.mjtStage.mjSTAGE_VEL):
            raise ValueError(f"stage must be mjSTAGE_POS (1) or mjSTAGE_VEL (2), got {stage!r}")
        if nconmax is None:  # a humanoid's two feet on a plane touch it at up to ~30 points, on a heightfield more
            nconmax = 192 if model.nhfield else 64
        if njmax is None:  # every contact at its largest condim's pyramid, and every joint limit
            condim = max(int(model.geom_condim.max()), int(model.pair_dim.max()) if model.npair else 1)
            njmax = nconmax * max(1, 2 * (condim - 1)) + model.njnt
        for name, v in (("nconmax", nconmax), ("njmax", njmax)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        self.model, self.num_envs, self.nthread = model, num_envs, 1
        self.nconmax, self.njmax, self._warned = nconmax, njmax, False
        self.device = wp.get_device(device)
        self.velocity = stage == mujoco.mjtStage.mjSTAGE_VEL
        with wp.ScopedDevice(self.device):
            self.m = _put(model, num_envs, lane_fields)
            self.d = mjw.make_data(model, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            self.sm = _put(sensing, num_envs, lane_fields)
            self.sd = mjw.make_data(sensing, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            # set_const's scratch: it moves a data to qpos0 and recomputes it
            self._scratch = (mjw.make_data(model, nworld=num_envs, nconmax=nconmax, njmax=njmax),
                             mjw.make_data(sensing, nworld=num_envs, nconmax=nconmax, njmax=njmax))
        self.arrays: dict[str, np.ndarray] = {
            name: getattr(self.d if name in PHYSICS else self.sd, name).numpy()
            for name in (*reads, *STATE)}
        for name, a in self.arrays.items():
            if a.shape[0] != num_envs:
                raise ValueError(f"warp field {name!r} has shape {a.shape}, not one row per lane")
        self.views: dict[str, Tensor] = {name: torch.from_numpy(a) for name, a in self.arrays.items()}
        self.qpos, self.qvel, self.ctrl = self.views["qpos"], self.views["qvel"], self.views["ctrl"]
        self._mask = wp.zeros(num_envs, dtype=bool, device=self.device)
        self._sense(None)

    # --------------------------------------------------------------------------------- step
    def step(self, nstep: int, ids: np.ndarray | None = None) -> np.ndarray:
        """Advance every world by ``nstep`` substeps; lanes outside ``ids`` (when given) read as
        before. Returns the ids of lanes that became unstable (now reset to the model's defaults)."""
        kept = None
        if ids is not None:
            out = np.ones(self.num_envs, bool)
            out[ids] = False
            kept = np.flatnonzero(out)
            saved = {name: a[kept].copy() for name, a in self.arrays.items()}
        with wp.ScopedDevice(self.device):
            self.d.overflow.zero_()
            for _ in range(nstep):
                mjw.step(self.m, self.d)
            failed = np.union1d(self._unstable(), self._overflowed())
            if len(failed):
                self._reset_worlds(failed)
            self._sense(None)
        if kept is not None:
            for name, a in self.arrays.items():
                a[kept] = saved[name]
            failed = np.setdiff1d(failed, kept)
        return failed

    def _overflowed(self) -> np.ndarray:
        """Lanes whose contacts or constraints did not fit the buffers (their step dropped some):
        failed, as a C MuJoCo lane that runs out of memory; the first time, a warning says which
        limit to raise."""
        over = self.d.overflow.numpy() & int(OVERFLOWS)
        lanes = np.flatnonzero(over)
        if len(lanes) and not self._warned:
            self._warned = True
            kinds = [k.name for k in _O if k & OVERFLOWS and k & int(np.bitwise_or.reduce(over[lanes]))]
            warnings.warn(f"mujoco_warp overflowed {kinds} in lanes {lanes[:10].tolist()}: more contacts or "
                          f"constraints than the buffers hold (nconmax={self.nconmax}, njmax={self.njmax}). "
                          "Those lanes failed and were reset; raise the limits if this is not a diverging lane.",
                          RuntimeWarning, stacklevel=3)
        return lanes

    def _unstable(self) -> np.ndarray:
        bad = np.zeros(self.num_envs, bool)
        with np.errstate(invalid="ignore"):
            for name in ("qpos", "qvel", "qacc"):
                a = getattr(self.d, name).numpy()
                bad |= ~(np.abs(a) <= MAX_VALUE).all(-1)  # NaN compares False
        return np.flatnonzero(bad)

    def _reset_worlds(self, ids: np.ndarray) -> None:
        mask = self._mask.numpy()
        mask[:] = False
        mask[ids] = True
        mjw.reset_data(self.m, self.d, self._mask)

    def _sense(self, ids: np.ndarray | None) -> None:
        """Forward every world of the sensing data, after copying lanes ``ids`` (all when None)
        of the physics state into it."""
        with wp.ScopedDevice(self.device):
            if ids is None:
                wp.copy(self.sd.qpos, self.d.qpos)
                wp.copy(self.sd.qvel, self.d.qvel)
            else:
                for f in ("qpos", "qvel"):
                    getattr(self.sd, f).numpy()[ids] = getattr(self.d, f).numpy()[ids]
            m, d = self.sm, self.sd
            mjw.fwd_position(m, d, factorize=False)
            d.sensordata.zero_()
            mjw.sensor_pos(m, d)
            if self.velocity:
                mjw.fwd_velocity(m, d)
                mjw.sensor_vel(m, d)

    # -------------------------------------------------------------------------------- writes
    def reset(self, ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, full: bool = True) -> None:
        """Write lanes ``ids``' positions and velocities (``full``: after resetting the lanes to
        the model's defaults) and bring the derived fields up to date."""
        if len(ids) == 0:
            return
        with wp.ScopedDevice(self.device):
            if full:
                self._reset_worlds(ids)
            self.arrays["qpos"][ids] = qpos
            self.arrays["qvel"][ids] = qvel
            self._sense(ids)

    def _lane_field(self, model: mjw.Model, name: str) -> np.ndarray:
        a = getattr(model, name)
        if a.shape[0] != self.num_envs:
            raise RuntimeError(f"model field {name!r} is not batched per lane (lane_fields=False)")
        return a.numpy()

    def _fields(self) -> list[Callable[[str], np.ndarray]]:
        """Getters of the physics and the sensing model's per-lane fields."""
        return [functools.partial(self._lane_field, m) for m in (self.m, self.sm)]

    def _set_const(self) -> None:
        with wp.ScopedDevice(self.device):
            for m, scratch in zip((self.m, self.sm), self._scratch):
                mjw.set_const(m, scratch)

    def randomize(self, ids: np.ndarray, friction_geoms: tuple[int, ...], bodies: tuple[int, ...], root: int,
                  friction: np.ndarray, mass_scale: np.ndarray, com_offset: np.ndarray, kp_scale: np.ndarray,
                  kd_scale: np.ndarray) -> None:
        """Per-lane model values for lanes ``ids``, as ``MujocoBatchSim.randomize`` writes them."""
        if len(ids) == 0:
            return
        write_robot(self.model, self._fields(), ids, friction_geoms, bodies, root, friction, mass_scale, com_offset,
                    kp_scale, kd_scale)
        self._set_const()

    def randomize_ball(self, ids: np.ndarray, body: int, geom: int, dof: int, radius: np.ndarray, mass: np.ndarray,
                       friction: np.ndarray, softness: np.ndarray, damping: np.ndarray) -> None:
        """Per-lane ball for lanes ``ids``, as ``MujocoBatchSim.randomize_ball`` writes it (its
        collision bounds follow its radius through ``set_const``)."""
        if len(ids) == 0:
            return
        write_ball(self._fields(), ids, body, geom, dof, radius, mass, friction, softness, damping)
        self._set_const()

    def close(self) -> None:
        """Drop every view and Warp array."""
        self.views.clear()
        self.arrays.clear()
        self.qpos = self.qvel = self.ctrl = None  # type: ignore[assignment]
        self.m = self.d = self.sm = self.sd = None  # type: ignore[assignment]
        self._scratch = ()

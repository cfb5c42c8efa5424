"""The MuJoCo Warp backend: every lane a world of one ``mujoco_warp`` model, on a Warp device
(``"cpu"``, or ``"cuda"`` / ``"cuda:N"``).

It implements ``backend.SimBackend`` over the same compiled models as ``mujoco_batch``: the
physics model steps ``decimation`` substeps, and a sensing model (``scene.build_sensing_model``)
forwards each new state so that frames, velocities and sensors describe it. ``arrays`` are torch
tensors over Warp's own float32 arrays (``wp.to_torch``, no copies) on the same device, and every
lane-indexed read and write here is a torch op on them: the same code runs on the CPU device,
where the tests run it, and on a GPU. On CUDA the substeps and the sensing pass are each
captured once as a CUDA graph and replayed.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor

from motrix_gym.arguments import is_int
from motrix_gym.sim.backend import MissingExtra
from motrix_gym.sim.engine import mujoco
from motrix_gym.sim.lane_params import write_ball, write_robot

try:
    import mujoco_warp as mjw
    import warp as wp
except ImportError as e:  # optional dependency
    raise MissingExtra("backend='warp' needs mujoco-warp and warp-lang: pip install -e \".[warp]\"") from e

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
DEVICES = ("cpu", "cuda")  # Warp's device kinds; "cuda:N" names one GPU


def _put(model: mujoco.MjModel, num_envs: int, lane_fields: bool) -> mjw.Model:
    sizes = {f: num_envs for f in (*LANE_FIELDS, *DERIVED_FIELDS)} if lane_fields else {}
    m = mjw.put_model(model, batch_sizes={f: n for f, n in sizes.items() if getattr(model, f).size})
    m.opt.warn_overflow = 0  # overflowing lanes fail instead (``_overflowed``), with one warning
    return m


@contextmanager
def launching(device: wp.context.Device) -> Iterator[None]:
    """Warp launches on ``device``, ordered with torch's work on it: on CUDA Warp's stream first
    waits for torch's current stream (which wrote the controls and states it reads), and torch's
    then waits for Warp's (whose results the runtime reads next)."""
    with wp.ScopedDevice(device):
        if not device.is_cuda:
            yield
            return
        warp_stream = device.stream
        torch_stream = wp.stream_from_torch(torch.cuda.current_stream(wp.device_to_torch(device)))
        warp_stream.wait_stream(torch_stream)
        try:
            yield
        finally:
            torch_stream.wait_stream(warp_stream)


class Replay:
    """``fn()`` (a sequence of Warp launches) run on ``device``: on CUDA captured as a CUDA graph
    on the first call and replayed after (one launch instead of hundreds of kernel launches from
    Python); elsewhere called directly. What ``fn`` launches must not depend on the data."""

    def __init__(self, fn: Callable[[], None], device: wp.context.Device) -> None:
        self.fn, self.device, self.graph = fn, device, None

    def __call__(self) -> None:
        with launching(self.device):
            if not self.device.is_cuda:
                self.fn()
            else:
                if self.graph is None:
                    with wp.ScopedCapture() as capture:
                        self.fn()
                    self.graph = capture.graph
                wp.capture_launch(self.graph)


def substeps(m: mjw.Model, d: mjw.Data, nstep: int) -> Callable[[], None]:
    """``nstep`` substeps of every world of ``d``, with the overflow flags cleared first."""
    def run() -> None:
        d.overflow.zero_()
        for _ in range(nstep):
            mjw.step(m, d)
    return run


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
        if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
            raise ValueError(f"the warp backend runs on a Warp device {DEVICES} (or 'cuda:N'), got {device!r}")
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
            if not is_int(v) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        self.model, self.num_envs, self.nthread, self.tensors = model, num_envs, 1, True
        self.nconmax, self.njmax, self._warned = nconmax, njmax, False
        self.wp_device = wp.get_device(device)
        self.device = torch.device(wp.device_to_torch(self.wp_device))
        self.velocity = stage == mujoco.mjtStage.mjSTAGE_VEL
        with wp.ScopedDevice(self.wp_device):
            self.m = _put(model, num_envs, lane_fields)
            self.d = mjw.make_data(model, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            self.sm = _put(sensing, num_envs, lane_fields)
            self.sd = mjw.make_data(sensing, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            # set_const's scratch: it moves a data to qpos0 and recomputes it
            self._scratch = (mjw.make_data(model, nworld=num_envs, nconmax=nconmax, njmax=njmax),
                             mjw.make_data(sensing, nworld=num_envs, nconmax=nconmax, njmax=njmax))
            self._mask = wp.zeros(num_envs, dtype=bool)
        wp.synchronize_device(self.wp_device)  # the uploads done before torch reads the arrays
        t = self._torch
        self.arrays: dict[str, Tensor] = {name: t(getattr(self.d if name in PHYSICS else self.sd, name))
                                          for name in (*reads, *STATE)}
        for name, a in self.arrays.items():
            if a.shape[0] != num_envs:
                raise ValueError(f"warp field {name!r} has shape {tuple(a.shape)}, not one row per lane")
        self.views = self.arrays
        self.qpos, self.qvel, self.ctrl = self.arrays["qpos"], self.arrays["qvel"], self.arrays["ctrl"]
        self._checked = tuple(t(getattr(self.d, f)) for f in ("qpos", "qvel", "qacc"))
        self._overflow, self._mask_t = t(self.d.overflow), t(self._mask)
        self._sensed = tuple((t(getattr(self.sd, f)), t(getattr(self.d, f))) for f in ("qpos", "qvel"))
        self._substeps: dict[int, Replay] = {}
        self._sense_all = Replay(self._forward, self.wp_device)
        self._sense(None)

    def _torch(self, a: wp.array) -> Tensor:
        """A tensor over ``a``'s memory (on Warp's CPU device ``wp.to_torch`` makes it on torch's
        default device, which a caller may have set to another)."""
        with torch.device(self.device):
            return wp.to_torch(a)

    # --------------------------------------------------------------------------------- step
    def _ids(self, ids: Tensor | np.ndarray) -> Tensor:
        return torch.as_tensor(ids, device=self.device).long()

    def step(self, nstep: int, ids: Tensor | np.ndarray | None = None) -> Tensor:
        """Advance every world by ``nstep`` substeps; lanes outside ``ids`` (when given) read as
        before. Returns the ids of lanes that became unstable (now reset to the model's defaults)."""
        kept = None
        if ids is not None:
            out = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
            out[self._ids(ids)] = False
            kept = torch.nonzero(out).flatten()
            saved = {name: a[kept] for name, a in self.arrays.items()}
        if nstep not in self._substeps:
            self._substeps[nstep] = Replay(substeps(self.m, self.d, nstep), self.wp_device)
        self._substeps[nstep]()
        failed = self._failed()
        if len(failed):
            self._reset_worlds(failed)
        self._sense(None)
        if kept is not None:
            for name, a in self.arrays.items():
                a[kept] = saved[name]
            failed = failed[~torch.isin(failed, kept)]
        return failed

    def _failed(self) -> Tensor:
        """Lanes that became unstable (non-finite, or beyond MuJoCo's bound) or whose contacts or
        constraints did not fit the buffers (their step dropped some: failed, as a C MuJoCo lane
        that runs out of memory; the first time, a warning says which limit to raise). One wait
        for the device, for the lanes' ids."""
        over = self._overflow & int(OVERFLOWS)
        bad = over != 0
        for a in self._checked:
            bad |= ~(a.abs() <= MAX_VALUE).all(-1)  # NaN compares False
        lanes = torch.nonzero(bad).flatten()
        if len(lanes) and not self._warned:
            seen = int(np.bitwise_or.reduce(over[lanes].cpu().numpy()))
            if seen:
                self._warned = True
                kinds = [k.name for k in _O if k & OVERFLOWS and k & seen]
                flows = lanes[over[lanes] != 0]
                warnings.warn(f"mujoco_warp overflowed {kinds} in lanes {flows[:10].tolist()}: more contacts or "
                              f"constraints than the buffers hold (nconmax={self.nconmax}, njmax={self.njmax}). "
                              "Those lanes failed and were reset; raise the limits if this is not a diverging "
                              "lane.", RuntimeWarning, stacklevel=3)
        return lanes

    def _reset_worlds(self, ids: Tensor) -> None:
        self._mask_t.fill_(False)
        self._mask_t[ids] = True
        with launching(self.wp_device):
            mjw.reset_data(self.m, self.d, self._mask)

    def _forward(self) -> None:
        m, d = self.sm, self.sd
        mjw.fwd_position(m, d, factorize=False)
        d.sensordata.zero_()
        mjw.sensor_pos(m, d)
        if self.velocity:
            mjw.fwd_velocity(m, d)
            mjw.sensor_vel(m, d)

    def _sense(self, ids: Tensor | None) -> None:
        """Forward every world of the sensing data, after copying lanes ``ids`` (all when None)
        of the physics state into it."""
        for sensed, physics in self._sensed:
            if ids is None:
                sensed.copy_(physics)
            else:
                sensed[ids] = physics[ids]
        self._sense_all()

    # -------------------------------------------------------------------------------- writes
    def reset(self, ids: Tensor | np.ndarray, qpos: Tensor | np.ndarray, qvel: Tensor | np.ndarray,
              full: bool = True) -> None:
        """Write lanes ``ids``' positions and velocities (``full``: after resetting the lanes to
        the model's defaults) and bring the derived fields up to date."""
        if len(ids) == 0:
            return
        ids = self._ids(ids)
        if full:
            self._reset_worlds(ids)
        for name, v in (("qpos", qpos), ("qvel", qvel)):
            a = self.arrays[name]
            a[ids] = torch.as_tensor(v, device=a.device).to(a.dtype)
        self._sense(ids)

    def apply_forces(self, lane: int, forces: np.ndarray) -> None:
        """``SimBackend.apply_forces``: the physics data's ``xfrc_applied``."""
        applied = self._torch(self.d.xfrc_applied)
        applied[lane] = torch.as_tensor(forces, device=applied.device).to(applied.dtype)

    def _lane_field(self, model: mjw.Model, name: str) -> Tensor:
        a = getattr(model, name)
        if a.shape[0] != self.num_envs:
            raise RuntimeError(f"model field {name!r} is not batched per lane (lane_fields=False)")
        return self._torch(a)

    def _fields(self) -> list[Callable[[str], Tensor]]:
        """Getters of the physics and the sensing model's per-lane fields."""
        return [functools.partial(self._lane_field, m) for m in (self.m, self.sm)]

    def _set_const(self) -> None:
        with launching(self.wp_device):
            for m, scratch in zip((self.m, self.sm), self._scratch):
                mjw.set_const(m, scratch)

    def randomize(self, ids: Tensor | np.ndarray, friction_geoms: tuple[int, ...], bodies: tuple[int, ...],
                  root: int, friction: Tensor | np.ndarray, mass_scale: Tensor | np.ndarray,
                  com_offset: Tensor | np.ndarray, kp_scale: Tensor | np.ndarray,
                  kd_scale: Tensor | np.ndarray) -> None:
        """Per-lane model values for lanes ``ids``, as ``MujocoBatchSim.randomize`` writes them."""
        if len(ids) == 0:
            return
        write_robot(self.model, self._fields(), ids, friction_geoms, bodies, root, friction, mass_scale, com_offset,
                    kp_scale, kd_scale)
        self._set_const()

    def randomize_ball(self, ids: Tensor | np.ndarray, body: int, geom: int, dof: int, radius: Tensor | np.ndarray,
                       mass: Tensor | np.ndarray, friction: Tensor | np.ndarray, softness: Tensor | np.ndarray,
                       damping: Tensor | np.ndarray) -> None:
        """Per-lane ball for lanes ``ids``, as ``MujocoBatchSim.randomize_ball`` writes it (its
        collision bounds follow its radius through ``set_const``)."""
        if len(ids) == 0:
            return
        write_ball(self._fields(), ids, body, geom, dof, radius, mass, friction, softness, damping)
        self._set_const()

    def close(self) -> None:
        """Drop every view and Warp array."""
        self.arrays.clear()
        self.qpos = self.qvel = self.ctrl = None  # type: ignore[assignment]
        self._checked = self._sensed = ()
        self._overflow = self._mask_t = None  # type: ignore[assignment]
        self._substeps.clear()
        self._sense_all = None  # type: ignore[assignment]
        self.m = self.d = self.sm = self.sd = None  # type: ignore[assignment]
        self._scratch = ()

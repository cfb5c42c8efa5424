"""Per-lane model values of randomised tasks, as every backend writes them.

A backend passes its per-lane copies of the model's fields as getters, ``name -> (num_envs, ...)``
array over the backend's own memory: numpy arrays (C MuJoCo, whose few-lane writes numpy indexes
fastest) or torch tensors on the backend's device (MuJoCo Warp); the physics model's first, then
the models whose frames follow the masses (the sensing model). Lane ids and values come as the
same kind. Values are computed in float64 and rounded to each field's dtype. The backend
recomputes the constants derived from the fields afterwards (``set_const``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    import mujoco

Array = np.ndarray | Tensor
Field = Callable[[str], Array]


def _f64(like: Array, x: Any) -> Array:
    """``x`` as float64 values of ``like``'s kind (and device)."""
    if isinstance(like, Tensor):
        return torch.as_tensor(x, dtype=torch.float64, device=like.device)
    return np.asarray(x, dtype=np.float64)


def _ids(like: Array, x: Any) -> Array:
    if isinstance(like, Tensor):
        return torch.as_tensor(x, device=like.device).long()
    return np.asarray(x, dtype=np.int64)


def _put(field: Array, index: tuple, value: Array) -> None:
    field[index] = value.to(field.dtype) if isinstance(field, Tensor) else value


def write_robot(model: mujoco.MjModel, fields: Sequence[Field], ids: Array, friction_geoms: tuple[int, ...],
                bodies: tuple[int, ...], root: int, friction: Array, mass_scale: Array, com_offset: Array,
                kp_scale: Array, kd_scale: Array) -> None:
    """Lanes ``ids`` of ``model``: the sliding friction of ``friction_geoms``, the masses and
    inertias of ``bodies`` scaled, the centre of mass of ``root`` moved (in every model of
    ``fields``), the position actuators' stiffness and damping scaled."""
    physics = fields[0]
    like = physics("body_mass")
    i = _ids(like, ids)
    lanes = i[:, None]
    scale = _f64(like, mass_scale)
    if friction_geoms:
        _put(physics("geom_friction"), (lanes, _ids(like, friction_geoms), 0), _f64(like, friction)[:, None])
    b = _ids(like, bodies)
    mass = _f64(like, model.body_mass[list(bodies)]) * scale[:, None]
    inertia = _f64(like, model.body_inertia[list(bodies)]) * scale[:, None, None]
    ipos = _f64(like, model.body_ipos[root]) + _f64(like, com_offset)
    for field in fields:
        _put(field("body_mass"), (lanes, b), mass)
        _put(field("body_inertia"), (lanes, b), inertia)
        _put(field("body_ipos"), (i, root), ipos)
    kp = _f64(like, model.actuator_gainprm[:, 0]) * _f64(like, kp_scale)[:, None]
    kv = -_f64(like, model.actuator_biasprm[:, 2]) * _f64(like, kd_scale)[:, None]
    _put(physics("actuator_gainprm"), (i, slice(None), 0), kp)
    bias = physics("actuator_biasprm")
    _put(bias, (i, slice(None), 1), -kp)
    _put(bias, (i, slice(None), 2), -kv)


def write_ball(fields: Sequence[Field], ids: Array, body: int, geom: int, dof: int, radius: Array,
               mass: Array, friction: Array, softness: Array, damping: Array) -> None:
    """Lanes ``ids``' ball: radius (in every model of ``fields``: the sensing model's contacts
    with the feet), mass and the hollow shell's inertia, sliding friction, contact time constant
    and damping of its six velocities."""
    physics = fields[0]
    like = physics("body_mass")
    i = _ids(like, ids)
    radius, mass = _f64(like, radius), _f64(like, mass)
    for field in fields:
        _put(field("geom_size"), (i, geom, 0), radius)
    _put(physics("body_mass"), (i, body), mass)
    _put(physics("body_inertia"), (i, body), (2.0 / 3.0 * mass * radius**2)[:, None])
    _put(physics("geom_friction"), (i, geom, 0), _f64(like, friction))
    _put(physics("geom_solref"), (i, geom, 0), _f64(like, softness))
    _put(physics("dof_damping"), (i, slice(dof, dof + 6)), _f64(like, damping)[:, None])

"""Per-lane model values of randomised tasks, as every backend writes them.

A backend passes its per-lane copies of the model's fields as getters, ``name -> (num_envs, ...)``
torch tensor over the backend's own memory: the physics model's first, then the models whose
frames follow the masses (the sensing model). The values are computed in float64 and cast to each
field's dtype, so backends of different precision get the same numbers rounded. The backend
recomputes the constants derived from the fields afterwards (``set_const``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    import mujoco

Field = Callable[[str], Tensor]
Values = Tensor | np.ndarray


def _put(field: Tensor, index: tuple, value: Values) -> None:
    field[index] = torch.as_tensor(value, dtype=torch.float64, device=field.device).to(field.dtype)


def _idx(x: Values | Sequence[int], like: Tensor) -> Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, Tensor) else x, dtype=torch.int64, device=like.device)


def write_robot(model: mujoco.MjModel, fields: Sequence[Field], ids: Values, friction_geoms: tuple[int, ...],
                bodies: tuple[int, ...], root: int, friction: Values, mass_scale: Values, com_offset: Values,
                kp_scale: Values, kd_scale: Values) -> None:
    """Lanes ``ids`` of ``model``: the sliding friction of ``friction_geoms``, the masses and
    inertias of ``bodies`` scaled, the centre of mass of ``root`` moved (in every model of
    ``fields``), the position actuators' stiffness and damping scaled."""
    physics = fields[0]
    like = physics("body_mass")
    i = _idx(ids, like)[:, None]
    f64 = dict(dtype=torch.float64, device=like.device)
    mass_scale = torch.as_tensor(mass_scale, **f64)
    if friction_geoms:
        _put(physics("geom_friction"), (i, _idx(friction_geoms, like), 0), torch.as_tensor(friction, **f64)[:, None])
    b = _idx(bodies, like)
    mass = torch.as_tensor(model.body_mass[list(bodies)], **f64)
    inertia = torch.as_tensor(model.body_inertia[list(bodies)], **f64)
    ipos = torch.as_tensor(model.body_ipos[root], **f64) + torch.as_tensor(com_offset, **f64)
    for field in fields:
        _put(field("body_mass"), (i, b), mass * mass_scale[:, None])
        _put(field("body_inertia"), (i, b), inertia * mass_scale[:, None, None])
        _put(field("body_ipos"), (i[:, 0], root), ipos)
    kp = torch.as_tensor(model.actuator_gainprm[:, 0], **f64)
    kv = -torch.as_tensor(model.actuator_biasprm[:, 2], **f64)
    kp_lanes = kp * torch.as_tensor(kp_scale, **f64)[:, None]
    _put(physics("actuator_gainprm"), (i[:, 0], slice(None), 0), kp_lanes)
    bias = physics("actuator_biasprm")
    _put(bias, (i[:, 0], slice(None), 1), -kp_lanes)
    _put(bias, (i[:, 0], slice(None), 2), -kv * torch.as_tensor(kd_scale, **f64)[:, None])


def write_ball(fields: Sequence[Field], ids: Values, body: int, geom: int, dof: int, radius: Values,
               mass: Values, friction: Values, softness: Values, damping: Values) -> None:
    """Lanes ``ids``' ball: radius (in every model of ``fields``: the sensing model's contacts
    with the feet), mass and the hollow shell's inertia, sliding friction, contact time constant
    and damping of its six velocities."""
    physics = fields[0]
    like = physics("body_mass")
    i = _idx(ids, like)
    f64 = dict(dtype=torch.float64, device=like.device)
    radius, mass = torch.as_tensor(radius, **f64), torch.as_tensor(mass, **f64)
    for field in fields:
        _put(field("geom_size"), (i, geom, 0), radius)
    _put(physics("body_mass"), (i, body), mass)
    _put(physics("body_inertia"), (i, body), (2.0 / 3.0 * mass * radius**2)[:, None])
    _put(physics("geom_friction"), (i, geom, 0), friction)
    _put(physics("geom_solref"), (i, geom, 0), softness)
    _put(physics("dof_damping"), (i, slice(dof, dof + 6)), torch.as_tensor(damping, **f64)[:, None])

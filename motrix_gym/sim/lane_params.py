"""Per-lane model values of randomised tasks, as every backend writes them.

A backend passes its per-lane copies of the model's fields as getters, ``name -> (num_envs, ...)``
numpy array: the physics model's first, then the models whose frames follow the masses (the
sensing model). It recomputes the constants derived from them afterwards (``set_const``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import mujoco

Field = Callable[[str], np.ndarray]


def write_robot(model: mujoco.MjModel, fields: Sequence[Field], ids: np.ndarray, friction_geoms: tuple[int, ...],
                bodies: tuple[int, ...], root: int, friction: np.ndarray, mass_scale: np.ndarray,
                com_offset: np.ndarray, kp_scale: np.ndarray, kd_scale: np.ndarray) -> None:
    """Lanes ``ids`` of ``model``: the sliding friction of ``friction_geoms``, the masses and
    inertias of ``bodies`` scaled, the centre of mass of ``root`` moved (in every model of
    ``fields``), the position actuators' stiffness and damping scaled."""
    physics, b = fields[0], list(bodies)
    if friction_geoms:
        physics("geom_friction")[np.ix_(ids, friction_geoms, [0])] = friction[:, None, None]
    for field in fields:
        field("body_mass")[np.ix_(ids, b)] = model.body_mass[b] * mass_scale[:, None]
        field("body_inertia")[np.ix_(ids, b)] = model.body_inertia[b] * mass_scale[:, None, None]
        field("body_ipos")[ids, root] = model.body_ipos[root] + com_offset
    kp, kv = model.actuator_gainprm[:, 0], -model.actuator_biasprm[:, 2]
    physics("actuator_gainprm")[ids, :, 0] = kp * kp_scale[:, None]
    bias = physics("actuator_biasprm")
    bias[ids, :, 1] = -kp * kp_scale[:, None]
    bias[ids, :, 2] = -kv * kd_scale[:, None]


def write_ball(fields: Sequence[Field], ids: np.ndarray, body: int, geom: int, dof: int, radius: np.ndarray,
               mass: np.ndarray, friction: np.ndarray, softness: np.ndarray, damping: np.ndarray) -> None:
    """Lanes ``ids``' ball: radius (in every model of ``fields``: the sensing model's contacts
    with the feet), mass and the hollow shell's inertia, sliding friction, contact time constant
    and damping of its six velocities."""
    physics = fields[0]
    for field in fields:
        field("geom_size")[ids, geom, 0] = radius
    physics("body_mass")[ids, body] = mass
    physics("body_inertia")[ids, body] = (2.0 / 3.0 * mass * radius**2)[:, None]
    physics("geom_friction")[ids, geom, 0] = friction
    physics("geom_solref")[ids, geom, 0] = softness
    physics("dof_damping")[ids, dof:dof + 6] = damping[:, None]

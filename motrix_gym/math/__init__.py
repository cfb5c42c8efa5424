"""Batched rotation math over torch tensors (quaternions are w, x, y, z, as in MuJoCo)."""

from motrix_gym.math.quat import (
    normalize,
    quat_angle,
    quat_apply,
    quat_apply_inverse,
    quat_conjugate,
    quat_from_axis_angle,
    quat_mul,
    quat_rot6d,
    yaw_cos_sin,
    yaw_quat,
)

__all__ = [
    "normalize",
    "quat_angle",
    "quat_apply",
    "quat_apply_inverse",
    "quat_conjugate",
    "quat_from_axis_angle",
    "quat_mul",
    "quat_rot6d",
    "yaw_cos_sin",
    "yaw_quat",
]

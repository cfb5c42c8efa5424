"""Quaternion math on batched tensors.

Quaternions are ``(..., 4)`` tensors in MuJoCo's order ``(w, x, y, z)``; vectors are ``(..., 3)``.
Every function broadcasts over leading dimensions and is pure (no in-place writes), so it can run
inside ``torch.compile`` graphs.

Each function unbinds its inputs once, computes on components, and stacks once. Inductor
vectorizes along the last dimension: carried through a chain of functions, a last dimension of 3
or 4 makes it compute every element with index arithmetic and selects, and unbinding a stacked
result costs as much as computing it. So functions that chain others (``quat_angle``,
``quat_rot6d``, ``quat_apply_inverse``) chain the component functions ``_mul``, ``_conj``,
``_rotate``.
"""

from __future__ import annotations

import torch
from torch import Tensor

Q = tuple[Tensor, Tensor, Tensor, Tensor]  # w, x, y, z
V = tuple[Tensor, Tensor, Tensor]


def _conj(q: Q) -> Q:
    w, x, y, z = q
    return w, -x, -y, -z


def _mul(a: Q, b: Q) -> Q:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw)


def _cross(a: V, b: V) -> V:
    ax, ay, az = a
    bx, by, bz = b
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


def _rotate(q: Q, v: V) -> V:
    """``q v q*`` as ``v + 2w(u x v) + 2u x (u x v)``."""
    w, u = q[0], q[1:]
    t = tuple(2.0 * c for c in _cross(u, v))
    s = _cross(u, t)
    return tuple(vi + w * ti + si for vi, ti, si in zip(v, t, s))


def normalize(x: Tensor, eps: float = 1e-9) -> Tensor:
    """``x / |x|`` along the last dimension, safe at zero."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_conjugate(q: Tensor) -> Tensor:
    """The inverse rotation of a unit quaternion."""
    return torch.stack(_conj(q.unbind(-1)), dim=-1)


def quat_mul(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product ``a * b`` (apply ``b`` first, then ``a``)."""
    return torch.stack(_mul(a.unbind(-1), b.unbind(-1)), dim=-1)


def quat_apply(q: Tensor, v: Tensor) -> Tensor:
    """Rotate ``v`` by unit quaternion ``q``."""
    return torch.stack(_rotate(q.unbind(-1), v.unbind(-1)), dim=-1)


def quat_apply_inverse(q: Tensor, v: Tensor) -> Tensor:
    """Rotate ``v`` by the inverse of unit quaternion ``q`` (world frame -> body frame)."""
    return torch.stack(_rotate(_conj(q.unbind(-1)), v.unbind(-1)), dim=-1)


def quat_angle(a: Tensor, b: Tensor) -> Tensor:
    """Angle (rad, in [0, pi]) of the rotation between unit quaternions ``a`` and ``b``."""
    w, x, y, z = _mul(_conj(a.unbind(-1)), b.unbind(-1))
    return 2.0 * torch.atan2((x * x + y * y + z * z).sqrt(), w.abs())


def quat_rot6d(q: Tensor, frame: Tensor | None = None) -> Tensor:
    """First two columns of the rotation matrix of ``q`` (a continuous 6D orientation), ``(..., 6)``;
    with ``frame``, of ``q`` seen from ``frame`` (``frame* q``).

    >>> quat_rot6d(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    tensor([1., 0., 0., 0., 1., 0.])
    """
    p = q.unbind(-1)
    w, x, y, z = p if frame is None else _mul(_conj(frame.unbind(-1)), p)
    return torch.stack((1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y),
                        2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x)), dim=-1)


def quat_from_axis_angle(axis: Tensor, angle: Tensor) -> Tensor:
    """Unit quaternion of a rotation by ``angle`` (...,) about unit ``axis`` (..., 3)."""
    half = 0.5 * angle
    s = torch.sin(half)
    x, y, z = axis.unbind(-1)
    return torch.stack((torch.cos(half), x * s, y * s, z * s), dim=-1)


def yaw_cos_sin(q: Tensor) -> tuple[Tensor, Tensor]:
    """cos and sin of ``q``'s yaw, from its heading (the rotated x axis in the ground plane)
    without atan2, cos and sin: compiled code may repeat it for every element it feeds. A
    vertical x axis has no heading and counts as yaw 0, as atan2(0, 0) does."""
    w, x, y, z = q.unbind(-1)
    hx, hy = 1.0 - 2.0 * (y * y + z * z), 2.0 * (w * z + x * y)
    r = (hx * hx + hy * hy).sqrt()
    level = r > 0.0
    r = r.clamp(min=1e-30)
    return torch.where(level, hx / r, 1.0), torch.where(level, hy / r, 0.0)


def yaw_quat(q: Tensor) -> Tensor:
    """The heading part of ``q``: a rotation about world z with the same yaw."""
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    zero = torch.zeros_like(yaw)
    half = 0.5 * yaw
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)

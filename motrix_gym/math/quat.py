"""Quaternion math on batched tensors.

Quaternions are ``(..., 4)`` tensors in MuJoCo's order ``(w, x, y, z)``; vectors are ``(..., 3)``.
Every function broadcasts over leading dimensions and is pure (no in-place writes), so it can run
inside ``torch.compile`` graphs.
"""

from __future__ import annotations

import torch
from torch import Tensor


def normalize(x: Tensor, eps: float = 1e-9) -> Tensor:
    """``x / |x|`` along the last dimension, safe at zero."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_conjugate(q: Tensor) -> Tensor:
    """The inverse rotation of a unit quaternion."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_mul(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product ``a * b`` (apply ``b`` first, then ``a``)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_apply(q: Tensor, v: Tensor) -> Tensor:
    """Rotate ``v`` by unit quaternion ``q``: ``q v q*``, via ``v + 2w(u x v) + 2u x (u x v)``."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_apply_inverse(q: Tensor, v: Tensor) -> Tensor:
    """Rotate ``v`` by the inverse of unit quaternion ``q`` (world frame -> body frame)."""
    return quat_apply(quat_conjugate(q), v)


def quat_from_axis_angle(axis: Tensor, angle: Tensor) -> Tensor:
    """Unit quaternion of a rotation by ``angle`` (...,) about unit ``axis`` (..., 3)."""
    half = 0.5 * angle.unsqueeze(-1)
    return torch.cat((torch.cos(half), axis * torch.sin(half)), dim=-1)


def yaw_quat(q: Tensor) -> Tensor:
    """The heading part of ``q``: a rotation about world z with the same yaw."""
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    zero = torch.zeros_like(yaw)
    half = 0.5 * yaw
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)

import mujoco
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from motrix_gym.math import (
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

finite = st.floats(-10, 10, allow_nan=False, width=64)
quats = arrays(np.float64, (4,), elements=finite).filter(lambda q: np.linalg.norm(q) > 1e-3)
vecs = arrays(np.float64, (3,), elements=finite)


def unit(q: np.ndarray) -> torch.Tensor:
    return normalize(torch.from_numpy(q))


@given(quats, vecs)
@settings(max_examples=200, deadline=None)
def test_apply_matches_mujoco(q, v):
    qt = unit(q)
    want = np.zeros(3)
    mujoco.mju_rotVecQuat(want, v, qt.numpy())
    np.testing.assert_allclose(quat_apply(qt, torch.from_numpy(v)).numpy(), want, atol=1e-9)


@given(quats, quats)
@settings(max_examples=200, deadline=None)
def test_mul_matches_mujoco(a, b):
    at, bt = unit(a), unit(b)
    want = np.zeros(4)
    mujoco.mju_mulQuat(want, at.numpy(), bt.numpy())
    np.testing.assert_allclose(quat_mul(at, bt).numpy(), want, atol=1e-12)


@given(quats, vecs)
@settings(max_examples=200, deadline=None)
def test_inverse_round_trip_and_norm(q, v):
    qt, vt = unit(q), torch.from_numpy(v)
    rotated = quat_apply(qt, vt)
    np.testing.assert_allclose(rotated.norm().item(), np.linalg.norm(v), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(quat_apply_inverse(qt, rotated).numpy(), v, atol=1e-9)
    np.testing.assert_allclose(quat_mul(qt, quat_conjugate(qt)).numpy(), [1, 0, 0, 0], atol=1e-12)


@given(quats)
@settings(max_examples=200, deadline=None)
def test_yaw_quat_keeps_heading(q):
    qt = unit(q)
    x = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    fwd = quat_apply(qt, x)
    if fwd[:2].norm() < 1e-3:  # heading undefined when facing straight up or down
        return
    yq = yaw_quat(qt)
    assert abs(yq.norm().item() - 1) < 1e-9
    yfwd = quat_apply(yq, x)
    np.testing.assert_allclose(yfwd[2].item(), 0.0, atol=1e-9)
    heading = fwd[:2] / fwd[:2].norm()
    np.testing.assert_allclose(yfwd[:2].numpy(), heading.numpy(), atol=1e-6)


@given(quats)
@settings(max_examples=200, deadline=None)
def test_yaw_cos_sin_is_cos_and_sin_of_the_yaw(q):
    qt = unit(q)
    w, x, y, z = qt.tolist()
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    c, s = yaw_cos_sin(qt)
    np.testing.assert_allclose([c.item(), s.item()], [np.cos(yaw), np.sin(yaw)], atol=1e-9)


def test_yaw_cos_sin_of_a_vertical_heading_is_yaw_zero():
    up = torch.tensor([0.5, 0.5, -0.5, 0.5])  # x axis to +z, exactly in floats
    assert quat_apply(up, torch.tensor([1.0, 0.0, 0.0])).tolist() == [0.0, 0.0, 1.0]
    c, s = yaw_cos_sin(up)
    assert (c.item(), s.item()) == (1.0, 0.0)


@given(quats, quats)
@settings(max_examples=200, deadline=None)
def test_angle_matches_mujoco(a, b):
    at, bt = unit(a), unit(b)
    diff = np.zeros(3)  # mju_subQuat: the rotation vector taking b to a, |.| in [0, pi]
    mujoco.mju_subQuat(diff, at.numpy(), bt.numpy())
    np.testing.assert_allclose(quat_angle(at, bt).item(), np.linalg.norm(diff), atol=1e-7)


@given(quats, quats)
@settings(max_examples=200, deadline=None)
def test_rot6d_is_two_matrix_columns(q, frame):
    qt, ft = unit(q), unit(frame)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, qt.numpy())
    np.testing.assert_allclose(quat_rot6d(qt).numpy(), mat.reshape(3, 3)[:, :2].T.ravel(), atol=1e-12)
    rel = np.zeros(4)
    mujoco.mju_mulQuat(rel, quat_conjugate(ft).numpy(), qt.numpy())
    mujoco.mju_quat2Mat(mat, rel)
    np.testing.assert_allclose(quat_rot6d(qt, frame=ft).numpy(), mat.reshape(3, 3)[:, :2].T.ravel(), atol=1e-12)


def test_batched_shapes_broadcast():
    """Leading dimensions broadcast as in torch: one frame per lane against several bodies."""
    g = torch.Generator().manual_seed(0)
    frames, bodies = normalize(torch.randn(5, 1, 4, generator=g)), normalize(torch.randn(5, 3, 4, generator=g))
    v = torch.randn(5, 3, 3, generator=g)
    assert quat_mul(frames, bodies).shape == (5, 3, 4)
    assert quat_apply_inverse(frames, v).shape == (5, 3, 3)
    assert quat_angle(frames, bodies).shape == (5, 3)
    assert quat_rot6d(bodies, frame=frames).shape == (5, 3, 6)
    torch.testing.assert_close(quat_rot6d(bodies, frame=frames),
                               quat_rot6d(quat_mul(quat_conjugate(frames.expand(-1, 3, -1)), bodies)))
    axis = torch.tensor([0.0, 0.0, 1.0])
    torch.testing.assert_close(quat_from_axis_angle(axis, torch.tensor([0.0, torch.pi])),
                               torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]))

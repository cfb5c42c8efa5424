"""Converters between our clip format and the two public formats users have.

- **BeyondMimic / mjlab npz**: ``fps``, ``joint_pos`` / ``joint_vel`` (T, J) over the model's
  hinge joints in model order, ``body_pos_w`` / ``body_quat_w`` (w, x, y, z) /
  ``body_lin_vel_w`` / ``body_ang_vel_w`` (T, B, .) over all bodies (world excluded) in model
  order. Names are not stored, so the model gives them.
- **CSV of root pose + joint angles**: one row per frame, ``x, y, z, qx, qy, qz, qw`` of the root
  (quaternion x, y, z, w as in the retargeting tools that write this format) then the hinge
  joints in model order. Bodies come from forward kinematics, velocities from central differences.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from motrix_gym.motion.clip import MotionClip, MotionFormatError
from motrix_gym.motion.kinematics import clip_from_qpos, hinge_joints, robot_bodies

BM_KEYS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


def _model_names(model: mujoco.MjModel) -> tuple[tuple[str, ...], tuple[str, ...]]:
    joints = tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in hinge_joints(model))
    bodies = tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in robot_bodies(model))
    return joints, bodies


def from_beyondmimic(path: str | Path, model: mujoco.MjModel, name: str | None = None) -> MotionClip:
    path = Path(path)
    joints, bodies = _model_names(model)
    with np.load(path) as z:
        missing = [k for k in ("fps", *BM_KEYS) if k not in z]
        if missing:
            raise MotionFormatError(f"BeyondMimic npz {path.name!r}: missing {missing}")
        fps = float(np.asarray(z["fps"]).reshape(-1)[0])
        arrays = {k: np.asarray(z[k], dtype=np.float64) for k in BM_KEYS}
    if arrays["joint_pos"].shape[1] != len(joints) or arrays["body_pos_w"].shape[1] != len(bodies):
        raise MotionFormatError(
            f"BeyondMimic npz {path.name!r}: {arrays['joint_pos'].shape[1]} joints and "
            f"{arrays['body_pos_w'].shape[1]} bodies, the model has {len(joints)} and {len(bodies)}")
    return MotionClip(name=name or path.stem, fps=fps, joint_names=joints, body_names=bodies,
                      **arrays).validate()


def to_beyondmimic(clip: MotionClip, path: str | Path, model: mujoco.MjModel) -> None:
    joints, bodies = _model_names(model)
    jidx, bidx = clip.indices("joint", joints, "the model"), clip.indices("body", bodies, "the model")
    out = {k: getattr(clip, k)[:, jidx if k.startswith("joint") else bidx] for k in BM_KEYS}
    np.savez_compressed(path, fps=np.array([clip.fps]), **out)


def from_csv(path: str | Path, model: mujoco.MjModel, fps: float, name: str | None = None) -> MotionClip:
    path = Path(path)
    rows = np.loadtxt(path, delimiter=",", ndmin=2)
    nj = len(hinge_joints(model))
    if rows.shape[1] != 7 + nj:
        raise MotionFormatError(f"CSV {path.name!r}: {rows.shape[1]} columns, expected 7 + {nj} joints")
    qpos = np.zeros((len(rows), model.nq))
    qpos[:, :3] = rows[:, :3]
    qpos[:, 3] = rows[:, 6]  # x, y, z, w -> w, x, y, z
    qpos[:, 4:7] = rows[:, 3:6]
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    joints = hinge_joints(model)
    qpos[:, [model.jnt_qposadr[j] for j in joints]] = rows[:, 7:]
    return clip_from_qpos(name or path.stem, model, qpos, fps)


def to_csv(clip: MotionClip, path: str | Path, model: mujoco.MjModel, root: str) -> None:
    joints, _ = _model_names(model)
    jidx = clip.indices("joint", joints, "the model")
    b = clip.indices("body", (root,), "the model")[0]
    q = clip.body_quat_w[:, b]
    rows = np.concatenate([clip.body_pos_w[:, b], q[:, 1:], q[:, :1], clip.joint_pos[:, jidx]], axis=1)
    np.savetxt(path, rows, delimiter=",", fmt="%.10g")

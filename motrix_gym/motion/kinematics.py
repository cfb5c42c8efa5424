"""Clips from generalized coordinates: forward kinematics with MuJoCo, velocities by differences.

Both the clip synthesizer and the CSV converter build clips this way, so a clip written to CSV
and read back is the same clip.
"""

from __future__ import annotations

import mujoco
import numpy as np

from motrix_gym.motion.clip import MotionClip


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack((aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw), -1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def angular_velocity(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity of a (T, ..., 4) quaternion series (central differences)."""
    q = quat.copy()
    for t in range(1, len(q)):  # keep the series on one hemisphere so differences are small
        flip = (q[t] * q[t - 1]).sum(-1) < 0
        q[t][flip] *= -1
    dq = np.gradient(q, dt, axis=0)
    return 2.0 * quat_mul(dq, quat_conj(q))[..., 1:]


def hinge_joints(model: mujoco.MjModel) -> list[int]:
    movable = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [j for j in range(model.njnt) if int(model.jnt_type[j]) in movable]


def robot_bodies(model: mujoco.MjModel) -> list[int]:
    """The bodies of the robot: the first body below the world and its subtree (the scene's
    ground and props are other trees)."""
    return [b for b in range(1, model.nbody) if int(model.body_rootid[b]) == 1]


def clip_from_qpos(name: str, model: mujoco.MjModel, qpos: np.ndarray, fps: float) -> MotionClip:
    """A clip of every hinge joint and every body of the robot of ``model`` from (T, nq) qpos
    of a floating-base robot (free joint first)."""
    T = len(qpos)
    data = mujoco.MjData(model)
    bodies = robot_bodies(model)
    pos = np.zeros((T, len(bodies), 3))
    quat = np.zeros((T, len(bodies), 4))
    for t in range(T):
        data.qpos[:] = qpos[t]
        mujoco.mj_kinematics(model, data)
        pos[t], quat[t] = data.xpos[bodies], data.xquat[bodies]
    joints = hinge_joints(model)
    adr = [model.jnt_qposadr[j] for j in joints]
    dt = 1.0 / fps
    joint_pos = qpos[:, adr]
    return MotionClip(
        name=name, fps=fps,
        joint_names=tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints),
        joint_pos=joint_pos, joint_vel=np.gradient(joint_pos, dt, axis=0),
        body_names=tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in bodies),
        body_pos_w=pos, body_quat_w=quat,
        body_lin_vel_w=np.gradient(pos, dt, axis=0), body_ang_vel_w=angular_velocity(quat, dt),
    ).validate()

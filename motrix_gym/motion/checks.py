"""Kinematic plausibility of a clip: limits, planted feet, balance, self-penetration.

Every bundled clip is checked by the test suite with these functions; ``margins`` returns the
numbers the checks compare against their bounds.
"""

from __future__ import annotations

import mujoco
import numpy as np

from motrix_gym.motion.clip import MotionClip
from motrix_gym.motion.kinematics import hinge_joints


def _hull(points: np.ndarray) -> np.ndarray:
    """Convex hull (counter-clockwise) of 2D points, monotone chain."""
    pts = sorted(map(tuple, points))
    if len(pts) < 3:
        return np.array(pts)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def signed_distance(p: np.ndarray, hull: np.ndarray) -> float:
    """Distance from ``p`` to the hull boundary, positive inside."""
    best, inside = np.inf, True
    for a, b in zip(hull, np.roll(hull, -1, axis=0)):
        e = b - a
        t = np.clip(np.dot(p - a, e) / np.dot(e, e), 0.0, 1.0)
        best = min(best, float(np.linalg.norm(p - (a + t * e))))
        if e[0] * (p[1] - a[1]) - e[1] * (p[0] - a[0]) < 0:
            inside = False
    return best if inside else -best


def margins(model: mujoco.MjModel, clip: MotionClip, planted: np.ndarray, feet: tuple[str, str],
            velocity_limits: dict[str, float]) -> dict[str, float]:
    """Worst values over the clip:

    - ``limit_excess``: largest joint excursion beyond its range (rad, <= 0 is inside);
    - ``speed_ratio``: largest |joint velocity| / its actuator's velocity limit;
    - ``sink``: deepest planted sole point below the ground (m);
    - ``slide``: largest horizontal drift of a planted foot within one stance (m);
    - ``com_margin``: smallest distance of the centre of mass inside the support polygon (m);
    - ``penetration``: deepest contact between two of the robot's own geoms (m).
    """
    data = mujoco.MjData(model)
    joints = hinge_joints(model)
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints]
    idx = [clip.joint_names.index(n) for n in names]
    pos = clip.joint_pos[:, idx]
    rng = np.array([model.jnt_range[j] for j in joints])
    limit_excess = float(np.max(np.maximum(rng[:, 0] - pos, pos - rng[:, 1])))
    vmax = np.array([velocity_limits[n] for n in names])
    speed_ratio = float(np.max(np.abs(clip.joint_vel[:, idx]) / vmax))

    foot_ids = [model.body(f).id for f in feet]
    soles = []
    for b in foot_ids:
        geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == b and model.geom_contype[g]]
        soles.append(geoms)
    root = clip.body_names.index(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, 1))
    sink, com_margin, penetration = 0.0, np.inf, 0.0
    slide = 0.0
    starts: list[np.ndarray | None] = [None, None]
    for t in range(clip.num_frames):
        data.qpos[:3] = clip.body_pos_w[t, root]
        data.qpos[3:7] = clip.body_quat_w[t, root]
        data.qpos[[model.jnt_qposadr[j] for j in joints]] = pos[t]
        mujoco.mj_forward(model, data)
        support = []
        for f, b in enumerate(foot_ids):
            if not planted[t, f]:
                starts[f] = None
                continue
            if starts[f] is None:
                starts[f] = data.xpos[b][:2].copy()
            slide = max(slide, float(np.linalg.norm(data.xpos[b][:2] - starts[f])))
            for g in soles[f]:
                half = model.geom_size[g][1]
                axis = data.geom_xmat[g].reshape(3, 3)[:, 2] * half
                for end in (data.geom_xpos[g] + axis, data.geom_xpos[g] - axis):
                    r = model.geom_size[g][0]
                    sink = max(sink, -(end[2] - r))
                    support += [end[:2] + r * np.array(v) for v in ((1, 0), (-1, 0), (0, 1), (0, -1),
                                                                      (0.7071, 0.7071), (-0.7071, 0.7071),
                                                                      (0.7071, -0.7071), (-0.7071, -0.7071))]
        com_margin = min(com_margin, signed_distance(data.subtree_com[1][:2], _hull(np.array(support))))
        for c in data.contact[: data.ncon]:
            if model.geom_bodyid[c.geom1] and model.geom_bodyid[c.geom2]:  # robot-robot, not the ground
                penetration = max(penetration, -c.dist)
    return {"limit_excess": limit_excess, "speed_ratio": speed_ratio, "sink": float(sink), "slide": slide,
            "com_margin": com_margin, "penetration": penetration}

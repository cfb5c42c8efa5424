"""Clip synthesis: plausible whole-body clips from keyframes, by whole-body inverse kinematics.

    python -m motrix_gym.motion.synth --robot g1 --clip dance     # one clip to ./g1_dance.npz
    python -m motrix_gym.motion.synth --all                       # regenerate envs/assets/motions/

A clip is a list of :class:`Key` s: upper-body joint angles, pelvis height and orientation, where
the centre of mass sits between the feet (``weight``: 0 over the left foot, 1 over the right) and
offsets of a lifted foot from its home spot on the ground. Channels are interpolated between keys
with smoothstep (C1, zero velocity at keys). Each frame is then solved by damped least squares
over the whole body, warm-started from the previous frame, with tasks in priority by weight:

1. feet: a planted foot (zero offset) stays exactly at its home pose: flat, sole on the ground;
   a lifted foot follows its offset, flat;
2. centre of mass (x, y) over the point between the feet centres chosen by ``weight``;
3. pelvis height and orientation;
4. posture: upper-body joints follow the keys closely, legs only weakly (the feet decide them).

Joint angles are clamped to their ranges. Body poses come from forward kinematics and velocities
from central differences (``kinematics.clip_from_qpos``). Generation is deterministic.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import mujoco
import numpy as np

from motrix_gym.motion.clip import MotionClip
from motrix_gym.motion.kinematics import clip_from_qpos, hinge_joints

FPS = 50.0
FEET = ("left", "right")


@dataclass(frozen=True)
class Key:
    """The target state at time ``t`` (seconds). Unspecified joints take the robot's default."""

    t: float
    joints: dict[str, float] = field(default_factory=dict)  # regex -> angle
    pelvis_z: float = 0.0  # offset from the standing height
    pelvis_rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    weight: float = 0.5
    lift: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # foot -> (dx, dy, dz)


@dataclass(frozen=True)
class Biped:
    """What synthesis needs to know of a robot beyond its model."""

    name: str
    feet: tuple[str, str]  # left, right foot bodies
    upper: str  # regex of the joints that follow the keys closely (arms, waist, head)


@dataclass
class Solved:
    clip: MotionClip
    planted: np.ndarray  # (T, 2) bool: left, right foot planted
    feet: tuple[str, str]


def smoothstep(a: float, b: float, s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return a + (b - a) * s * s * (3.0 - 2.0 * s)


class Synthesizer:
    def __init__(self, model: mujoco.MjModel, biped: Biped, default_joint_pos: dict[str, float]) -> None:
        self.m, self.b = model, biped
        self.d = mujoco.MjData(model)
        self.hinges = hinge_joints(model)
        self.names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.hinges]
        self.qadr = np.array([model.jnt_qposadr[j] for j in self.hinges])
        self.dadr = np.array([model.jnt_dofadr[j] for j in self.hinges])
        self.range = np.array([model.jnt_range[j] for j in self.hinges])
        self.default = self._angles(default_joint_pos)
        self.upper = np.array([bool(re.fullmatch(biped.upper, n)) for n in self.names])
        self.foot_ids = [model.body(f).id for f in biped.feet]
        self.sole = [self._sole(f) for f in self.foot_ids]  # (points (k, 3) in the foot frame, radius)
        self.stand_height = 0.0
        self.stand_height = self._stand_height()
        self.home = self._home()

    def _angles(self, pattern_values: dict[str, float], base: np.ndarray | None = None) -> np.ndarray:
        out = np.zeros(len(self.names)) if base is None else base.copy()
        for pattern, value in pattern_values.items():
            hits = [i for i, n in enumerate(self.names) if re.fullmatch(pattern, n)]
            if not hits:
                raise ValueError(f"keyframe joint pattern {pattern!r} matches no joint of {self.b.name}")
            out[hits] = value
        return out

    def _sole(self, body: int) -> tuple[np.ndarray, float]:
        """End points of the foot's collision capsules (foot frame) and their radius."""
        pts, radius = [], 0.0
        for g in range(self.m.ngeom):
            if self.m.geom_bodyid[g] != body or self.m.geom_contype[g] == 0:
                continue
            half = self.m.geom_size[g][1]
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, self.m.geom_quat[g])
            axis = rot.reshape(3, 3)[:, 2] * half
            pts += [self.m.geom_pos[g] + axis, self.m.geom_pos[g] - axis]
            radius = max(radius, self.m.geom_size[g][0])
        return np.array(pts), radius

    def sole_points_world(self, foot: int, qpos: np.ndarray) -> tuple[np.ndarray, float]:
        self.d.qpos[:] = qpos
        mujoco.mj_kinematics(self.m, self.d)
        b = self.foot_ids[foot]
        pts, r = self.sole[foot]
        return self.d.xpos[b] + pts @ self.d.xmat[b].reshape(3, 3).T, r

    def _stand_height(self) -> float:
        """Root height at which the default pose puts the lowest sole point on the ground."""
        lowest = min(self.sole_points_world(f, self.base_qpos(self.default))[0][:, 2].min()
                     - self.sole[f][1] for f in range(2))
        return -lowest

    def _home(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Home pose of each foot: where the default pose puts it, yaw only, sole on the ground."""
        q = self.base_qpos(self.default)
        self.d.qpos[:] = q
        mujoco.mj_kinematics(self.m, self.d)
        homes = []
        for f, b in enumerate(self.foot_ids):
            pts, r = self.sole[f]
            pos = self.d.xpos[b].copy()
            pos[2] = -(pts[:, 2].min() - r)  # lowest sole point at z = 0 with the foot flat
            homes.append((pos, np.array([1.0, 0.0, 0.0, 0.0])))
        return homes

    def base_qpos(self, angles: np.ndarray) -> np.ndarray:
        q = self.m.qpos0.copy()
        q[:7] = [0.0, 0.0, self.stand_height, 1.0, 0.0, 0.0, 0.0]
        q[self.qadr] = angles
        return q

    def foot_center(self, f: int) -> np.ndarray:
        pts, _ = self.sole[f]
        mid = 0.5 * (pts.min(0) + pts.max(0))
        return self.home[f][0] + mid  # home orientation is the identity

    def targets(self, keys: list[Key], t: float) -> tuple[np.ndarray, float, np.ndarray, float, dict]:
        i = max(k for k in range(len(keys)) if keys[k].t <= t) if t >= keys[0].t else 0
        a, b = keys[i], keys[min(i + 1, len(keys) - 1)]
        s = 0.0 if b.t == a.t else (t - a.t) / (b.t - a.t)
        ja, jb = self._angles(a.joints, self.default), self._angles(b.joints, self.default)
        angles = np.array([smoothstep(x, y, s) for x, y in zip(ja, jb)])
        rpy = np.array([smoothstep(x, y, s) for x, y in zip(a.pelvis_rpy, b.pelvis_rpy)])
        lift = {f: np.array([smoothstep(x, y, s) for x, y in zip(a.lift.get(f, (0, 0, 0)), b.lift.get(f, (0, 0, 0)))])
                for f in FEET}
        return angles, smoothstep(a.pelvis_z, b.pelvis_z, s), rpy, smoothstep(a.weight, b.weight, s), lift

    def solve_frame(self, q: np.ndarray, angles: np.ndarray, dz: float, rpy: np.ndarray, weight: float,
                    lift: dict[str, np.ndarray], iters: int = 60) -> np.ndarray:
        m, d, nv = self.m, self.d, self.m.nv
        quat_t = np.zeros(4)
        mujoco.mju_euler2Quat(quat_t, rpy, "xyz")
        com_t = (1 - weight) * self.foot_center(0)[:2] + weight * self.foot_center(1)[:2]
        jp, jr = np.zeros((3, nv)), np.zeros((3, nv))
        posture_w = np.where(self.upper, 10.0, 0.05)
        for _ in range(iters):
            d.qpos[:] = q
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            rows, errs, wts = [], [], []
            for f, b in enumerate(self.foot_ids):
                pos_t = self.home[f][0] + lift[FEET[f]]
                mujoco.mj_jacBody(m, d, jp, jr, b)
                rows += [jp.copy(), jr.copy()]
                errs += [pos_t - d.xpos[b], self._rot_err(self.home[f][1], d.xquat[b])]
                wts += [np.full(3, 1e4), np.full(3, 1e4)]
            mujoco.mj_jacSubtreeCom(m, d, jp, 1)
            rows.append(jp[:2].copy())
            errs.append(com_t - d.subtree_com[1][:2])
            wts.append(np.full(2, 100.0))
            mujoco.mj_jacBody(m, d, jp, jr, 1)
            rows += [jp[2:3].copy(), jr.copy()]
            errs += [np.array([self.stand_height + dz - d.xpos[1][2]]), self._rot_err(quat_t, d.xquat[1])]
            wts += [np.full(1, 10.0), np.full(3, 10.0)]
            sel = np.zeros((len(self.dadr), nv))
            sel[np.arange(len(self.dadr)), self.dadr] = 1.0
            rows.append(sel)
            errs.append(angles - q[self.qadr])
            wts.append(posture_w)
            J, e, w = np.vstack(rows), np.concatenate(errs), np.concatenate(wts)
            H = J.T @ (w[:, None] * J) + 1e-6 * np.eye(nv)
            dq = np.linalg.solve(H, J.T @ (w * e))
            mujoco.mj_integratePos(m, q, dq, 1.0)
            q[self.qadr] = np.clip(q[self.qadr], self.range[:, 0], self.range[:, 1])
            if np.abs(dq).max() < 1e-9:
                break
        return q

    @staticmethod
    def _rot_err(target: np.ndarray, current: np.ndarray) -> np.ndarray:
        """World-frame rotation vector taking ``current`` to ``target``."""
        local = np.zeros(3)
        mujoco.mju_subQuat(local, target, current)
        out = np.zeros(3)
        mujoco.mju_rotVecQuat(out, local, current)
        return out

    def synthesize(self, name: str, keys: list[Key], fps: float = FPS) -> Solved:
        times = np.arange(int(round(keys[-1].t * fps)) + 1) / fps
        q = self.base_qpos(self.default)
        qs, planted = [], []
        for t in times:
            angles, dz, rpy, w, lift = self.targets(keys, t)
            q = self.solve_frame(q.copy(), angles, dz, rpy, w, lift)
            qs.append(q.copy())
            planted.append([not np.any(lift[f]) for f in FEET])
        return Solved(clip_from_qpos(name, self.m, np.array(qs), fps), np.array(planted), self.b.feet)


def hold(keys: list[Key], dt: float, **changes: object) -> list[Key]:
    """Append a key ``dt`` after the last one, equal to it except for ``changes``."""
    return keys + [replace(keys[-1], t=keys[-1].t + dt, **changes)]  # type: ignore[arg-type]


ROBOTS = ("g1", "t1")
MOTIONS_DIR = Path(__file__).resolve().parents[2] / "envs" / "assets" / "motions"


def bundled_synthesizer(robot: str) -> Synthesizer:
    """The synthesizer of a bundled robot (its model without visuals, its biped description)."""
    from motrix_gym.envs import robots
    from motrix_gym.envs.wbt import choreography
    from motrix_gym.manager.config import SceneConfig
    from motrix_gym.sim.scene import build_model

    if robot not in ROBOTS:
        raise ValueError(f"unknown robot {robot!r}; clips are synthesized for {ROBOTS}")
    config = {"g1": robots.G1, "t1": robots.T1}[robot]
    biped = {"g1": choreography.G1_BIPED, "t1": choreography.T1_BIPED}[robot]
    return Synthesizer(build_model(SceneConfig(config), 0.005), biped, config.default_joint_pos)


def bundled_clip(robot: str, clip: str, synth: Synthesizer | None = None) -> Solved:
    """Synthesize one bundled clip (``dance``, ``kick``, ``squat`` or ``wave``)."""
    from motrix_gym.envs.wbt.choreography import CLIPS

    if clip not in CLIPS:
        raise ValueError(f"unknown clip {clip!r}; bundled clips are {sorted(CLIPS)}")
    synth = synth or bundled_synthesizer(robot)
    return synth.synthesize(f"{robot}_{clip}", CLIPS[clip](robot))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Synthesize motion clips from keyframes.")
    p.add_argument("--robot", choices=ROBOTS, default="g1")
    p.add_argument("--clip", default="dance")
    p.add_argument("--out", default=None, help="output .npz (default ./<robot>_<clip>.npz)")
    p.add_argument("--all", action="store_true", help=f"regenerate every bundled clip into {MOTIONS_DIR}")
    args = p.parse_args(argv)
    from motrix_gym.envs.wbt.choreography import CLIPS

    jobs = [(r, c, MOTIONS_DIR / f"{r}_{c}.npz") for r in ROBOTS for c in CLIPS] if args.all else [
        (args.robot, args.clip, Path(args.out or f"{args.robot}_{args.clip}.npz"))]
    for robot, clip, out in jobs:
        solved = bundled_clip(robot, clip)
        out.parent.mkdir(parents=True, exist_ok=True)
        solved.clip.save(out)
        print(f"{out}: {solved.clip.num_frames} frames, {solved.clip.duration:.1f} s")


if __name__ == "__main__":
    main()

"""Keyframes of the bundled clips (dance, kick, squat, wave) for G1 and T1.

Each clip is a list of :class:`~motrix_gym.motion.synth.Key`; ``synth`` turns it into a
physically plausible clip (planted feet, centre of mass over the support). Angles in radians.
"""

from __future__ import annotations

from motrix_gym.motion.synth import Biped, Key, hold

G1_BIPED = Biped(name="g1", feet=("left_ankle_roll_link", "right_ankle_roll_link"),
                 upper=r"(waist|.*_shoulder|.*_elbow|.*_wrist).*")
T1_BIPED = Biped(name="t1", feet=("left_foot_link", "right_foot_link"),
                 upper=r"(Waist|AAHead|Head|.*_Shoulder|.*_Elbow|.*_Wrist|.*_Hand).*")


def arms(robot: str, l_pitch: float, l_roll: float, l_elbow: float, r_pitch: float | None = None,
         r_roll: float | None = None, r_elbow: float | None = None) -> dict[str, float]:
    """Both arms; the right mirrors the left unless given. ``roll`` > 0 lifts the arm sideways."""
    r_pitch = l_pitch if r_pitch is None else r_pitch
    r_roll = l_roll if r_roll is None else r_roll
    r_elbow = l_elbow if r_elbow is None else r_elbow
    if robot == "g1":
        return {"left_shoulder_pitch_joint": l_pitch, "left_shoulder_roll_joint": l_roll,
                "left_elbow_joint": l_elbow, "right_shoulder_pitch_joint": r_pitch,
                "right_shoulder_roll_joint": -r_roll, "right_elbow_joint": r_elbow}
    # T1's arms hang at shoulder roll -+1.35 (zero holds them out sideways)
    return {"Left_Shoulder_Pitch": l_pitch, "Left_Shoulder_Roll": -1.35 + l_roll, "Left_Elbow_Yaw": -0.5 * l_elbow,
            "Right_Shoulder_Pitch": r_pitch, "Right_Shoulder_Roll": 1.35 - r_roll, "Right_Elbow_Yaw": 0.5 * r_elbow}


def waist(robot: str, yaw: float = 0.0, roll: float = 0.0, pitch: float = 0.0) -> dict[str, float]:
    if robot == "g1":
        return {"waist_yaw_joint": yaw, "waist_roll_joint": roll, "waist_pitch_joint": pitch}
    return {"Waist": yaw}


def squat(robot: str) -> list[Key]:
    rest = {**arms(robot, 0.2, 0.2, 1.0)}
    forward = {**arms(robot, -1.2, 0.15, 0.2), **waist(robot, pitch=0.25)}
    k = [Key(0.0, rest)]
    k = hold(k, 1.0)
    k = hold(k, 1.5, joints=forward, pelvis_z=-0.2)
    k = hold(k, 1.0)
    k = hold(k, 1.5, joints=rest, pelvis_z=0.0)
    k = hold(k, 1.2, joints=forward, pelvis_z=-0.14)
    k = hold(k, 1.3, joints=rest, pelvis_z=0.0)
    return hold(k, 1.0)


def wave(robot: str) -> list[Key]:
    rest = arms(robot, 0.2, 0.2, 1.0)
    up = arms(robot, 0.2, 0.2, 1.0, r_pitch=-0.3, r_roll=1.4, r_elbow=0.3)
    bent = arms(robot, 0.2, 0.2, 1.0, r_pitch=-0.3, r_roll=1.4, r_elbow=1.3)
    k = [Key(0.0, rest)]
    k = hold(k, 1.0)
    k = hold(k, 1.0, joints={**up, **waist(robot, roll=-0.1)}, weight=0.4)
    for _ in range(4):
        k = hold(k, 0.5, joints={**bent, **waist(robot, roll=-0.1)})
        k = hold(k, 0.5, joints={**up, **waist(robot, roll=-0.1)})
    k = hold(k, 1.2, joints=rest, weight=0.5)
    return hold(k, 0.8)


def kick(robot: str) -> list[Key]:
    rest = arms(robot, 0.2, 0.2, 1.0)
    balance = arms(robot, 0.0, 0.6, 0.6)
    k = [Key(0.0, rest)]
    k = hold(k, 1.0)
    k = hold(k, 1.2, joints=balance, weight=0.0)  # weight onto the left foot
    k = hold(k, 0.4)
    k = hold(k, 0.6, lift={"right": (0.02, 0.0, 0.10)})
    k = hold(k, 0.4, lift={"right": (0.30, 0.0, 0.22)}, joints={**balance, **arms(robot, -0.3, 0.6, 0.6)})
    k = hold(k, 0.5, lift={"right": (0.02, 0.0, 0.10)}, joints=balance)
    k = hold(k, 0.6, lift={})  # foot back on its spot
    k = hold(k, 0.4)
    k = hold(k, 1.2, joints=rest, weight=0.5)
    return hold(k, 0.8)


def dance(robot: str) -> list[Key]:
    rest = arms(robot, 0.2, 0.2, 1.0)
    k = [Key(0.0, rest)]
    k = hold(k, 1.0)
    for i in range(4):  # sway with swinging arms and a torso twist
        s = 1 if i % 2 == 0 else -1
        k = hold(k, 1.0, weight=0.5 + 0.3 * s, joints={**arms(robot, 0.2 + 0.6 * s, 0.3, 0.8, 0.2 - 0.6 * s),
                                                         **waist(robot, yaw=0.3 * s)})
    k = hold(k, 1.0, weight=0.5, joints={**arms(robot, 0.0, 1.2, 0.5)})
    for _ in range(4):  # bounce with the arms out
        k = hold(k, 0.5, pelvis_z=-0.08, joints={**arms(robot, 0.0, 1.0, 0.9)})
        k = hold(k, 0.5, pelvis_z=0.0, joints={**arms(robot, 0.0, 1.3, 0.4)})
    for foot, w in (("right", 0.0), ("left", 1.0), ("right", 0.0), ("left", 1.0)):  # toe taps
        k = hold(k, 1.0, weight=w, joints={**arms(robot, -0.4, 0.4, 1.0), **waist(robot, roll=0.12 * (0.5 - w))})
        k = hold(k, 0.4, lift={foot: (0.05, 0.0, 0.07)})
        k = hold(k, 0.4, lift={})
    k = hold(k, 1.0, weight=0.5, joints={**arms(robot, -0.8, 0.8, 0.4)})
    for i in range(4):  # arms high, swaying with the hips
        s = 1 if i % 2 == 0 else -1
        k = hold(k, 0.9, weight=0.5 + 0.25 * s, pelvis_rpy=(0.0, 0.0, 0.15 * s),
                 joints={**arms(robot, -1.6, 0.6 - 0.3 * s, 0.3, -1.6, 0.6 + 0.3 * s, 0.3),
                         **waist(robot, yaw=-0.2 * s)})
    k = hold(k, 1.5, weight=0.5, pelvis_rpy=(0.0, 0.0, 0.0), joints=rest)
    return hold(k, 1.0)


CLIPS = {"dance": dance, "kick": kick, "squat": squat, "wave": wave}

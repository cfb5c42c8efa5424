"""Robot descriptions: which vendored model, its actuators and default pose, and what walking
needs to know of it (``Legs``: feet, the bodies whose contact ends an episode, the gait).

Actuator gains follow one rule for every motor: a position servo with natural frequency
10 Hz and damping ratio 2 on the joint's reflected rotor inertia (armature):
``stiffness = armature * w**2``, ``damping = 2 * zeta * armature * w``.
Reflected inertias are those of Unitree's two-stage planetary motors:
``rotor_0 * (g1 * g2)**2 + rotor_1 * g2**2 + rotor_2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from motrix_gym.manager.config import ActuatorGroup, Mirror, RobotConfig

ASSETS = Path(__file__).resolve().parent / "assets"
NATURAL_FREQ = 2.0 * math.pi * 10.0
DAMPING_RATIO = 2.0


def reflected_inertia(rotor: tuple[float, float, float], gears: tuple[float, float, float]) -> float:
    return rotor[0] * (gears[1] * gears[2]) ** 2 + rotor[1] * gears[2] ** 2 + rotor[2]


def servo(joints: tuple[str, ...], armature: float, effort: float, velocity: float) -> ActuatorGroup:
    return ActuatorGroup(joints=joints, stiffness=armature * NATURAL_FREQ**2,
                         damping=2.0 * DAMPING_RATIO * armature * NATURAL_FREQ,
                         effort_limit=effort, armature=armature, velocity_limit=velocity)


# Unitree motor data (rotor inertias in kg m^2 per stage, stage gear ratios, peak torque N m).
M5020 = reflected_inertia((0.139e-4, 0.017e-4, 0.169e-4), (1.0, 1.0 + 46 / 18, 1.0 + 56 / 16))
M7520_14 = reflected_inertia((0.489e-4, 0.098e-4, 0.533e-4), (1.0, 4.5, 1.0 + 48 / 22))
M7520_22 = reflected_inertia((0.489e-4, 0.109e-4, 0.738e-4), (1.0, 4.5, 5.0))
M4010 = reflected_inertia((0.068e-4, 0.0, 0.0), (1.0, 5.0, 5.0))

G1 = RobotConfig(
    name="g1",
    xml=ASSETS / "unitree_g1" / "g1.xml",
    root_body="pelvis",
    base_height=0.785,
    actuators=(
        servo((".*_elbow_joint", ".*_shoulder_.*_joint", ".*_wrist_roll_joint"), M5020, 25.0, 37.0),
        servo((".*_hip_pitch_joint", ".*_hip_yaw_joint", "waist_yaw_joint"), M7520_14, 88.0, 32.0),
        servo((".*_hip_roll_joint", ".*_knee_joint"), M7520_22, 139.0, 20.0),
        servo((".*_wrist_pitch_joint", ".*_wrist_yaw_joint"), M4010, 5.0, 22.0),
        # Waist pitch/roll and ankles are driven by two 5020 motors through linkages.
        servo(("waist_pitch_joint", "waist_roll_joint", ".*_ankle_.*_joint"), 2 * M5020, 50.0, 37.0),
    ),
    default_joint_pos={
        ".*_hip_pitch_joint": -0.1,
        ".*_knee_joint": 0.3,
        ".*_ankle_pitch_joint": -0.2,
        ".*_shoulder_pitch_joint": 0.2,
        ".*_elbow_joint": 1.28,
        "left_shoulder_roll_joint": 0.2,
        "right_shoulder_roll_joint": -0.2,
    },
    mirror=Mirror(swap=(("left_", "right_"),), flip=(".*_roll_joint", ".*_yaw_joint")),
)


def action_scale(robot: RobotConfig, factor: float = 0.25) -> dict[str, float]:
    """Per-joint action scale ``factor * effort / stiffness`` (radians per unit action)."""
    return {p: factor * g.effort_limit / g.stiffness for g in robot.actuators for p in g.joints}


def velocity_limits(robot: RobotConfig, joint_names: tuple[str, ...] | list[str]) -> dict[str, float]:
    """Actuator velocity limit of each named joint (first matching group)."""
    out = {}
    for name in joint_names:
        group = robot.actuator_of(name)
        if group is None:
            raise ValueError(f"robot {robot.name!r}: joint {name!r} has no actuator")
        out[name] = group.velocity_limit
    return out


# Booster T1: every joint's armature is 0.03 kg m^2; effort (N m) and speed (rad/s) limits per joint.
T1_ARMATURE = 0.03
T1 = RobotConfig(
    name="t1",
    xml=ASSETS / "booster_t1" / "t1_29dof.xml",
    root_body="Trunk",
    base_height=0.68,
    actuators=(
        servo(("AAHead_yaw", "Head_pitch"), T1_ARMATURE, 7.0, 12.56),
        servo((".*_Shoulder_.*", ".*_Elbow_.*", ".*_Wrist_.*", ".*_Hand_Roll"), T1_ARMATURE, 18.0, 18.84),
        servo(("Waist",), T1_ARMATURE, 30.0, 10.88),
        servo((".*_Hip_Pitch",), T1_ARMATURE, 45.0, 12.5),
        servo((".*_Hip_Roll", ".*_Hip_Yaw"), T1_ARMATURE, 30.0, 10.9),
        servo((".*_Knee_Pitch",), T1_ARMATURE, 60.0, 11.7),
        servo((".*_Ankle_Pitch",), T1_ARMATURE, 12.0, 18.8),
        servo((".*_Ankle_Roll",), T1_ARMATURE, 12.0, 12.4),
    ),
    default_joint_pos={
        ".*_Shoulder_Pitch": 0.2,
        "Left_Shoulder_Roll": -1.35,
        "Right_Shoulder_Roll": 1.35,
        "Left_Elbow_Yaw": -0.5,
        "Right_Elbow_Yaw": 0.5,
        ".*_Hip_Pitch": -0.2,
        ".*_Knee_Pitch": 0.4,
        ".*_Ankle_Pitch": -0.25,
    },
    mirror=Mirror(swap=(("Left_", "Right_"),), flip=(".*_Roll", ".*_Yaw", "AAHead_yaw", "Waist")),
)


# Unitree Go1: one motor type (rotor inertia about its axis, kg m^2) behind a 6:1 gearbox at the
# hips and thighs and a further 1.5:1 linkage at the knees; peak torque (N m) and speed (rad/s).
GO1_ROTOR = 0.000111842
GO1_HIP = reflected_inertia((GO1_ROTOR, 0.0, 0.0), (1.0, 6.0, 1.0))
GO1_KNEE = reflected_inertia((GO1_ROTOR, 0.0, 0.0), (1.0, 9.0, 1.0))
GO1 = RobotConfig(
    name="go1",
    xml=ASSETS / "unitree_go1" / "go1.xml",
    root_body="trunk",
    base_height=0.295,
    actuators=(
        servo((".*_hip_joint", ".*_thigh_joint"), GO1_HIP, 23.7, 30.1),
        servo((".*_calf_joint",), GO1_KNEE, 35.55, 20.06),
    ),
    default_joint_pos={
        ".*_thigh_joint": 0.9,
        ".*_calf_joint": -1.8,
        "[FR]R_hip_joint": 0.1,
        "[FR]L_hip_joint": -0.1,
    },
    mirror=Mirror(swap=(("FR_", "FL_"), ("RR_", "RL_")), flip=(".*_hip_joint",)),
)


@dataclass(frozen=True)
class Legs:
    """What velocity tracking needs to know of a legged robot.

    ``feet``: foot bodies (bipeds: left, right; quadrupeds: FL, FR, RL, RR) and, per foot, the
    point of its sole in the body's frame; ``foot_geoms``: the geoms that touch the ground (empty:
    all of each foot body's); ``illegal``: bodies whose ground contact ends an episode;
    ``undesired``: bodies whose ground contact is penalised; ``gait_period``: one stride (s)."""

    robot: RobotConfig
    biped: bool
    feet: tuple[str, ...]
    sole: tuple[tuple[float, float, float], ...]
    illegal: tuple[str, ...]
    undesired: tuple[str, ...]
    min_height: float  # root height above ground below which the episode ends (m)
    gait_period: float
    foot_geoms: tuple[str, ...] = ()
    stand_height: float = 0.0  # the root height above ground a quadruped is rewarded to keep (m)
    push: float = 0.5  # the largest horizontal velocity kick of a push (m/s)


G1_LEGS = Legs(
    robot=G1, biped=True,
    feet=("left_ankle_roll_link", "right_ankle_roll_link"), sole=((0.0, 0.0, -0.03),) * 2,
    illegal=("pelvis", "torso_link"),
    undesired=("left_knee_link", "right_knee_link", "left_hip_roll_link", "right_hip_roll_link"),
    min_height=0.3, gait_period=0.8,
)
T1_LEGS = Legs(
    robot=T1, biped=True,
    feet=("left_foot_link", "right_foot_link"), sole=((0.0, 0.0, -0.03),) * 2,
    illegal=("Trunk", "H2"),
    undesired=("Shank_Left", "Shank_Right", "Hip_Roll_Left", "Hip_Roll_Right"),
    min_height=0.3, gait_period=0.8,
)
GO1_LEGS = Legs(
    robot=GO1, biped=False,
    feet=("FL_calf", "FR_calf", "RL_calf", "RR_calf"), sole=((0.0, 0.0, -0.213),) * 4,
    foot_geoms=("FL_foot_collision", "FR_foot_collision", "RL_foot_collision", "RR_foot_collision"),
    illegal=("trunk",),
    undesired=("FL_thigh", "FR_thigh", "RL_thigh", "RR_thigh", "FL_hip", "FR_hip", "RL_hip", "RR_hip"),
    min_height=0.12, gait_period=0.5,
    stand_height=0.25,  # its servos hold the default pose at 0.23 m; standing up takes effort
    push=0.3,  # a 12 kg robot: kicks of a humanoid's size would throw it
)


# Go1 standing on a ball: every sole 0.14 m ahead of or behind and 0.09 m beside the trunk's
# origin and 0.26 m below it (solved by inverse kinematics), so the four feet rest on a sphere
# around a point below the trunk, 28.6 degrees off its top for a 0.325 m ball.
GO1_BALL_STANCE = {
    "F[RL]_thigh_joint": 1.1162,
    "R[RL]_thigh_joint": 0.7378,
    ".*_calf_joint": -1.854,
    "[FR]R_hip_joint": 0.1435,
    "[FR]L_hip_joint": -0.1435,
}
GO1_BALL_STANCE_HEIGHT = 0.26  # soles below the trunk's origin (m)
GO1_BALL_FOOT_REACH = math.hypot(0.14, 0.09)  # soles from the trunk's vertical axis (m)
GO1_FOOT_RADIUS = 0.023
GO1_ON_BALL = replace(GO1, default_joint_pos=GO1_BALL_STANCE,
                      base_height=0.325 + math.sqrt((0.325 + GO1_FOOT_RADIUS) ** 2 - GO1_BALL_FOOT_REACH**2)
                      + GO1_BALL_STANCE_HEIGHT)

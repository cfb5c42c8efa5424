"""Whole-body motion tracking (BeyondMimic-style): follow a reference clip with every body.

``tracking`` builds the task for any robot described by a :class:`TrackingRobot`; the module
ends with the five registered tasks (G1 dance, kick, mix; T1 dance, kick).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from motrix_gym.envs.robots import G1, T1, action_scale
from motrix_gym.manager.config import ContactSensor, RobotConfig, SceneConfig, TaskConfig
from motrix_gym.manager.terms import (
    Bodies,
    CommandTerm,
    EventTerm,
    JointPositionAction,
    Joints,
    ResetTerm,
    Sensor,
)
from motrix_gym.manager.terms import ObservationTerm as Obs
from motrix_gym.manager.terms import RewardTerm as Rew
from motrix_gym.manager.terms import TerminationTerm as Term
from motrix_gym.mdp import events
from motrix_gym.mdp import motion as mo
from motrix_gym.mdp import observations as obs
from motrix_gym.mdp import rewards as rew
from motrix_gym.mdp import terminations as term

MOTIONS = Path(__file__).resolve().parents[1] / "assets" / "motions"
ALL = Joints(".*")
MODES = ("train", "play")


@dataclass(frozen=True)
class TrackingRobot:
    robot: RobotConfig
    anchor: str
    tracked: tuple[str, ...]  # 14 bodies: pelvis/trunk, hips, knees, ankles, torso, shoulders, elbows, wrists
    end_effectors: tuple[str, ...]  # ankles and wrists: their height error ends an episode
    undesired: tuple[str, ...]  # bodies that should not touch the ground


G1_TRACKING = TrackingRobot(
    robot=G1,
    anchor="torso_link",
    tracked=("pelvis", "left_hip_roll_link", "right_hip_roll_link", "left_knee_link", "right_knee_link",
             "left_ankle_roll_link", "right_ankle_roll_link", "torso_link", "left_shoulder_roll_link",
             "right_shoulder_roll_link", "left_elbow_link", "right_elbow_link", "left_wrist_yaw_link",
             "right_wrist_yaw_link"),
    end_effectors=("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link"),
    undesired=("pelvis", "torso_link", "left_knee_link", "right_knee_link", "left_hip_roll_link",
               "right_hip_roll_link", "left_elbow_link", "right_elbow_link"),
)
T1_TRACKING = TrackingRobot(
    robot=T1,
    anchor="Trunk",
    tracked=("Trunk", "Waist", "Hip_Roll_Left", "Hip_Roll_Right", "Shank_Left", "Shank_Right", "left_foot_link",
             "right_foot_link", "AL2", "AR2", "AL4", "AR4", "left_hand_link", "right_hand_link"),
    end_effectors=("left_foot_link", "right_foot_link", "left_hand_link", "right_hand_link"),
    undesired=("Trunk", "Waist", "Hip_Roll_Left", "Hip_Roll_Right", "Shank_Left", "Shank_Right", "AL3", "AR3"),
)


def tracking(name: str, spec: TrackingRobot, clips: tuple[str, ...], sampling: str | None = None,
             mode: str = "train") -> TaskConfig:
    """Tracking of ``clips`` (file names under envs/assets/motions, or paths) by ``spec.robot``.

    ``mode="play"`` disables time-outs, observation and reset noise, pushes and adaptive sampling,
    and plays the clips one after the other (``sampling="sequential"``).
    """
    if mode not in MODES:
        raise ValueError(f"{name}: mode must be one of {MODES}, got {mode!r}")
    play = mode == "play"
    if sampling is None:
        sampling = "sequential" if play else "adaptive"
    if sampling not in mo.SAMPLING:
        raise ValueError(f"{name}: sampling must be one of {mo.SAMPLING}, got {sampling!r}")
    if play and sampling != "sequential":
        raise ValueError(f"{name}: mode='play' plays the clips sequentially; got sampling={sampling!r}")
    paths = tuple(str(c if Path(c).is_absolute() else MOTIONS / c) for c in clips)
    noise = (lambda lo: None) if play else (lambda lo: (-lo, lo))
    cmd = {"command": "motion"}
    policy = (
        Obs("command", mo.motion_command, params=cmd),
        Obs("motion_anchor_ori_b", mo.motion_anchor_ori_b, params=cmd, noise=noise(0.05)),
        Obs("base_ang_vel", obs.base_ang_vel, noise=noise(0.2)),
        Obs("joint_pos", obs.joint_pos_rel, params={"joints": ALL}, noise=noise(0.01)),
        Obs("joint_vel", obs.joint_vel, params={"joints": ALL}, noise=noise(0.5)),
        Obs("actions", obs.last_action),
    )
    critic = (
        Obs("command", mo.motion_command, params=cmd),
        Obs("motion_anchor_pos_b", mo.motion_anchor_pos_b, params=cmd),
        Obs("motion_anchor_ori_b", mo.motion_anchor_ori_b, params=cmd),
        Obs("body_pos", mo.robot_body_pos_b, params=cmd),
        Obs("body_ori", mo.robot_body_ori_b, params=cmd),
        Obs("base_lin_vel", obs.base_lin_vel),
        Obs("base_ang_vel", obs.base_ang_vel),
        Obs("joint_pos", obs.joint_pos_rel, params={"joints": ALL}),
        Obs("joint_vel", obs.joint_vel, params={"joints": ALL}),
        Obs("actions", obs.last_action),
    )
    undesired = tuple(Sensor(f"{b}_contact") for b in spec.undesired)
    terminations = (
        Term("motion_end", mo.motion_end, params=cmd, time_out=True),
        Term("anchor_height", mo.anchor_height_error, params={**cmd, "threshold": 0.25}),
        Term("anchor_tilt", mo.anchor_tilt_error, params={**cmd, "threshold": 0.8}),
        Term("end_effector_height", mo.body_height_error,
             params={**cmd, "bodies": Bodies(*spec.end_effectors), "threshold": 0.25}),
        Term("physics_diverged", term.physics_diverged),
    )
    if not play:
        terminations = (Term("time_out", term.time_out, time_out=True), *terminations)
    return TaskConfig(
        name=name,
        scene=SceneConfig(robot=spec.robot,
                          contact_sensors=tuple(ContactSensor(f"{b}_contact", b) for b in spec.undesired)),
        actions=JointPositionAction(joints=ALL, scale=action_scale(spec.robot)),
        commands=(CommandTerm("motion", mo.MotionCommand, params={
            "clips": paths, "anchor": Bodies(spec.anchor), "bodies": Bodies(*spec.tracked), "sampling": sampling}),),
        observations={"policy": policy, "critic": critic},
        rewards=(
            Rew("anchor_pos", mo.anchor_pos_exp, weight=0.5, params={**cmd, "std": 0.3}),
            Rew("anchor_ori", mo.anchor_ori_exp, weight=0.5, params={**cmd, "std": 0.4}),
            Rew("body_pos", mo.body_pos_exp, weight=1.0, params={**cmd, "std": 0.3}),
            Rew("body_ori", mo.body_ori_exp, weight=1.0, params={**cmd, "std": 0.4}),
            Rew("body_lin_vel", mo.body_lin_vel_exp, weight=1.0, params={**cmd, "std": 1.0}),
            Rew("body_ang_vel", mo.body_ang_vel_exp, weight=1.0, params={**cmd, "std": 3.14}),
            Rew("action_rate", rew.action_rate, weight=-0.1),
            Rew("joint_limit", rew.joint_limits, weight=-10.0),
            Rew("undesired_contacts", rew.undesired_contacts, weight=-0.1, params={"sensors": undesired}),
        ),
        terminations=terminations,
        resets=(ResetTerm("motion_start", mo.reset_to_motion, params={
            **cmd, "pos_noise": 0.0 if play else 0.05, "rot_noise": 0.0 if play else 0.1,
            "lin_vel_noise": 0.0 if play else 0.2, "ang_vel_noise": 0.0 if play else 0.2,
            "joint_noise": 0.0 if play else 0.1}),),
        events=() if play else (EventTerm("push", events.push_by_velocity, interval_s=(1.0, 3.0)),),
        sim_dt=0.005,
        decimation=4,
        episode_length_s=1e6 if play else 10.0,
        extra_reads=("cvel", "subtree_com"),
        vector_kernels=True,  # errors of every tracked body in every lane
    )


def registered(name: str, spec: TrackingRobot, clips: tuple[str, ...]) -> Callable[..., TaskConfig]:
    """The builder of a registered task: its make-time options are ``sampling`` and ``mode``."""
    def build(sampling: str | None = None, mode: str = "train") -> TaskConfig:
        return tracking(name, spec, clips, sampling=sampling, mode=mode)

    return build


g1_dance = registered("G1WbtDance", G1_TRACKING, ("g1_dance.npz",))
g1_kick = registered("G1WbtKick", G1_TRACKING, ("g1_kick.npz",))
g1_mix = registered("G1WbtMix", G1_TRACKING, ("g1_dance.npz", "g1_kick.npz", "g1_squat.npz", "g1_wave.npz"))
t1_dance = registered("T1WbtDance", T1_TRACKING, ("t1_dance.npz",))
t1_kick = registered("T1WbtKick", T1_TRACKING, ("t1_kick.npz",))

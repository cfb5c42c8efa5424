"""G1 velocity tracking: follow a (vx, vy, wz) command with a phase-clocked gait."""

from __future__ import annotations

import math

from motrix_gym.envs.robots import G1, action_scale
from motrix_gym.manager.config import ContactSensor, SceneConfig, TaskConfig
from motrix_gym.manager.terms import (
    CommandTerm,
    JointPositionAction,
    Joints,
    ResetTerm,
    Sensor,
)
from motrix_gym.manager.terms import (
    ObservationTerm as Obs,
)
from motrix_gym.manager.terms import (
    RewardTerm as Rew,
)
from motrix_gym.manager.terms import (
    TerminationTerm as Term,
)
from motrix_gym.mdp import commands, resets
from motrix_gym.mdp import observations as obs
from motrix_gym.mdp import rewards as rew
from motrix_gym.mdp import terminations as term

FEET = (Sensor("left_foot_contact"), Sensor("right_foot_contact"))
ALL = Joints(".*")


MODES = ("train", "play")


def walk_flat(mode: str = "train") -> TaskConfig:
    """``mode="play"``: no observation noise, the default pose at reset without noise or a
    random heading (for watching a policy)."""
    if mode not in MODES:
        raise ValueError(f"G1WalkFlat: mode must be one of {MODES}, got {mode!r}")
    play = mode == "play"

    def noise(lo: float) -> tuple[float, float] | None:
        return None if play else (-lo, lo)

    policy = (
        Obs("base_ang_vel", obs.base_ang_vel, scale=0.25, noise=noise(0.2)),
        Obs("projected_gravity", obs.projected_gravity, noise=noise(0.05)),
        Obs("command", obs.command, params={"name": "base_velocity"}),
        Obs("joint_pos", obs.joint_pos_rel, params={"joints": ALL}, noise=noise(0.01)),
        Obs("joint_vel", obs.joint_vel, params={"joints": ALL}, scale=0.05, noise=noise(1.5)),
        Obs("last_action", obs.last_action),
        Obs("gait_phase", obs.gait_phase, params={"name": "gait"}),
    )
    critic = (
        Obs("base_lin_vel", obs.base_lin_vel),
        *(Obs(t.name, t.func, params=t.params, scale=t.scale) for t in policy),
    )
    return TaskConfig(
        name="G1WalkFlat",
        scene=SceneConfig(
            robot=G1,
            contact_sensors=(
                ContactSensor("left_foot_contact", "left_ankle_roll_link"),
                ContactSensor("right_foot_contact", "right_ankle_roll_link"),
                ContactSensor("pelvis_contact", "pelvis"),
                ContactSensor("torso_contact", "torso_link"),
            ),
        ),
        actions=JointPositionAction(joints=ALL, scale=action_scale(G1)),
        commands=(
            CommandTerm("base_velocity", commands.VelocityCommand,
                        params={"ranges": ((-1.0, 1.0), (-1.0, 1.0), (-1.0, 1.0)),
                                "standing_fraction": 0.2, "resample_s": 10.0}),
            CommandTerm("gait", commands.GaitClock, params={"sensors": FEET, "period": 0.8}),
        ),
        observations={"policy": policy, "critic": critic},
        rewards=(
            Rew("track_lin_vel", rew.track_lin_vel_xy, weight=1.0,
                params={"command": "base_velocity", "std": 0.5}),
            Rew("track_ang_vel", rew.track_ang_vel_z, weight=0.5,
                params={"command": "base_velocity", "std": 0.5}),
            Rew("flat_orientation", rew.flat_orientation, weight=-5.0),
            Rew("ang_vel_xy", rew.ang_vel_xy, weight=-0.05),
            Rew("action_rate", rew.action_rate, weight=-0.01),
            Rew("pose", rew.joint_pose, weight=-0.1, params={"joints": ALL}),
            Rew("feet_phase", rew.feet_phase, weight=0.5, params={"clock": "gait", "sensors": FEET}),
            Rew("feet_air_time", rew.feet_air_time, weight=1.0, params={"clock": "gait", "threshold": 0.3}),
            Rew("alive", rew.alive, weight=0.5),
        ),
        terminations=(
            Term("time_out", term.time_out, time_out=True),
            Term("illegal_contact", term.illegal_contact,
                 params={"sensors": (Sensor("pelvis_contact"), Sensor("torso_contact"))}),
            Term("fell_over", term.bad_orientation, params={"limit_angle": math.radians(70)}),
            Term("base_too_low", term.root_height_below, params={"min_height": 0.3}),
            Term("physics_diverged", term.physics_diverged),
        ),
        resets=(
            ResetTerm("default_pose", resets.reset_default_pose,
                      params={"joint_noise": 0.0 if play else 0.1, "yaw_range": 0.0 if play else math.pi,
                              "vel_noise": 0.0 if play else 0.1}),
        ),
        sim_dt=0.005,
        decimation=4,
        episode_length_s=20.0,
    )

"""Go1 on a yoga ball: stand with all four feet on a free ball and keep it under you.

The ball (0.325 m, 1.5 kg, soft, rolling with resistance) rests on the floor; the robot starts
on top of it in a stance whose feet all touch it. Training draws per lane, at every reset, the
ball's radius, mass, friction, softness and damping as well as the robot's physics, and adds
observation noise and an action delay of 0 or 1 steps; ``mode="play"`` turns these off.
"""

from __future__ import annotations

import math
from dataclasses import replace

from motrix_gym.envs.robots import (
    GO1_BALL_FOOT_REACH,
    GO1_BALL_STANCE_HEIGHT,
    GO1_FOOT_RADIUS,
    GO1_LEGS,
    GO1_ON_BALL,
    action_scale,
)
from motrix_gym.manager.config import (
    Ball,
    BallRandomization,
    Camera,
    ContactSensor,
    Randomization,
    SceneConfig,
    TaskConfig,
)
from motrix_gym.manager.terms import Bodies, CommandTerm, FreeBody, JointPositionAction, Joints, ResetTerm, Sensor
from motrix_gym.manager.terms import ObservationTerm as Obs
from motrix_gym.manager.terms import RewardTerm as Rew
from motrix_gym.manager.terms import TerminationTerm as Term
from motrix_gym.mdp import ball as bl
from motrix_gym.mdp import commands
from motrix_gym.mdp import observations as obs
from motrix_gym.mdp import rewards as rew
from motrix_gym.mdp import terminations as term

MODES = ("train", "play")
ALL = Joints(".*")
BALL = Ball()
LEGS = ("FL", "FR", "RL", "RR")


def go1_ball(mode: str = "train") -> TaskConfig:
    if mode not in MODES:
        raise ValueError(f"Go1BallBalance: mode must be one of {MODES}, got {mode!r}")
    play = mode == "play"

    def noise(lo: float) -> tuple[float, float] | None:
        return None if play else (-lo, lo)

    ball = {"ball": FreeBody(BALL.name)}
    feet = tuple(Sensor(f"{leg}_foot_ball") for leg in LEGS)
    undesired = (*(f"{leg}_{part}" for leg in LEGS for part in ("hip", "thigh")), "trunk")
    calves = tuple(f"{leg}_calf_collision{i}" for leg in LEGS for i in (1, 2))
    sensors = (
        *(ContactSensor(f"{leg}_foot_ball", geom=f"{leg}_foot_collision", other=BALL.name) for leg in LEGS),
        *(ContactSensor(f"{b}_ball", body=b, other=BALL.name) for b in undesired),
        *(ContactSensor(f"{g}_ball", geom=g, other=BALL.name) for g in calves),
        ContactSensor("robot_floor", subtree=GO1_ON_BALL.root_body),
    )
    # the base's height above the ball's top in the stance, for the nominal ball
    reach = math.sqrt((BALL.radius + GO1_FOOT_RADIUS) ** 2 - GO1_BALL_FOOT_REACH**2)
    stance = reach - BALL.radius + GO1_BALL_STANCE_HEIGHT
    # every term mirrors as its function says (@reflects): the world-frame ball state through the
    # world's x-z plane, about which the scene is symmetric
    policy = (
        Obs("projected_gravity", obs.projected_gravity, noise=noise(0.05)),
        Obs("base_ang_vel", obs.base_ang_vel, scale=0.25, noise=noise(0.2)),
        Obs("ball_pos", bl.ball_pos_b, params=ball, noise=noise(0.02)),
        Obs("ball_vel", bl.ball_vel_b, params=ball, noise=noise(0.1)),
        Obs("joint_pos", obs.joint_pos_rel, params={"joints": ALL}, noise=noise(0.01)),
        Obs("joint_vel", obs.joint_vel, params={"joints": ALL}, scale=0.05, noise=noise(1.5)),
        Obs("last_action", obs.last_action),
    )
    critic = (
        Obs("base_lin_vel", obs.base_lin_vel),
        *(replace(t, noise=None) for t in policy),  # the policy's, without noise
        Obs("ball_state_w", bl.ball_state_w, params=ball),
    )
    return TaskConfig(
        name="Go1BallBalance",
        scene=SceneConfig(robot=GO1_ON_BALL, contact_sensors=sensors, balls=(BALL,)),
        actions=JointPositionAction(joints=ALL, scale=action_scale(GO1_ON_BALL), max_delay=0 if play else 1),
        commands=(CommandTerm("feet", commands.FeetState, params={
            "sensors": feet, "bodies": tuple(Bodies(f"{leg}_calf") for leg in LEGS), "sole": GO1_LEGS.sole}),),
        observations={"policy": policy, "critic": critic},
        rewards=(
            Rew("alive", rew.alive, weight=1.0),
            Rew("upright", bl.upright, weight=1.0),
            Rew("height_above_ball", bl.height_above_ball, weight=-20.0, params={**ball, "target": stance}),
            Rew("ball_centred", bl.ball_centred, weight=1.0, params={**ball, "feet": "feet", "std": 0.1}),
            Rew("pose", rew.joint_pose, weight=-0.1, params={"joints": ALL}),
            Rew("action_rate", rew.action_rate, weight=-0.01),
            Rew("joint_limit", rew.joint_limits, weight=-5.0),
            Rew("undesired_contacts", rew.undesired_contacts, weight=-1.0,
                params={"sensors": tuple(Sensor(f"{n}_ball") for n in (*undesired, *calves))}),
        ),
        terminations=(
            Term("time_out", term.time_out, time_out=True),
            Term("base_too_low", bl.base_below_ball_top, params={**ball, "min_height": 0.1}),
            Term("tilted", term.bad_orientation, params={"limit_angle": math.radians(45)}),
            Term("ball_away", bl.ball_off_centre, params={**ball, "feet": "feet", "max_offset": 0.6}),
            Term("on_floor", term.illegal_contact, params={"sensors": (Sensor("robot_floor"),)}),
            Term("physics_diverged", term.physics_diverged),
        ),
        resets=(ResetTerm("on_ball", bl.reset_on_ball, params={
            **ball, "stance_height": GO1_BALL_STANCE_HEIGHT, "foot_reach": GO1_BALL_FOOT_REACH,
            "foot_radius": GO1_FOOT_RADIUS, "sink": 0.008, "ball_xy_noise": 0.0 if play else 0.05,
            "ball_vel_noise": 0.0 if play else 0.05,
            "joint_noise": 0.0 if play else 0.01, "yaw_range": 0.0 if play else math.pi}),),
        randomization=None if play else Randomization(friction_bodies=GO1_LEGS.feet, ball=BallRandomization()),
        sim_dt=0.005,
        decimation=4,
        episode_length_s=20.0,
        # closer than the robot's height on the ball would set, looking between robot and ball
        camera=Camera(distance=1.8, elevation=-15.0, lookat_height=-0.25),
    )

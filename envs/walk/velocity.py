"""Velocity tracking: follow a (vx, vy, wz) command on flat ground or generated terrain.

``velocity`` builds the task for any legged robot (``robots.Legs``) on any terrain; the module
ends with the registered tasks. Bipeds walk to a phase clock (each foot's stance in its half of
the stride); quadrupeds are rewarded for long swings, still stance feet, a steady base height
and small torques and accelerations. On generated terrain a curriculum moves each lane between
difficulty levels; ``scan=True`` adds a height scan around the base to the observations of the
policy (noisy) and the critic. The critic observes no scan the policy lacks: its 187 points move
together with the base height, and a critic given them learns the Go1's values so much more slowly
that its policy walks half as well in the same steps (docs/learning.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from motrix_gym.envs.robots import G1_LEGS, GO1_LEGS, T1_LEGS, Legs, action_scale
from motrix_gym.manager.config import (
    ContactSensor,
    Randomization,
    SceneConfig,
    SubTerrain,
    TaskConfig,
    TerrainConfig,
)
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
from motrix_gym.mdp import commands, events, resets
from motrix_gym.mdp import observations as obs
from motrix_gym.mdp import rewards as rew
from motrix_gym.mdp import terminations as term
from motrix_gym.mdp.terrain import TerrainCurriculum, height_scan
from motrix_gym.sim import terrain as ground

MODES = ("train", "play")
ALL = Joints(".*")
VEL = "base_velocity"

FLAT = TerrainConfig()
def rough_ground(noise: tuple[float, float]) -> TerrainConfig:
    """A fifth of the columns flat, the rest bumps of ``noise`` m (at difficulty 0 and 1) around
    1.5 m platforms."""
    return TerrainConfig(sub_terrains=(SubTerrain("flat", ground.flat, proportion=0.2),
                                       SubTerrain("rough", ground.rough, proportion=0.8, platform=1.5,
                                                  params={"noise": noise})))


def pyramids(up: Callable[..., Any], down: Callable[..., Any], **params: Any) -> TerrainConfig:
    """Half the columns ``up`` (rising to their platforms), half ``down``, with the same parameters."""
    return TerrainConfig(sub_terrains=tuple(SubTerrain(f.__name__, f, params=dict(params)) for f in (up, down)))


ROUGH = rough_ground((0.02, 0.10))
STAIRS = pyramids(ground.pyramid_stairs, ground.inverted_pyramid_stairs, step_height=(0.05, 0.20))
SLOPE = pyramids(ground.pyramid_slope, ground.inverted_pyramid_slope, slope=(0.0, 0.4))
# A quadruped's legs are shorter: lower, narrower steps, smaller bumps.
STAIRS_SMALL = pyramids(ground.pyramid_stairs, ground.inverted_pyramid_stairs, step_height=(0.03, 0.14),
                        step_width=0.25)
ROUGH_SMALL = rough_ground((0.01, 0.06))


# the command curriculum's factors on the velocity ranges, easiest first
COMMAND_LEVELS = (0.25, 0.5, 0.75, 1.0)


def velocity(name: str, legs: Legs, terrain: TerrainConfig = FLAT, scan: bool = False,
             mode: str = "train", command: Iterable[float] | None = None,
             command_curriculum: bool = False, heading_command: bool = False) -> TaskConfig:
    """The velocity-tracking task ``name`` for ``legs`` on ``terrain``.

    ``mode="play"``: no observation noise, pushes, randomisation or action delay, the default
    pose at reset facing +x, and every reset on a random terrain level (no curriculum).
    ``command=(vx, vy, yaw_rate)``: every lane is always given that command (m/s in the base's
    heading frame, rad/s) instead of random ones; all zero asks every lane to stand.
    ``command_curriculum``: each lane's commands start at a quarter of the ranges and widen by a
    quarter after each episode the lane tracked to its time-out (``COMMAND_LEVELS``; training
    only). ``heading_command``: random commands ask for a heading (any world yaw) instead of a
    yaw rate, and the yaw rate in the command is a controller turning the base towards it."""
    if mode not in MODES:
        raise ValueError(f"{name}: mode must be one of {MODES}, got {mode!r}")
    if not isinstance(command_curriculum, bool):
        raise ValueError(f"{name}: command_curriculum must be True or False, got {command_curriculum!r}")
    if command_curriculum and (mode == "play" or command is not None):
        raise ValueError(f"{name}: command_curriculum widens random training commands; it does not go with "
                         f"{'mode=play' if mode == 'play' else 'a fixed command'}")
    if not isinstance(heading_command, bool):
        raise ValueError(f"{name}: heading_command must be True or False, got {heading_command!r}")
    if heading_command and command is not None:
        raise ValueError(f"{name}: heading_command draws random headings; a fixed command gives its own yaw rate")
    play, flat = mode == "play", terrain.flat
    ranges, standing = ((-1.0, 1.0),) * 3, 0.2
    if command is not None:
        fixed = commands.velocity_triple(command, f"{name}: command")
        ranges, standing = tuple((v, v) for v in fixed), float(not any(fixed))

    def noise(lo: float) -> tuple[float, float] | None:
        return None if play else (-lo, lo)

    feet = tuple(f"{f}_contact" for f in legs.feet)
    feet_sensors = tuple(Sensor(s) for s in feet)
    illegal = tuple(f"{b}_contact" for b in legs.illegal)
    undesired = tuple(f"{b}_contact" for b in legs.undesired)
    contact_sensors = (
        *(ContactSensor(s, geom=g) if g else ContactSensor(s, body=b)
          for s, b, g in zip(feet, legs.feet, legs.foot_geoms or ("",) * len(feet))),
        *(ContactSensor(s, body=b) for s, b in zip(illegal, legs.illegal)),
        *(ContactSensor(s, body=b) for s, b in zip(undesired, legs.undesired)),
    )
    # mirror (manager/symmetry.py): the functions' own reflections (@reflects), and the task's
    # for its command (lateral velocity and yaw rate change sign) and its gait clock (half a
    # stride on, where the other foot's stance is)
    scan_obs = Obs("height_scan", height_scan, noise=noise(0.1))
    policy = (
        Obs("base_ang_vel", obs.base_ang_vel, scale=0.25, noise=noise(0.2)),
        Obs("projected_gravity", obs.projected_gravity, noise=noise(0.05)),
        Obs("command", obs.command, params={"name": VEL}, mirror=(1, -1, -1)),
        Obs("joint_pos", obs.joint_pos_rel, params={"joints": ALL}, noise=noise(0.01)),
        Obs("joint_vel", obs.joint_vel, params={"joints": ALL}, scale=0.05, noise=noise(1.5)),
        Obs("last_action", obs.last_action),
        *((Obs("gait_phase", obs.gait_phase, params={"name": "gait"}, mirror=(-1, -1)),) if legs.biped else ()),
        *((scan_obs,) if scan else ()),
    )
    critic = (
        Obs("base_lin_vel", obs.base_lin_vel),
        *(replace(t, noise=None) for t in policy),  # the policy's, without noise
    )
    cmds = (
        *(() if flat else (CommandTerm("terrain", TerrainCurriculum, params={"command": VEL, "enabled": not play}),)),
        CommandTerm(VEL, commands.VelocityCommand,
                    params={"ranges": ranges, "standing_fraction": standing, "resample_s": 10.0,
                            "marker_height": 0.75 * legs.robot.base_height,  # above a humanoid's head
                            "levels": COMMAND_LEVELS if command_curriculum else (1.0,),
                            "heading": (-math.pi, math.pi) if heading_command else None}),
        *((CommandTerm("gait", commands.GaitClock, params={"command": VEL, "period": legs.gait_period}),)
          if legs.biped else ()),
        CommandTerm("feet", commands.FeetState, params={
            "sensors": feet_sensors, "bodies": tuple(Bodies(b) for b in legs.feet), "sole": legs.sole}),
    )
    # the quadruped stands still stably from the start: tracking must weigh more to pull it into a gait
    track = 1.0 if legs.biped else 2.0
    common = (
        Rew("track_lin_vel", rew.track_lin_vel_xy, weight=track, params={"command": VEL, "std": 0.5}),
        Rew("track_ang_vel", rew.track_ang_vel_z, weight=0.5 * track, params={"command": VEL, "std": 0.5}),
        Rew("ang_vel_xy", rew.ang_vel_xy, weight=-0.05),
        Rew("action_rate", rew.action_rate, weight=-0.01),
        Rew("joint_limit", rew.joint_limits, weight=-5.0),
        Rew("undesired_contacts", rew.undesired_contacts, weight=-0.5,
            params={"sensors": tuple(Sensor(s) for s in undesired)}),
        Rew("alive", rew.alive, weight=0.5),
    )
    if legs.biped:
        gait = (
            Rew("flat_orientation", rew.flat_orientation, weight=-5.0 if flat else -1.0),
            Rew("pose", rew.joint_pose, weight=-0.1, params={"joints": ALL}),
            Rew("feet_phase", rew.feet_phase, weight=0.5, params={"clock": "gait", "sensors": feet_sensors}),
            Rew("feet_air_time", rew.feet_air_time, weight=1.0,
                params={"feet": "feet", "command": VEL, "threshold": 0.3}),
        )
    else:
        gait = (
            Rew("flat_orientation", rew.flat_orientation, weight=-2.5 if flat else -0.5),
            Rew("lin_vel_z", rew.lin_vel_z, weight=-2.0),
            Rew("base_height", rew.base_height, weight=-10.0, params={"target": legs.stand_height}),
            Rew("joint_torques", rew.joint_torques, weight=-2e-4),
            Rew("joint_acc", rew.joint_acc, weight=-2.5e-7, params={"joints": ALL}),
            Rew("feet_air_time", rew.feet_air_time, weight=1.0,
                params={"feet": "feet", "command": VEL, "threshold": 0.2}),
            Rew("foot_slip", rew.foot_slip, weight=-0.1, params={"feet": "feet"}),
        )
    rewards = common[:2] + gait + common[2:]
    observations = {"policy": policy, "critic": critic}
    return TaskConfig(
        name=name,
        scene=SceneConfig(robot=legs.robot, terrain=terrain, contact_sensors=contact_sensors),
        actions=JointPositionAction(joints=ALL, scale=action_scale(legs.robot), max_delay=0 if play else 1),
        commands=cmds,
        observations=observations,
        rewards=rewards,
        terminations=(
            Term("time_out", term.time_out, time_out=True),
            Term("illegal_contact", term.illegal_contact, params={"sensors": tuple(Sensor(s) for s in illegal)}),
            Term("fell_over", term.bad_orientation, params={"limit_angle": math.radians(70)}),
            Term("base_too_low", term.root_height_below, params={"min_height": legs.min_height}),
            Term("physics_diverged", term.physics_diverged),
        ),
        resets=(ResetTerm("default_pose", resets.reset_default_pose, params={
            "joint_noise": 0.0 if play else 0.1, "yaw_range": 0.0 if play else math.pi,
            "vel_noise": 0.0 if play else 0.1, "origins": None if flat else "terrain",
            "xy_noise": 0.0 if flat else 0.25, "lift": 0.02}),),
        events=() if play else (EventTerm("push", events.push_by_velocity, interval_s=(1.0, 3.0),
                                          params={"lin": (legs.push, legs.push, 0.1), "ang": (0.3, 0.3, 0.3)}),),
        randomization=None if play else Randomization(friction_bodies=legs.feet),
        sim_dt=0.005,
        decimation=4,
        episode_length_s=20.0,
        extra_reads=() if legs.biped else ("actuator_force", "qacc"),
        # a height scan's points: vector code in the graphs that observe one
        vector_kernels=tuple(g for g, terms in observations.items() if any(t.func is height_scan for t in terms)),
    )


def registered(name: str, legs: Legs, terrain: TerrainConfig = FLAT, scan: bool = False) -> Callable[..., TaskConfig]:
    """The builder of a registered task: its make-time options are ``mode``, ``command``,
    ``command_curriculum`` and ``heading_command``."""
    def build(mode: str = "train", command: Iterable[float] | None = None,
              command_curriculum: bool = False, heading_command: bool = False) -> TaskConfig:
        return velocity(name, legs, terrain, scan=scan, mode=mode, command=command,
                        command_curriculum=command_curriculum, heading_command=heading_command)

    return build


g1_flat = registered("G1WalkFlat", G1_LEGS)
g1_rough = registered("G1WalkRough", G1_LEGS, ROUGH)
g1_stairs = registered("G1WalkStairs", G1_LEGS, STAIRS, scan=True)
g1_slope = registered("G1WalkSlope", G1_LEGS, SLOPE, scan=True)
t1_flat = registered("T1WalkFlat", T1_LEGS)
t1_rough = registered("T1WalkRough", T1_LEGS, ROUGH)
go1_flat = registered("Go1WalkFlat", GO1_LEGS)
go1_rough = registered("Go1WalkRough", GO1_LEGS, ROUGH_SMALL)
go1_stairs = registered("Go1WalkStairs", GO1_LEGS, STAIRS_SMALL, scan=True)

"""TaskConfig: the scene and the term tables of one task, with its timing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from motrix_gym.manager.terms import (
    CommandTerm,
    EventTerm,
    JointPositionAction,
    ObservationTerm,
    ResetTerm,
    RewardTerm,
    TerminationTerm,
)


@dataclass(frozen=True)
class ActuatorGroup:
    """Position actuators (PD) for the joints matching ``joints`` (regexes, full match)."""

    joints: tuple[str, ...]
    stiffness: float
    damping: float
    effort_limit: float
    armature: float
    velocity_limit: float = float("inf")  # rad/s, the motor's no-load speed (checks, not enforced)


@dataclass(frozen=True)
class RobotConfig:
    """A robot model and what the scene adds to it in code (the vendored XML is never edited)."""

    name: str
    xml: Path
    actuators: tuple[ActuatorGroup, ...]
    default_joint_pos: dict[str, float]  # regex -> angle; joints not matched default to 0
    base_height: float  # initial height of the root body
    root_body: str


@dataclass(frozen=True)
class ContactSensor:
    """A MuJoCo contact sensor: the number of contacts between ``body``'s geoms and the ground."""

    name: str
    body: str


@dataclass(frozen=True)
class SceneConfig:
    robot: RobotConfig
    terrain: str = "flat"
    contact_sensors: tuple[ContactSensor, ...] = ()
    memory_mb: int = 1  # MuJoCo arena per MjData (default would be ~15 MB)


@dataclass(frozen=True)
class TaskConfig:
    """One task: scene, timing and term tables.

    ``observations`` maps a group name (``policy`` always, ``critic`` optionally) to its terms.
    """

    name: str
    scene: SceneConfig
    actions: JointPositionAction
    observations: dict[str, tuple[ObservationTerm, ...]]
    rewards: tuple[RewardTerm, ...]
    terminations: tuple[TerminationTerm, ...]
    resets: tuple[ResetTerm, ...] = ()
    commands: tuple[CommandTerm, ...] = ()
    events: tuple[EventTerm, ...] = ()
    sim_dt: float = 0.005
    decimation: int = 4
    episode_length_s: float = 20.0
    max_speed: float = 1000.0  # a lane with any |qvel| above this (m/s, rad/s) has diverged
    extra_reads: tuple[str, ...] = ()  # MjData fields read besides qpos, qvel, xpos, xquat, sensordata
    extras: dict[str, object] = field(default_factory=dict)

    @property
    def step_dt(self) -> float:
        return self.sim_dt * self.decimation

    @property
    def max_episode_steps(self) -> int:
        return int(round(self.episode_length_s / self.step_dt))

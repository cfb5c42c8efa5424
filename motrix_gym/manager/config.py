"""TaskConfig: the scene and the term tables of one task, with its timing."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from motrix_gym.arguments import is_int, is_number
from motrix_gym.manager.patterns import first_match
from motrix_gym.manager.terms import (
    CommandTerm,
    EventTerm,
    JointPositionAction,
    ObservationTerm,
    ResetTerm,
    RewardTerm,
    TerminationTerm,
)


def _require(owner: str, name: str, value: object, strict: bool = True, finite: bool = True) -> None:
    """``value`` is a real number > 0 (>= 0 where not ``strict``; infinite allowed where not
    ``finite``); else a ValueError naming ``owner`` and ``name``."""
    if not (is_number(value, finite) and (value > 0 if strict else value >= 0)):
        raise ValueError(f"{owner}: {name} must be a {'finite ' if finite else ''}number {'>' if strict else '>='} 0, "
                         f"got {value!r}")


@dataclass(frozen=True)
class ActuatorGroup:
    """Position actuators (PD) for the joints matching ``joints`` (regexes, full match)."""

    joints: tuple[str, ...]
    stiffness: float
    damping: float
    effort_limit: float
    armature: float
    velocity_limit: float = float("inf")  # rad/s, the motor's no-load speed (checks, not enforced)

    def __post_init__(self) -> None:
        owner = f"actuators {self.joints!r}"
        for name in ("stiffness", "damping", "armature"):
            _require(owner, name, getattr(self, name), strict=False)
        _require(owner, "effort_limit", self.effort_limit)
        _require(owner, "velocity_limit", self.velocity_limit, finite=False)


@dataclass(frozen=True)
class Mirror:
    """How a robot maps onto itself reflected through its sagittal (x-z) plane: a joint's
    counterpart is its name with one of ``swap``'s pairs exchanged (``("left_", "right_")``), its
    own where none occurs; the joints matching ``flip`` (regexes, full match: those turning about
    their x or z axis) change sign, those turning about y keep it."""

    swap: tuple[tuple[str, str], ...]
    flip: tuple[str, ...]

    def counterpart(self, name: str) -> str:
        for a, b in self.swap:
            if a in name:
                return name.replace(a, b)
            if b in name:
                return name.replace(b, a)
        return name

    def sign(self, name: str) -> float:
        return -1.0 if first_match(self.flip, name) is not None else 1.0


@dataclass(frozen=True)
class RobotConfig:
    """A robot model and what the scene adds to it in code (the vendored XML is never edited)."""

    name: str
    xml: Path
    actuators: tuple[ActuatorGroup, ...]
    default_joint_pos: dict[str, float]  # regex -> angle; joints not matched default to 0
    base_height: float  # height of the root body above the ground in the default pose, standing
    root_body: str  # the body of the robot's free joint
    mirror: Mirror | None = None  # None: the robot is not mirror-symmetric (or not described so)

    def __post_init__(self) -> None:
        _require(f"robot {self.name!r}", "base_height", self.base_height)

    def actuator_of(self, joint: str) -> ActuatorGroup | None:
        """The first actuator group whose patterns match ``joint``."""
        return next((g for g in self.actuators if first_match(g.joints, joint) is not None), None)


@dataclass(frozen=True)
class ContactSensor:
    """A MuJoCo contact sensor: whether the geoms of ``body`` (or the one geom ``geom``, or every
    geom of the ``subtree`` below a body) touch those of ``other``, a body of the scene (the
    ground, a plane or a heightfield, by default)."""

    name: str
    body: str = ""
    other: str = "terrain"
    geom: str = ""
    subtree: str = ""  # a body and every body below it

    def __post_init__(self) -> None:
        if sum(map(bool, (self.body, self.geom, self.subtree))) != 1:
            raise ValueError(f"contact sensor {self.name!r}: give exactly one of body, geom and subtree")


TERRAIN = "terrain"  # the name of the ground's body and geom in every scene

@dataclass(frozen=True)
class SubTerrain:
    """One kind of tile, given ``proportion`` of the grid's columns: ``func(tile, **params)``
    returns its heights (m) at the tile's samples (``sim/terrain.py``: ``Tile``, and the built-in
    kinds, whose ranges are (at difficulty 0, at difficulty 1)). Robots spawn at the centre of a
    flat ``platform`` m square in its middle, which ``func`` keeps flat. The env checks ``params``
    against ``func``'s signature, as it checks a term's, when it builds the terrain."""

    name: str
    func: Callable[..., Any]
    proportion: float = 1.0
    platform: float = 2.0
    # out of the hash (a dict has none), still compared: equal configs share one height map
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"sub-terrain: name must be a non-empty str, got {self.name!r}")
        owner = f"sub-terrain {self.name!r}"
        if not callable(self.func):
            raise ValueError(f"{owner}: func must be callable, got {self.func!r}")
        if not isinstance(self.params, dict):
            raise ValueError(f"{owner}: params must be a dict, got {type(self.params).__name__}")
        for name in ("proportion", "platform"):
            _require(owner, name, getattr(self, name))


# The most heightfield samples a terrain may have. Building one costs about 60 bytes a sample (the
# height map, MuJoCo's models, the height lookup), so this is about 6 GB; a resolution typed a
# digit too fine would otherwise exhaust the machine's memory before any error could be raised.
MAX_TERRAIN_SAMPLES = 10**8


@dataclass(frozen=True)
class TerrainConfig:
    """The ground. No ``sub_terrains``: an infinite plane at height 0. Otherwise one heightfield
    of ``rows`` x ``cols`` square tiles of ``tile_size`` m: the rows' difficulties rise evenly
    over the ``difficulty`` range (row r: lo + (hi - lo) r / (rows - 1); one row: hi), columns
    are given to the sub-terrains by proportion; generated from ``seed`` on a grid of
    ``resolution`` m, with a flat ``border`` m wide around it."""

    sub_terrains: tuple[SubTerrain, ...] = ()
    rows: int = 10
    cols: int = 10
    tile_size: float = 8.0
    resolution: float = 0.1
    border: float = 4.0
    seed: int = 0
    difficulty: tuple[float, float] = (0.0, 1.0)

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "seed"):
            value = getattr(self, name)
            if not is_int(value) or value < (0 if name == "seed" else 1):
                raise ValueError(f"terrain: {name} must be an int >= {0 if name == 'seed' else 1}, got {value!r}")
        for name in ("tile_size", "resolution"):
            _require("terrain", name, getattr(self, name))
        _require("terrain", "border", self.border, strict=False)
        d = self.difficulty
        if not (isinstance(d, tuple) and len(d) == 2 and all(is_number(v) for v in d) and 0 <= d[0] <= d[1] <= 1):
            raise ValueError(f"terrain: difficulty must be (lo, hi) with 0 <= lo <= hi <= 1, got {d!r}")
        if self.cols < len(self.sub_terrains):
            raise ValueError(f"terrain: {self.rows} rows x {self.cols} columns cannot hold "
                             f"{len(self.sub_terrains)} sub-terrains (one column each at least)")
        names = [sub.name for sub in self.sub_terrains]
        if len(set(names)) < len(names):
            raise ValueError(f"terrain: sub-terrain names {names} repeat one (paths name them)")
        for sub in self.sub_terrains:
            if not 0 < sub.platform < self.tile_size:
                raise ValueError(f"terrain: the {sub.name!r} platform ({sub.platform} m) must be inside the "
                                 f"{self.tile_size} m tile")
        for name in ("tile_size", "border"):
            cells = getattr(self, name) / self.resolution
            if self.sub_terrains and abs(cells - round(cells)) > 1e-9:
                raise ValueError(f"terrain: {name} {getattr(self, name)} is not a multiple of resolution "
                                 f"{self.resolution}")
        nx, ny = self.samples
        if self.sub_terrains and nx * ny > MAX_TERRAIN_SAMPLES:
            raise ValueError(f"terrain: {self.rows} x {self.cols} tiles of {self.tile_size} m and a {self.border} m "
                             f"border at a resolution of {self.resolution} m are a heightfield of {nx} x {ny} "
                             f"samples, more than the {MAX_TERRAIN_SAMPLES:.0e} a terrain may have (about 60 "
                             f"bytes each in memory); use a coarser resolution or fewer tiles")

    @property
    def cells(self) -> tuple[int, int]:
        """Samples across a tile and across the border."""
        return round(self.tile_size / self.resolution), round(self.border / self.resolution)

    @property
    def samples(self) -> tuple[int, int]:
        """The heightfield's samples along x (the rows of tiles) and y (the columns), border included."""
        n, b = self.cells
        return self.rows * n + 2 * b, self.cols * n + 2 * b

    def row_difficulty(self, row: int) -> float:
        lo, hi = self.difficulty
        return lo + (hi - lo) * row / (self.rows - 1) if self.rows > 1 else hi

    @property
    def flat(self) -> bool:
        return not self.sub_terrains


@dataclass(frozen=True)
class Ball:
    """A free ball in the scene (body, free joint and geom all named ``name``), resting on the
    ground at the origin: a hollow shell (inertia 2/3 m r^2). ``friction`` is MuJoCo's sliding,
    torsional and rolling friction (contacts with the ball have 6 dimensions, so it rolls with
    resistance); ``softness`` the contact's time constant (s; MuJoCo's default is 0.02);
    ``damping`` acts on its six velocities."""

    name: str = "ball"
    radius: float = 0.325
    mass: float = 1.5
    friction: tuple[float, float, float] = (0.8, 0.02, 0.005)
    softness: float = 0.04
    damping: float = 0.01

    def __post_init__(self) -> None:
        for name in ("radius", "mass", "softness", "damping"):
            _require(f"ball {self.name!r}", name, getattr(self, name), strict=name != "damping")


@dataclass(frozen=True)
class SceneConfig:
    robot: RobotConfig
    terrain: TerrainConfig = TerrainConfig()
    contact_sensors: tuple[ContactSensor, ...] = ()
    balls: tuple[Ball, ...] = ()
    memory_mb: int = 1  # MuJoCo arena per MjData (default would be ~15 MB)


@dataclass(frozen=True)
class BallRandomization:
    """Per-lane ranges of the scene's ball (see ``Ball``); its inertia follows radius and mass."""

    radius: tuple[float, float] = (0.30, 0.35)
    mass: tuple[float, float] = (1.2, 1.8)
    friction: tuple[float, float] = (0.6, 1.0)
    softness: tuple[float, float] = (0.02, 0.06)
    damping: tuple[float, float] = (0.0, 0.05)

    def __post_init__(self) -> None:
        for name in ("radius", "mass", "friction", "softness", "damping"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi < math.inf or (name != "damping" and lo == 0):
                raise ValueError(f"ball randomization: {name} must be (lo, hi), finite, with 0 < lo <= hi "
                                 f"(0 <= lo for damping), got {(lo, hi)}")


@dataclass(frozen=True)
class Randomization:
    """Per-lane physical parameters, drawn from the lane RNG at every reset, each a uniform range.

    ``friction``: sliding friction of the ``friction_bodies``' geoms (absolute); ``mass_scale``:
    every robot body's mass and inertia multiplied; ``com_offset``: the root body's centre of mass
    moved by up to this much (m) along each axis; ``gain_scale``: the PD gains multiplied (one
    factor per lane for stiffness, one for damping); ``ball``: the scene's ball."""

    friction: tuple[float, float] = (0.4, 1.2)
    friction_bodies: tuple[str, ...] = ()
    mass_scale: tuple[float, float] = (0.9, 1.1)
    com_offset: float = 0.03
    gain_scale: tuple[float, float] = (0.9, 1.1)
    ball: BallRandomization | None = None

    def __post_init__(self) -> None:
        for name in ("friction", "mass_scale", "gain_scale"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi < math.inf:
                raise ValueError(f"randomization: {name} must be (lo, hi), finite, with 0 < lo <= hi, got {(lo, hi)}")
        _require("randomization", "com_offset", self.com_offset, strict=False)


@dataclass(frozen=True)
class Camera:
    """The free camera of rendered frames. It follows the robot's root body, looking at the point
    ``lookat_height`` m above the root's origin from ``distance`` m away (None: 3.5 times the
    robot's standing base height, within 1.2-3 m), from ``azimuth`` degrees around the vertical
    and ``elevation`` degrees above the horizontal (negative: from above). The live window
    (``render_mode="human"``) starts from the same distance and angles, its tracking camera looking
    at the robot's centre of mass."""

    distance: float | None = None
    azimuth: float = 135.0
    elevation: float = -20.0
    lookat_height: float = 0.0

    def __post_init__(self) -> None:
        if self.distance is not None and not (is_number(self.distance) and self.distance > 0):
            raise ValueError(f"camera distance must be None or > 0, got {self.distance!r}")
        if not -90.0 <= self.elevation <= 90.0:
            raise ValueError(f"camera elevation must be in [-90, 90] degrees, got {self.elevation!r}")


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
    randomization: Randomization | None = None
    # Compile with Inductor's explicit vector code: about twice the compile time, for terms that do
    # much arithmetic per lane, such as a height scan or motion tracking's per-body errors
    # (runtime.graph.inductor_options). True: every graph; observation groups: the graphs that
    # observe one of them (the step graph of an env observing it, its observe graph).
    vector_kernels: bool | tuple[str, ...] = False
    camera: Camera = Camera()  # rendered frames only

    def __post_init__(self) -> None:
        # checked here, not by the resolver: the scene and the episode's length are built from them first
        if not is_int(self.decimation) or self.decimation < 1:
            raise ValueError(f"task {self.name!r}: decimation must be an int >= 1, got {self.decimation!r}")
        for name in ("sim_dt", "episode_length_s"):
            _require(f"task {self.name!r}", name, getattr(self, name))
        _require(f"task {self.name!r}", "max_speed", self.max_speed, finite=False)
        if self.max_episode_steps < 1:
            raise ValueError(f"task {self.name!r}: episode_length_s {self.episode_length_s!r} s is shorter than "
                             f"half a control step ({self.step_dt:g} s)")

    def vector_graph(self, groups: tuple[str, ...]) -> bool:
        """Whether a graph observing ``groups`` (none: the reset graph, ...) gets vector code."""
        v = self.vector_kernels
        return v if isinstance(v, bool) else any(g in v for g in groups)

    @property
    def step_dt(self) -> float:
        return self.sim_dt * self.decimation

    @property
    def max_episode_steps(self) -> int:
        return int(round(self.episode_length_s / self.step_dt))

"""TaskConfig -> ResolvedProgram: every check happens here, before anything runs.

The resolver knows the model only through :class:`ModelInfo` (names and addresses, filled in by
``sim/``), so this module stays free of MuJoCo. It checks term names (unique, non-empty), that
parameters match the term function's signature and annotated types, that every
:class:`Bodies` / :class:`Joints` / :class:`Sensor` reference names something in the model and
every ``CommandName`` one of the task's commands, of the class its annotation asks for; each
error names the term at fault. Model references become index tensors.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from motrix_gym.arguments import is_int, is_number
from motrix_gym.manager.config import RobotConfig, TaskConfig
from motrix_gym.manager.patterns import lookup
from motrix_gym.manager.terms import Annotation, Bodies, FreeBody, Joints, Sensor, annotation, hints, term_function


class TaskConfigError(ValueError):
    """A task configuration that cannot run; the message names the term at fault."""


@dataclass(frozen=True)
class ModelInfo:
    """What the resolver needs to know of a compiled model."""

    body_names: tuple[str, ...]
    joint_names: tuple[str, ...]
    joint_types: tuple[int, ...]  # MuJoCo mjtJoint: 0 free, 1 ball, 2 slide, 3 hinge
    joint_qposadr: tuple[int, ...]
    joint_dofadr: tuple[int, ...]
    joint_range: tuple[tuple[float, float], ...]
    joint_limited: tuple[bool, ...]
    actuator_joints: tuple[int, ...]  # joint id driven by each actuator
    sensor_names: tuple[str, ...]
    sensor_adr: tuple[int, ...]
    sensor_dim: tuple[int, ...]
    sensor_stage: tuple[int, ...]  # mjtStage each sensor needs
    nq: int
    nv: int
    nu: int
    nbody: int
    nsensordata: int
    geom_names: tuple[str, ...]
    geom_bodies: tuple[int, ...]  # body of each geom
    joint_bodies: tuple[int, ...]  # body of each joint
    body_parents: tuple[int, ...]  # parent of each body (the world is its own)
    qpos0: tuple[float, ...]  # the model's reference configuration
    heightfield: Any = None  # the terrain's HeightMap (sim.terrain) when the ground is a heightfield


@dataclass(frozen=True)
class RootIndex:
    """The robot's free joint: its body and the addresses of its 7 coordinates and 6 velocities."""

    body: int
    qpos: int
    dof: int


@dataclass(frozen=True)
class JointIndex:
    """Resolved joints: names and their qpos / dof addresses."""

    names: tuple[str, ...]
    ids: Tensor
    qpos: Tensor
    dof: Tensor


@dataclass(frozen=True)
class SensorSlice:
    """Where one sensor's values sit in ``sensordata``."""

    name: str
    adr: int
    dim: int


@dataclass(frozen=True)
class ResolvedTerm:
    """A term with its model references replaced by index tensors."""

    name: str
    func: Callable[..., Any]
    params: dict[str, Any]
    cfg: Any  # the term config it came from (weight, scale, noise, ...)


@dataclass(frozen=True)
class ResolvedAction:
    joints: JointIndex
    actuator_ids: Tensor  # actuator of each action dim
    scale: Tensor  # (na,)
    clip: float
    max_delay: int


@dataclass(frozen=True)
class ResolvedBall:
    """A ball of the scene: its body, geom and free joint."""

    cfg: Any  # manager.config.Ball
    body: int
    geom: int
    joint: RootIndex


@dataclass(frozen=True)
class ResolvedRandomization:
    """``Randomization`` with its bodies resolved: the geoms whose friction is drawn, the robot's
    bodies (masses) and its root (centre of mass), and the ball whose parameters are drawn."""

    cfg: Any
    friction_geoms: tuple[int, ...]
    bodies: tuple[int, ...]
    root: int
    ball: ResolvedBall | None


@dataclass(frozen=True)
class ResolvedProgram:
    """Everything the runtime executes, in schedule order."""

    task: TaskConfig
    model: ModelInfo
    action: ResolvedAction
    commands: tuple[ResolvedTerm, ...]
    rewards: tuple[ResolvedTerm, ...]
    terminations: tuple[ResolvedTerm, ...]
    resets: tuple[ResolvedTerm, ...]
    events: tuple[ResolvedTerm, ...]
    observations: dict[str, tuple[ResolvedTerm, ...]]
    default_qpos: Tensor  # (nq,) float32
    root: RootIndex
    robot_bodies: tuple[int, ...]  # the root body and every body below it, in model order
    hinge: JointIndex  # all hinge/slide joints
    randomization: ResolvedRandomization | None
    balls: tuple[ResolvedBall, ...]
    reads: tuple[str, ...]  # MjData fields copied into the context after every physics call
    read_stage: int  # the mjtStage those fields and the sensors the terms read need: 1 position, 2 velocity
    sensors: tuple[str, ...]  # the sensors the terms read, in the model's order


_KEPT = ("task", "model", "cfg", "func")  # configs and functions: no tensors of the program's own


def on_device(x: Any, device: torch.device) -> Any:
    """``x`` (a ``ResolvedProgram`` or a part of it) with every index tensor and table on
    ``device``: a copy, or ``x`` itself on the CPU, where the resolver makes them."""
    if device.type == "cpu":
        return x
    if isinstance(x, Tensor):
        return x.to(device)
    if isinstance(x, tuple):
        return tuple(on_device(v, device) for v in x)
    if isinstance(x, dict):
        return {k: on_device(v, device) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and type(x).__module__ == __name__:
        return dataclasses.replace(x, **{f.name: on_device(getattr(x, f.name), device)
                                         for f in dataclasses.fields(x) if f.name not in _KEPT})
    return x


BASE_READS = ("qpos", "qvel", "xpos", "xquat", "sensordata")
EXTRA_READS = ("cvel", "subtree_com", "actuator_force", "qacc")  # fields a task may add
VELOCITY_READS = ("cvel",)  # of the derived fields, those of the velocity stage


def _match(kind: str, patterns: tuple[str, ...], names: tuple[str, ...], where: str) -> list[int]:
    if not patterns:
        raise TaskConfigError(f"{where}: empty {kind} reference")
    ids: list[int] = []
    for pat in patterns:
        try:
            rx = re.compile(pat)
        except re.error as e:
            raise TaskConfigError(f"{where}: bad {kind} pattern {pat!r}: {e}") from None
        hits = [i for i, n in enumerate(names) if n and rx.fullmatch(n)]
        if not hits:
            close = difflib.get_close_matches(pat, [n for n in names if n], n=1)  # "": not of this kind
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TaskConfigError(f"{where}: {kind} {pat!r} matches no {kind} of the model{hint}")
        ids += [i for i in hits if i not in ids]
    return sorted(ids)


def resolve_joints(ref: Joints, model: ModelInfo, where: str) -> JointIndex:
    movable = tuple(n if t in (2, 3) else "" for n, t in zip(model.joint_names, model.joint_types))
    ids = _match("joint", ref.names, movable, where)
    return JointIndex(
        names=tuple(model.joint_names[i] for i in ids),
        ids=torch.tensor(ids, dtype=torch.long),
        qpos=torch.tensor([model.joint_qposadr[i] for i in ids], dtype=torch.long),
        dof=torch.tensor([model.joint_dofadr[i] for i in ids], dtype=torch.long),
    )


def resolve_root(robot: str, body: str, model: ModelInfo) -> RootIndex:
    """The free joint of the robot's root ``body`` (other free bodies, a ball, are not the robot)."""
    if body not in model.body_names:
        raise TaskConfigError(f"robot {robot!r}: root body {body!r} is not in the model")
    b = model.body_names.index(body)
    free = [j for j, (t, jb) in enumerate(zip(model.joint_types, model.joint_bodies)) if t == 0 and jb == b]
    if not free:
        raise TaskConfigError(f"robot {robot!r}: root body {body!r} has no free joint")
    return RootIndex(body=b, qpos=model.joint_qposadr[free[0]], dof=model.joint_dofadr[free[0]])


def default_pose(robot: RobotConfig, model: ModelInfo) -> Tensor:
    """``model``'s qpos0 with ``robot`` standing: its root at its base height above the origin,
    upright, and its joints at their default angles (a joint matched by several patterns takes
    the last one's)."""
    root = resolve_root(robot.name, robot.root_body, model)
    hinge = resolve_joints(Joints(".*"), model, f"robot {robot.name!r}")
    qpos = torch.tensor(model.qpos0, dtype=torch.float32)
    qpos[root.qpos:root.qpos + 7] = torch.tensor([0.0, 0.0, robot.base_height, 1.0, 0.0, 0.0, 0.0])
    for pattern, value in robot.default_joint_pos.items():
        for i in _match("joint", (pattern,), hinge.names, f"robot {robot.name!r} default pose"):
            lo, hi = model.joint_range[int(hinge.ids[i])]
            if not lo <= value <= hi:
                raise TaskConfigError(f"robot {robot.name!r}: default {value} for joint "
                                      f"{hinge.names[i]!r} is outside its range [{lo}, {hi}]")
            qpos[int(hinge.qpos[i])] = value
    return qpos


def subtree(body: int, model: ModelInfo) -> tuple[int, ...]:
    """``body`` and its descendants, in model order (a parent precedes its children)."""
    inside = {body}
    for b in range(body + 1, len(model.body_parents)):
        if model.body_parents[b] in inside:
            inside.add(b)
    return tuple(sorted(inside))


def _resolve_value(value: Any, model: ModelInfo, where: str) -> Any:
    if isinstance(value, Bodies):
        return torch.tensor(_match("body", value.names, model.body_names, where), dtype=torch.long)
    if isinstance(value, Joints):
        return resolve_joints(value, model, where)
    if isinstance(value, FreeBody):
        try:
            return resolve_root("scene", value.name, model)
        except TaskConfigError as e:
            raise TaskConfigError(f"{where}: {e}") from None
    if isinstance(value, Sensor):
        if value.name not in model.sensor_names:
            close = difflib.get_close_matches(value.name, model.sensor_names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TaskConfigError(f"{where}: sensor {value.name!r} is not in the scene{hint}")
        i = model.sensor_names.index(value.name)
        if model.sensor_stage[i] > 2:  # mjSTAGE_ACC
            raise TaskConfigError(f"{where}: sensor {value.name!r} needs accelerations, which are not computed "
                                  "after the physics step (only position- and velocity-stage sensors can be read)")
        return SensorSlice(value.name, model.sensor_adr[i], model.sensor_dim[i])
    if isinstance(value, tuple):
        return tuple(_resolve_value(v, model, where) for v in value)
    return value


_SIMPLE_TYPES = {"int": (int,), "bool": (bool,), "str": (str,)}
_REFERENCES = {"Bodies": Bodies, "Joints": Joints, "Sensor": Sensor, "FreeBody": FreeBody}


def _number_error(ann: Annotation, value: Any, what: str) -> str | None:
    """Why ``value`` is not a number ``ann`` (a ``float``, maybe bounded) admits, or None."""
    if is_number(value) and ann.within(value):
        return None
    return f"{what} must be a finite number{ann.describe_limits()}, got {value!r}"


def _tuple_error(ann: Annotation, value: Any, what: str) -> str | None:
    """Why ``value`` is not a tuple of numbers as ``ann`` (``tuple[float, ...]``, ``tuple[Positive,
    Positive]``, ...) asks, or None; tuples of anything but floats are not checked here."""
    if not ann.items or any(i.name != "float" for i in ann.items):
        return None
    if not isinstance(value, (tuple, list)) or (not ann.variadic and len(value) != len(ann.items)):
        count = "numbers" if ann.variadic else f"{len(ann.items)} numbers"
        return f"{what} must be a tuple of {count}, got {value!r}"
    for i, v in enumerate(value):
        error = _number_error(ann.items[0 if ann.variadic else i], v, f"{what} item {i}")
        if error:
            return f"{error} (in {value!r})"
    return None


def check_params(func: Callable[..., Any], params: dict[str, Any], skip: int, where: str,
                 commands: dict[str, Any]) -> None:
    """Parameters must be exactly the function's keyword parameters after the first ``skip``, of
    their annotated types: a ``float`` a finite number, within its ``AtLeast`` and ``AtMost``
    bounds if it has them, and so each item of a tuple of them; a ``CommandName`` one of ``commands`` (name: class),
    of the class its annotation asks for, if any."""
    sig = inspect.signature(func)
    formal = list(sig.parameters.values())[skip:]
    names = {p.name for p in formal}
    unknown = sorted(set(params) - names)
    if unknown:
        raise TaskConfigError(f"{where}: unknown parameter(s) {unknown} for {func.__qualname__}"
                              f" (takes {sorted(names)})")
    missing = [p.name for p in formal if p.default is inspect.Parameter.empty and p.name not in params]
    if missing:
        raise TaskConfigError(f"{where}: missing parameter(s) {missing} for {func.__qualname__}")
    annotations = hints(func)
    for p in formal:
        if p.name not in params or p.annotation is inspect.Parameter.empty:
            continue
        ann = annotation(annotations.get(p.name, p.annotation))
        value = params[p.name]
        if ann.name is None or (value is None and ann.optional):
            continue
        if ann.name == "CommandName":
            if not (isinstance(value, str) and value in commands):
                raise TaskConfigError(f"{where}: parameter {p.name!r}: no command {value!r} (the task's commands: "
                                      f"{sorted(commands)})")
            cls = commands[value]
            if ann.command_class is not None and ann.command_class not in {c.__name__ for c in
                                                                           getattr(cls, "__mro__", ())}:
                raise TaskConfigError(f"{where}: parameter {p.name!r}: command {value!r} is a "
                                      f"{getattr(cls, '__name__', cls)}, the term reads a {ann.command_class}")
        elif ann.name in ("float", "tuple"):
            error = (_number_error if ann.name == "float" else _tuple_error)(ann, value, f"parameter {p.name!r}")
            if error:
                raise TaskConfigError(f"{where}: {error}")
        elif ann.name in _REFERENCES or ann.name in _SIMPLE_TYPES:
            want = _REFERENCES.get(ann.name) or _SIMPLE_TYPES[ann.name]
            if (not isinstance(value, want) or (ann.name != "bool" and isinstance(value, bool))
                    or not ann.within(value)):  # an int's bounds, as a float's
                raise TaskConfigError(f"{where}: parameter {p.name!r} must be {ann.name}{ann.describe_limits()}, "
                                      f"got {type(value).__name__} {value!r}")


def _resolve_terms(kind: str, terms: tuple[Any, ...], model: ModelInfo, skip: int,
                   commands: dict[str, Any]) -> tuple[ResolvedTerm, ...]:
    seen: set[str] = set()
    out = []
    for term in terms:
        where = f"{kind} term {term.name!r}"
        if not isinstance(term.name, str) or not term.name:
            raise TaskConfigError(f"{kind} term with an empty name: {term!r}")
        if term.name in seen:
            raise TaskConfigError(f"{where}: duplicate name")
        seen.add(term.name)
        func = term_function(term)
        if not callable(func):
            raise TaskConfigError(f"{where}: {func!r} is not callable")
        check_params(func, term.params, skip, where, commands)
        params = {k: _resolve_value(v, model, where) for k, v in term.params.items()}
        out.append(ResolvedTerm(term.name, func, params, term))
    return tuple(out)


def resolve(task: TaskConfig, model: ModelInfo) -> ResolvedProgram:
    """Validate ``task`` against ``model`` and emit the program the runtime runs, its tensors on
    the CPU whatever torch's default device is (``on_device`` moves them)."""
    with torch.device("cpu"):
        return _resolve(task, model)


def check_groups(task: TaskConfig) -> None:
    """The task's observation groups as the env needs them before it builds anything: a
    ``policy`` group, none empty, ``vector_kernels`` naming groups the task has."""
    v = task.vector_kernels
    if not (isinstance(v, bool) or (isinstance(v, tuple) and all(isinstance(g, str) for g in v))):
        raise TaskConfigError(f"task {task.name!r}: vector_kernels must be a bool or a tuple of observation "
                              f"groups, got {v!r}")
    if not isinstance(v, bool) and set(v) - set(task.observations):
        raise TaskConfigError(f"task {task.name!r}: vector_kernels names observation group(s) "
                              f"{sorted(set(v) - set(task.observations))} the task does not have "
                              f"(it has {sorted(task.observations)})")
    if "policy" not in task.observations:
        raise TaskConfigError(f"task {task.name!r}: observation group 'policy' is required (the policy reads it; "
                              f"the task has {sorted(task.observations)})")
    empty = [group for group, terms in task.observations.items() if not terms]
    if empty:
        raise TaskConfigError(f"observation group {empty[0]!r} has no terms")


def _resolve(task: TaskConfig, model: ModelInfo) -> ResolvedProgram:
    check_groups(task)
    for terms in task.observations.values():
        for t in terms:
            if not is_number(t.scale):
                raise TaskConfigError(f"observation term {t.name!r}: scale must be a finite number, got {t.scale!r}")
            if t.noise is not None and not (len(t.noise) == 2 and all(map(is_number, t.noise))
                                            and t.noise[0] <= t.noise[1]):
                raise TaskConfigError(f"observation term {t.name!r}: noise must be (lo, hi), finite numbers with "
                                      f"lo <= hi, got {t.noise!r}")
            if t.clip is not None and not (len(t.clip) == 2 and t.clip[0] < t.clip[1]):
                raise TaskConfigError(f"observation term {t.name!r}: clip must be (lo, hi) with lo < hi, "
                                      f"got {t.clip!r}")
            if not (is_int(t.history) and t.history >= 1):
                raise TaskConfigError(f"observation term {t.name!r}: history must be an int >= 1 (observations "
                                      f"kept, the current one included), got {t.history!r}")
            if not (isinstance(t.delay, tuple) and len(t.delay) == 2 and all(
                    is_int(v) for v in t.delay) and 0 <= t.delay[0] <= t.delay[1]):
                raise TaskConfigError(f"observation term {t.name!r}: delay must be a tuple (lo, hi) of ints with "
                                      f"0 <= lo <= hi (env steps), got {t.delay!r}")
            if not (is_int(t.delay_every) and t.delay_every >= 0):
                raise TaskConfigError(f"observation term {t.name!r}: delay_every must be an int >= 0 (env steps "
                                      f"between draws of the lag; 0: one per episode), got {t.delay_every!r}")
            if t.delay_every and t.delay[0] == t.delay[1]:
                raise TaskConfigError(f"observation term {t.name!r}: delay_every={t.delay_every} draws the lag again "
                                      f"from a range, but delay {t.delay} is one value")

    for t in task.rewards:
        if not is_number(t.weight):
            raise TaskConfigError(f"reward term {t.name!r}: weight must be a finite number, got {t.weight!r}")
    bad_reads = [r for r in task.extra_reads if r not in EXTRA_READS]
    if bad_reads:
        raise TaskConfigError(f"task {task.name!r}: cannot read {bad_reads}; extra reads are {EXTRA_READS}")
    for e in task.events:
        lo, hi = e.interval_s
        if not 0 < lo <= hi:
            raise TaskConfigError(f"event term {e.name!r}: interval_s must be (lo, hi) with 0 < lo <= hi, "
                                  f"got {e.interval_s!r}")

    act = task.actions
    joints = resolve_joints(act.joints, model, "action 'joint_pos'")
    actuator_of = {j: a for a, j in enumerate(model.actuator_joints)}
    missing = [model.joint_names[j] for j in joints.ids.tolist() if j not in actuator_of]
    if missing:
        raise TaskConfigError(f"action 'joint_pos': joints without an actuator: {missing}")
    if isinstance(act.scale, dict):
        scales = []
        for name in joints.names:
            hit = lookup(act.scale, name)
            if hit is None:
                raise TaskConfigError(f"action 'joint_pos': no scale matches joint {name!r}")
            scales.append(float(hit))
    else:
        scales = [float(act.scale)] * len(joints.names)
    bad_scales = [n for n, v in zip(joints.names, scales) if not math.isfinite(v)]
    if bad_scales:
        raise TaskConfigError(f"action 'joint_pos': the scale of {bad_scales} is not finite")
    if not (is_number(act.clip) and act.clip > 0):
        raise TaskConfigError(f"action 'joint_pos': clip must be a finite number > 0 (the action space is "
                              f"[-clip, clip]), got {act.clip!r}")
    if not is_int(act.max_delay) or act.max_delay < 0:
        raise TaskConfigError(f"action 'joint_pos': max_delay must be an int >= 0 (control steps), got "
                              f"{act.max_delay!r}")
    action = ResolvedAction(
        joints=joints,
        actuator_ids=torch.tensor([actuator_of[j] for j in joints.ids.tolist()], dtype=torch.long),
        scale=torch.tensor(scales, dtype=torch.float32),
        clip=float(act.clip),
        max_delay=act.max_delay,
    )

    robot = task.scene.robot
    root = resolve_root(robot.name, robot.root_body, model)
    hinge = resolve_joints(Joints(".*"), model, f"robot {robot.name!r}")
    default_qpos = default_pose(robot, model)

    command_classes = {c.name: c.cls for c in task.commands}
    terms = {
        "commands": _resolve_terms("command", task.commands, model, 1, command_classes),
        "rewards": _resolve_terms("reward", task.rewards, model, 1, command_classes),
        "terminations": _resolve_terms("termination", task.terminations, model, 1, command_classes),
        "resets": _resolve_terms("reset", task.resets, model, 2, command_classes),
        "events": _resolve_terms("event", task.events, model, 2, command_classes),
    }
    observations = {g: _resolve_terms(f"observation[{g}]", ts, model, 1, command_classes)
                    for g, ts in task.observations.items()}
    from motrix_gym.mdp.terminations import physics_diverged  # mdp's terms import the resolver's types

    if not any(t.func is physics_diverged and not t.cfg.time_out for t in terms["terminations"]):
        raise TaskConfigError(f"task {task.name!r}: no termination term calls mdp.terminations.physics_diverged "
                              "(time_out=False): a lane whose physics diverged must end, or it would run on from "
                              "where MuJoCo put it")
    reads = BASE_READS + tuple(r for r in task.extra_reads if r not in BASE_READS)
    every = [t for ts in (*terms.values(), *observations.values()) for t in ts]
    sensors = {s.name for t in every for s in _sensor_slices(tuple(t.params.values()))}
    velocity = any(r in VELOCITY_READS for r in reads) or any(
        model.sensor_stage[model.sensor_names.index(name)] == 2 for name in sensors)  # mjSTAGE_VEL
    balls = tuple(ResolvedBall(b, model.body_names.index(b.name), model.geom_names.index(b.name),
                               resolve_root("scene", b.name, model)) for b in task.scene.balls)
    randomization = None
    if task.randomization is not None:
        r = task.randomization
        robot_bodies = subtree(root.body, model)
        for body in r.friction_bodies:
            if body not in model.body_names:
                raise TaskConfigError(f"randomization: friction body {body!r} is not in the model")
        ids = tuple(g for g, b in enumerate(model.geom_bodies) if model.body_names[b] in r.friction_bodies)
        if r.friction_bodies and not ids:
            raise TaskConfigError(f"randomization: the friction bodies {r.friction_bodies} have no geoms")
        ball = None
        if r.ball is not None:
            if len(balls) != 1:
                raise TaskConfigError(f"randomization: ball ranges given, but the scene has {len(balls)} balls")
            ball = balls[0]
        randomization = ResolvedRandomization(r, ids, robot_bodies, root.body, ball)
    return ResolvedProgram(task=task, model=model, action=action, **terms, observations=observations,
                           randomization=randomization, balls=balls,
                           default_qpos=default_qpos, root=root, robot_bodies=subtree(root.body, model),
                           hinge=hinge, reads=reads, read_stage=2 if velocity else 1,
                           sensors=tuple(name for name in model.sensor_names if name in sensors))


def _sensor_slices(values: tuple[Any, ...]) -> list[SensorSlice]:
    """The sensors among resolved parameter values (nested in tuples)."""
    out: list[SensorSlice] = []
    for v in values:
        if isinstance(v, SensorSlice):
            out.append(v)
        elif isinstance(v, tuple):
            out += _sensor_slices(v)
    return out

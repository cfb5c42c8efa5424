"""Term configurations: what a task computes, as data.

A task is a table of terms. Each term names a pure function over batched tensors and its
parameters; the resolver (``resolver.py``) checks names, parameters and model references before
anything runs, and the runtime executes the resolved table.

Functions take the runtime's context (``env``) first and keyword parameters after it:

    def base_height(env, body: Bodies, target: float) -> Tensor: ...
    RewardTerm("height", base_height, weight=-1.0, params={"body": Bodies("pelvis"), "target": 0.78})

Parameters of type :class:`Bodies`, :class:`Joints` or :class:`Sensor` are references into the
model: the resolver replaces them with index tensors and names the term when one does not match.
A parameter annotated :data:`CommandName` names one of the task's command terms (read as
``env.commands[name]``); the resolver checks that the task has it and, for
``Annotated[CommandName, "Class"]`` (``mdp/command_names.py``), that it is of that class. A
``float`` parameter must be a finite number; :data:`Positive`, :data:`NonNegative`,
:data:`Fraction` and :data:`Probability` (or ``Annotated[float, AtLeast(lo), AtMost(hi)]``) also
bound it, as :data:`Count` (``Annotated[int, AtLeast(1)]``) and :data:`NonNegativeInt` bound an
``int``.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, NewType, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
MirrorSpec = tuple[float, ...] | str | Callable[..., Any]
# a str at run time, so a config writes the name itself; the annotation is what the resolver checks
CommandName = NewType("CommandName", str)


@dataclass(frozen=True)
class AtLeast:
    """``Annotated[float, AtLeast(lo)]``: the parameter's least value (``strict``: above it)."""

    lo: float
    strict: bool = False

    def admits(self, value: float) -> bool:
        return value > self.lo if self.strict else value >= self.lo

    def __str__(self) -> str:
        return f"{'>' if self.strict else '>='} {self.lo:g}"


@dataclass(frozen=True)
class AtMost:
    """``Annotated[float, AtMost(hi)]``: the parameter's greatest value (``strict``: below it)."""

    hi: float
    strict: bool = False

    def admits(self, value: float) -> bool:
        return value < self.hi if self.strict else value <= self.hi

    def __str__(self) -> str:
        return f"{'<' if self.strict else '<='} {self.hi:g}"


Positive = Annotated[float, AtLeast(0.0, strict=True)]  # a std, a threshold on an error, a spacing
NonNegative = Annotated[float, AtLeast(0.0)]  # a noise amplitude, a range about zero
Fraction = Annotated[float, AtLeast(0.0, strict=True), AtMost(1.0)]  # a share of a range, (0, 1]
Probability = Annotated[float, AtLeast(0.0), AtMost(1.0)]  # a probability, a share, a decay factor: [0, 1]
Count = Annotated[int, AtLeast(1)]  # a number of things, at least one
NonNegativeInt = Annotated[int, AtLeast(0)]  # a level, a number of things that may be none


@dataclass(frozen=True)
class Bodies:
    """Bodies by name or regular expression (full match), in model order."""

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", tuple(names))


@dataclass(frozen=True)
class Joints:
    """Hinge/slide joints by name or regular expression (full match), in model order."""

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", tuple(names))


@dataclass(frozen=True)
class FreeBody:
    """A body with a free joint (a ball), by name: resolved to its body id and the addresses of its
    coordinates and velocities (``resolver.RootIndex``)."""

    name: str


@dataclass(frozen=True)
class Sensor:
    """One MuJoCo sensor of the scene, by name."""

    name: str


@dataclass(frozen=True)
class ObservationTerm:
    """One slice of an observation group: ``clip(func(env, **params) * scale + noise)``.

    ``noise`` is a uniform range ``(lo, hi)`` added per element from the lane's RNG, or None.
    ``history``: the slice holds the term's last ``history`` observations (each scaled, noised
    and clipped as it was observed), oldest first; after a reset every one of them is the
    first observation of the episode.
    ``delay=(lo, hi)``: the slice shows what the term observed ``lag`` env steps before, ``lag``
    an int drawn uniformly from ``lo..hi`` per lane at each episode's start (the latency of a
    robot's sensing; the observations before an episode's first are that first one). A history
    is then the ``history`` observations that end ``lag`` steps before.
    ``delay_every=k``: the lag is drawn again every ``k`` env steps of an episode (a latency that
    varies), each new lag at most one more than the lane's last, so that a lane never sees an
    older observation than it saw the step before (a sensor's messages arrive in order); 0 keeps
    each episode's first lag.
    ``mirror``: how the term's values reflect with the robot through its sagittal plane
    (``manager/symmetry.py``): a sign per value, ``"joints"`` (its ``joints`` parameter's),
    ``"actions"`` (the action's joints), or a function of its parameters that returns the
    permutation of its values; None: as its function says (``reflects``), else not said (the
    task then has no mirror).
    """

    name: str
    func: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    scale: float = 1.0
    noise: tuple[float, float] | None = None
    clip: tuple[float, float] | None = None
    history: int = 1
    delay: tuple[int, int] = (0, 0)
    delay_every: int = 0
    mirror: MirrorSpec | None = None

    def reflection(self) -> MirrorSpec | None:
        """How the term's values reflect: its own ``mirror``, else its function's (``reflects``)."""
        return self.mirror if self.mirror is not None else getattr(self.func, "mirror", None)


def reflects(mirror: MirrorSpec) -> Callable[[F], F]:
    """Marks an observation function with how its values reflect (as ``ObservationTerm.mirror``
    says it), for every term of it that does not say otherwise: what a value means is the
    function's to know, what a task's commands or clocks mean is the task's."""

    def mark(func: F) -> F:
        func.mirror = mirror  # type: ignore[attr-defined]
        return func

    return mark


def draws(markers: Callable[..., Any]) -> Callable[[F], F]:
    """Marks an observation function with what rendered frames show of it: ``markers(env,
    **params)``, called with the parameters the function is called with (its defaults included),
    returns ``mdp/markers.py``'s arrows or spheres (a height scan: the points it reads), as a
    command's ``markers`` method does."""

    def mark(func: F) -> F:
        func.markers = markers  # type: ignore[attr-defined]
        return func

    return mark


@dataclass(frozen=True)
class RewardTerm:
    """``weight * func(env, **params) * step_dt`` added to the reward each env step."""

    name: str
    func: Callable[..., Any]
    weight: float
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TerminationTerm:
    """Ends the episode where ``func(env, **params)`` is True; ``time_out`` terms truncate."""

    name: str
    func: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    time_out: bool = False


@dataclass(frozen=True)
class ResetTerm:
    """Writes the state of lanes being reset: ``func(env, mask, **params)``."""

    name: str
    func: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EventTerm:
    """Fires ``func(env, mask, **params)`` for each lane every ``interval_s`` seconds (drawn
    uniformly per lane from the range after each firing and at reset), e.g. pushes. It writes the
    state of the lanes in ``mask``; the runtime then writes those lanes into the simulation."""

    name: str
    func: Callable[..., Any]
    interval_s: tuple[float, float]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommandTerm:
    """A stateful per-lane process (a velocity target, a gait clock, a motion reference).

    ``cls(env, **params)`` builds it; the runtime calls its ``reset(env, mask)`` for lanes being
    reset (before the reset terms), ``placed(env, mask)`` if it has one (after them: the lanes'
    new state), ``update(env)`` before rewards each step and ``advance(env)`` after terminations.
    Terms read it as ``env.commands[name]``.
    """

    name: str
    cls: type
    params: dict[str, Any] = field(default_factory=dict)


TERM_TYPES = (ObservationTerm, RewardTerm, TerminationTerm, ResetTerm, EventTerm, CommandTerm)


def term_function(term: Any) -> Callable[..., Any]:
    """What ``term`` calls: its function, or a command's class."""
    return term.cls if isinstance(term, CommandTerm) else term.func


def term_params(term: Any) -> dict[str, Any]:
    """The parameters ``term``'s function is called with, in its signature's order: the task's
    own, and the keyword parameters the task leaves at their defaults."""
    try:
        formal = inspect.signature(term_function(term)).parameters.values()
    except (TypeError, ValueError):  # a callable whose signature cannot be read: the task's own only
        formal = ()
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    merged = {p.name: term.params.get(p.name, p.default) for p in formal if p.name in term.params
              or (p.default is not inspect.Parameter.empty and p.kind in keyword)}
    return {**merged, **term.params}


_UNRESOLVED = (NameError, TypeError, SyntaxError, AttributeError)


def _annotated(func: Callable[..., Any]) -> Callable[..., Any]:
    """What carries ``func``'s parameter annotations: a class's constructor, else ``func``."""
    return func.__init__ if isinstance(func, type) else func


def hints(func: Callable[..., Any]) -> dict[str, Any]:
    """``func``'s (a class: its constructor's) parameter annotations as objects (``Annotated``
    kept), each that its module can resolve: one that names what is imported only for type
    checkers (``env: Context`` under ``if TYPE_CHECKING``) leaves the others' checks in place; the
    caller reads its text."""
    target = _annotated(func)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except _UNRESOLVED:
        pass
    found = {}
    for name, ann in inspect.get_annotations(target).items():
        one = types.SimpleNamespace(__annotations__={name: ann})
        try:
            found |= typing.get_type_hints(one, globalns=getattr(target, "__globals__", {}), include_extras=True)
        except _UNRESOLVED:
            continue
    return found


@dataclass(frozen=True)
class Annotation:
    """What a term parameter's annotation asks of its value."""

    name: str | None  # the type's name; None: not one type
    optional: bool  # ``X | None``
    command_class: str | None = None  # ``Annotated[CommandName, "Class"]``
    bound: AtLeast | None = None  # ``Annotated[float, AtLeast(lo)]`` (or ``int``)
    upper: AtMost | None = None  # ``Annotated[float, AtMost(hi)]`` (or ``int``)
    items: tuple[Annotation, ...] = ()  # ``tuple[X, Y]``: X and Y; ``tuple[X, ...]``: X, with ``variadic``
    variadic: bool = False

    @property
    def limits(self) -> tuple[AtLeast | AtMost, ...]:
        """The bounds a number (a ``float``, an ``int``) must keep; none: any."""
        return tuple(b for b in (self.bound, self.upper) if b is not None)

    def within(self, value: Any) -> bool:
        return all(b.admits(value) for b in self.limits)

    def describe_limits(self) -> str:
        """The bounds as an error message puts them after the type (`` >= 0 and <= 1``); empty if none."""
        return " " + " and ".join(map(str, self.limits)) if self.limits else ""


def annotation(ann: Any) -> Annotation:
    """A parameter's annotation, from its text or (``Annotated`` metadata included) its object."""
    if isinstance(ann, str):
        args: tuple[Any, ...] = tuple(a.strip() for a in ann.split("|"))
    elif typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = typing.get_args(ann)
    else:
        args = (ann,)
    names, meta, items = [], [], ()
    for a in args:
        if typing.get_origin(a) is typing.Annotated:
            a, *extra = typing.get_args(a)
            meta += extra
        if typing.get_origin(a) is tuple:
            items = typing.get_args(a)
        names.append(a if isinstance(a, str) else "None" if a is type(None) else
                     getattr(typing.get_origin(a) or a, "__name__", "?"))
    named = [n for n in names if n != "None"]
    variadic = items[-1:] == (Ellipsis,)
    return Annotation(named[0] if len(named) == 1 else None, len(named) < len(names),
                      next((m for m in meta if isinstance(m, str)), None),
                      next((m for m in meta if isinstance(m, AtLeast)), None),
                      next((m for m in meta if isinstance(m, AtMost)), None),
                      tuple(annotation(i) for i in (items[:1] if variadic else items)), variadic)


def accepts_none(func: Callable[..., Any], name: str) -> bool:
    """Whether parameter ``name`` of ``func`` (a class: of its constructor, so a dataclass's field)
    is annotated ``X | None``."""
    ann = hints(func).get(name, inspect.get_annotations(_annotated(func)).get(name))
    return ann is not None and annotation(ann).optional


@dataclass(frozen=True)
class JointPositionAction:
    """Position targets: ``target = default + scale * action`` for the matched joints' actuators.

    ``scale`` is one float or a mapping from joint regex to float (first match wins).
    ``max_delay``: each episode, a lane's targets lag its actions by 0 to ``max_delay`` control
    steps, drawn uniformly at reset (the delay of a real robot's actuation, randomised).
    """

    joints: Joints = field(default_factory=lambda: Joints(".*"))
    scale: float | dict[str, float] = 1.0
    clip: float = 5.0
    max_delay: int = 0

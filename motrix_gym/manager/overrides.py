"""A built TaskConfig changed by path, as Hydra or tyro change Isaac Lab's and mjlab's configs:
``rewards.track_lin_vel.weight``, ``observations.policy.joint_pos.noise``,
``events.push.interval_s``, ``commands.base_velocity.params.ranges``, ``episode_length_s``.

A path walks a dataclass by field, a tuple of named parts (terms, sensors, sub-terrains) by
name, a dict (observation groups, a term's params, per-joint action scales) by key, where a
term's or a sub-terrain's params include its function's keyword parameters that the task leaves
at their defaults (``scene.terrain.sub_terrains.rough.params.noise_step``), a key with dots in it
whole (``actions.scale..*_knee_joint``), and another tuple of parts or of tuples by index
(``commands.base_velocity.params.ranges.2``). A new value
must be of the kind it replaces: a bool for a bool, an int for an int, a number for a float, a str
for a str, a tuple of as many for a tuple (each element so; for an empty one, items of the class
its annotation names: ``events`` takes ``EventTerm``s), a ``Joints`` for a ``Joints`` (and
``Bodies``: model references are values, whole), anything where the config holds None;
None (``null`` on the command line) where the field or parameter is annotated ``X | None``
(an observation's noise or clip, the task's randomisation). None in place of a term, or of any
named part of a tuple (a sensor of a term's list), takes it out of its table (``events.push``,
``rewards.alive``), as Isaac Lab disables a term set to None. Terms,
functions and classes are not values otherwise: change their fields. The env's own checks (the
resolver's) then judge the values when it is made.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from typing import Any

from motrix_gym.arguments import is_int, is_number
from motrix_gym.manager.config import SubTerrain
from motrix_gym.manager.terms import TERM_TYPES, Bodies, Joints, accepts_none, hints, term_function, term_params


class OverrideError(ValueError):
    """An override whose path or value does not fit the config; names the path."""


# model references that are values, given by their names (regexes), as a whole
_VALUE_REFERENCES = (Bodies, Joints)


def _named(obj: Any) -> bool:
    """Whether ``obj`` is a tuple of named parts (terms, sensors), each a dataclass with a name."""
    return isinstance(obj, tuple) and bool(obj) and all(
        dataclasses.is_dataclass(t) and isinstance(getattr(t, "name", None), str) for t in obj)


class _Params(dict):
    """A term's ``params`` as a path sees them: the ones the task sets and, under those, the
    defaults of its function's other keyword parameters. Setting one adds it to ``explicit``, the
    task's own, and leaves the other defaults to the function."""

    def __init__(self, term: Any) -> None:
        super().__init__(term_params(term))
        self.explicit = dict(term.params)
        self.function = term_function(term)


def _owner(parent: Any) -> Any:
    """What annotates the children of ``parent`` (from ``_walk``): a term's function its params, a
    config part's class its fields; None for anything else."""
    if isinstance(parent, _Params):
        return parent.function
    return type(parent) if dataclasses.is_dataclass(parent) and not isinstance(parent, type) else None


def _accepts_none(parent: Any, key: str) -> bool:
    """Whether ``key`` of ``parent`` may be None: annotated ``X | None``."""
    owner = _owner(parent)
    return owner is not None and accepts_none(owner, key)


def _children(obj: Any) -> dict[str, Any] | None:
    """What a path may step into from ``obj``, by name (by index in a tuple of unnamed parts or
    of tuples); None for a value."""
    if isinstance(obj, _VALUE_REFERENCES):
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        children = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if isinstance(obj, (*TERM_TYPES, SubTerrain)):
            children["params"] = _Params(obj)
        return children
    if _named(obj):
        return {t.name: t for t in obj}
    if isinstance(obj, tuple) and any(isinstance(t, tuple) or dataclasses.is_dataclass(t) for t in obj):
        return {str(i): t for i, t in enumerate(obj)}
    if isinstance(obj, Mapping):
        return dict(obj)
    return None


def _value(obj: Any) -> bool:
    """Whether ``obj`` may be replaced whole: a model reference (``Joints(...)``), or not a config
    part (a dataclass, or a tuple of them), whose fields are what changes."""
    if isinstance(obj, _VALUE_REFERENCES):
        return True
    return not (dataclasses.is_dataclass(obj) or isinstance(obj, tuple) and obj and all(
        dataclasses.is_dataclass(t) for t in obj))


class _Removed:
    """The value that ``_rebuilt`` leaves out of a tuple of named parts: a term set to None."""


def _rebuilt(obj: Any, key: str, value: Any) -> Any:
    """``obj`` (from ``_children``) with its child ``key`` replaced, or left out for ``_Removed``."""
    if isinstance(value, _Removed):
        return tuple(t for t in obj if t.name != key)
    if _named(obj):
        return tuple(value if t.name == key else t for t in obj)
    if isinstance(obj, tuple):
        return tuple(value if str(i) == key else t for i, t in enumerate(obj))
    if isinstance(obj, _Params):
        return {**obj.explicit, key: value}
    if isinstance(obj, Mapping):
        return {**obj, key: value}
    return dataclasses.replace(obj, **{key: value})


def _kind(old: Any) -> str:
    if isinstance(old, bool):
        return "true or false"
    return {int: "an int", float: "a finite number", str: "text"}.get(type(old), f"a {type(old).__name__}")


def _item_type(parent: Any, key: str) -> type | None:
    """The class of each item of ``key`` of ``parent`` where its annotation is ``tuple[X, ...]``
    (a config part's field, a term function's parameter); else None."""
    owner = _owner(parent)
    ann = hints(owner).get(key) if owner is not None else None
    args = typing.get_args(ann) if typing.get_origin(ann) is tuple else ()
    return args[0] if len(args) == 2 and args[1] is Ellipsis and isinstance(args[0], type) else None


def _fit(path: str, old: Any, new: Any, item: type | None = None) -> Any:
    """``new`` as the value at ``path`` in place of ``old``, or an OverrideError; ``item``: the
    class of each item where ``old`` is an empty tuple (its annotation's, if it says)."""
    if old is None:
        return new
    if isinstance(old, bool):
        ok = isinstance(new, bool)
    elif isinstance(old, int):
        ok = is_int(new)
    elif isinstance(old, float):
        ok = is_number(new)
        new = float(new) if ok else new  # an int for a float: the same number
    elif isinstance(old, str):
        ok = isinstance(new, str)
    elif isinstance(old, tuple):
        # a list for a tuple: the same values in JSON's one sequence (a dataset's or a config file's)
        new = tuple(new) if isinstance(new, list) else new
        if not (isinstance(new, tuple) and (not old or len(new) == len(old))):
            raise OverrideError(f"override {path!r}: expected a tuple of {len(old)}, like {old!r}, got {new!r}")
        if not old and item is not None and not all(isinstance(n, item) for n in new):
            raise OverrideError(f"override {path!r}: expected a tuple of {item.__name__}, got {new!r}")
        return new if not old else tuple(_fit(f"{path}.{i}", o, n) for i, (o, n) in enumerate(zip(old, new)))
    elif isinstance(old, Mapping):
        ok = isinstance(new, Mapping)
    elif isinstance(old, _VALUE_REFERENCES):
        ok = type(new) is type(old)
    else:
        raise OverrideError(f"override {path!r}: it holds a {type(old).__name__}, not a value; change its fields")
    if not ok:
        raise OverrideError(f"override {path!r}: expected {_kind(old)}, like {old!r}, got {new!r}")
    return new


def _walk(obj: Any, parts: list[str], done: str) -> Any:
    """The value at ``parts`` under ``obj`` (reached by ``done``)."""
    if not parts:
        return obj
    children = {} if obj == () else _children(obj)  # an empty table of terms has none to step into
    where = done or "the task"
    if children is None:
        raise OverrideError(f"override {done!r}: it is a value; {'.'.join(parts)!r} cannot be found in it")
    if parts[0] not in children:
        raise OverrideError(f"override {'.'.join([*filter(None, [done]), *parts])!r}: {where} has no "
                            f"{parts[0]!r} (it has {sorted(children)})")
    return _walk(children[parts[0]], parts[1:], f"{done}.{parts[0]}" if done else parts[0])


def _parts(cfg: Any, path: str) -> list[str]:
    """``path`` split at its dots, but for a dict's key that has dots in it (a joint regex such as
    ``.*_knee_joint``), which stays one part: the longest key that the rest of the path begins with."""
    if not isinstance(path, str):
        raise OverrideError(f"override paths are dotted names like 'rewards.alive.weight', got {path!r}")
    pieces, parts, obj = path.split("."), [], cfg
    while pieces:
        children = _children(obj) or {}
        n = next((n for n in range(len(pieces), 1, -1) if isinstance(obj, Mapping)
                  and ".".join(pieces[:n]) in children), 1)
        if (n == 1 and isinstance(obj, Mapping) and pieces[0] not in children
                and all(_children(v) is None for v in children.values())):
            n = len(pieces)  # a dict of values (joint regex -> number): the rest is the key it lacks
        parts.append(".".join(pieces[:n]))
        obj, pieces = children.get(parts[-1]), pieces[n:]
    if not (parts and all(parts)):
        raise OverrideError(f"override paths are dotted names like 'rewards.alive.weight', got {path!r}")
    return parts


def current(cfg: Any, path: str) -> Any:
    """The value at ``path`` in ``cfg``; an OverrideError if there is none."""
    return _walk(cfg, _parts(cfg, path), "")


def found_in(cfg: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Those of ``overrides`` whose path ``cfg`` has (a task's play mode has no pushes or
    randomisation to change)."""
    found = {}
    for path, value in overrides.items():
        try:
            current(cfg, path)
        except OverrideError:
            continue
        found[path] = value
    return found


def apply(cfg: Any, overrides: Mapping[str, Any]) -> Any:
    """``cfg`` with each ``path: value`` of ``overrides`` in place; ``cfg`` itself is unchanged."""
    if not isinstance(overrides, Mapping):
        raise OverrideError(f"overrides must be a mapping of path to value, got {overrides!r}")
    for path, value in overrides.items():
        parts = _parts(cfg, path)
        old = _walk(cfg, parts, "")  # first: an error names the whole path
        parent = _walk(cfg, parts[:-1], "")
        if value is None and old is not None:
            if not (_named(parent) or _accepts_none(parent, parts[-1])):
                what = (repr(old) if _value(old) else f"the terms {[t.name for t in old]}" if _named(old)
                        else f"a {type(old).__name__}")
                raise OverrideError(f"override {path!r}: it cannot be None (null); it holds {what}")
            new = _Removed() if _named(parent) else None
        elif not _value(old):
            raise OverrideError(f"override {path!r}: it holds a {type(old).__name__}, not a value; change its fields")
        else:
            new = _fit(path, old, value, _item_type(parent, parts[-1]) if old == () else None)
        try:
            cfg = _set(cfg, parts, new)
        except ValueError as e:  # a config part that refuses the value (its own checks)
            raise OverrideError(f"override {path!r}: {e}") from None
    return cfg


def _set(obj: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    return _rebuilt(obj, parts[0], _set(_children(obj)[parts[0]], parts[1:], value))


def _scalar(path: str, old: Any, raw: str) -> Any:
    try:
        if isinstance(old, bool):
            if raw not in ("true", "false"):
                raise ValueError
            return raw == "true"
        if isinstance(old, int):
            return int(raw)
        if isinstance(old, float):
            x = float(raw)
            if not math.isfinite(x):
                raise ValueError
            return x
    except ValueError:
        raise OverrideError(f"override {path!r}: expected {_kind(old)}, got {raw!r}") from None
    if isinstance(old, str):
        return raw
    if isinstance(old, tuple) and _children(old):
        raise OverrideError(f"override {path!r}: it holds {len(old)} parts; give one at a time, by index "
                            f"({path}.0=...)")
    raise OverrideError(f"override {path!r}: a {type(old).__name__} ({old!r}) cannot be given as text; "
                        "change it in Python")


def read(cfg: Any, path: str, raw: str) -> Any:
    """The text ``raw`` read as a value for ``path`` in ``cfg``, by the kind of the value there:
    ``true``/``false``, an int, a number, text, comma-separated elements for a flat tuple; where
    the config holds None, as ``true``/``false``, a number, numbers or else text; ``null`` is None
    (which ``apply`` takes where the path may be None)."""
    old = current(cfg, path)
    if raw == "null":
        return None
    if isinstance(old, _VALUE_REFERENCES):  # names or regexes, comma-separated
        return type(old)(*raw.split(","))
    if isinstance(old, tuple) and old and all(not isinstance(o, (tuple, Mapping)) for o in old):
        items = raw.split(",")
        if len(items) != len(old):
            raise OverrideError(f"override {path!r}: expected {len(old)} comma-separated values, like "
                                f"{','.join(str(o) for o in old)}, got {raw!r}")
        return tuple(_scalar(f"{path}.{i}", o, item) for i, (o, item) in enumerate(zip(old, items)))
    if old is None:
        if raw in ("true", "false"):
            return raw == "true"
        try:
            numbers = tuple(float(p) for p in raw.split(","))
        except ValueError:
            return raw
        if not all(math.isfinite(x) for x in numbers):
            raise OverrideError(f"override {path!r}: expected finite numbers, got {raw!r}")
        return numbers[0] if len(numbers) == 1 else numbers
    return _scalar(path, old, raw)

"""A made env's task as the tables of terms it runs, as Isaac Lab and mjlab print theirs: each
observation group's terms and the columns they fill, the rewards, terminations, commands, events,
resets, the action's joints and the randomisation. Read from the resolved program, so that it
says what runs (joint patterns expanded, widths probed), not what the config asked for."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from motrix_gym.envs import TASKS, task_options
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.manager.terms import term_function, term_params
from motrix_gym.sim.terrain import columns


def _value(v: Any) -> str:
    """A term parameter, short: floats in ``g`` format, name patterns and sensors by name."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, str):
        return v or "''"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    if hasattr(v, "names"):  # Joints / Bodies: their name patterns
        return "|".join(v.names)
    if dataclasses.is_dataclass(v):
        if [f.name for f in dataclasses.fields(v)] == ["name"]:  # Sensor
            return v.name
        return f"{type(v).__name__}(" + ", ".join(f"{f.name}={_value(getattr(v, f.name))}"
                                                  for f in dataclasses.fields(v)) + ")"
    return repr(v)


def _call(term: Any) -> str:
    """``term``'s function with every parameter it is called with, defaults included."""
    func = term_function(term)
    name = f"{func.__module__.removeprefix('motrix_gym.')}.{func.__qualname__}"
    return f"{name}({', '.join(f'{k}={_value(v)}' for k, v in term_params(term).items())})"


def _delay(term: Any) -> str:
    """An observation term's delay: "-", its range, and how often it is drawn within an episode."""
    if term.delay == (0, 0):
        return "-"
    return _range(term.delay) + (f" every {term.delay_every}" if term.delay_every else "")


def _reflection(term: Any) -> str:
    """How an observation term reflects, as a table cell."""
    spec = term.reflection()
    if spec is None:
        return "-"
    if isinstance(spec, tuple | str):
        return _value(spec)  # signs per value, or "joints" / "actions"
    return f"{spec.__qualname__}()"  # a permutation of the values


def _symmetry(rt: Any, mirror: Any) -> str:
    """Whether the task mirrors (what PPO's symmetry settings need), and the robot's map."""
    try:
        rt.mirror()
    except TaskConfigError as e:
        return f"mirror symmetry: none ({e})"
    return (f"mirror symmetry: joints {', '.join(f'{a}* <-> {b}*' for a, b in mirror.swap)}; those matching "
            f"{', '.join(mirror.flip)} change sign (each observation term: its 'mirror' column)")


def _range(r: Sequence[float] | None) -> str:
    return "-" if r is None else f"[{_value(r[0])}, {_value(r[1])}]"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "  ") -> list[str]:
    rows = [header, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]  # the last column runs on
    return [indent + "  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]


def describe(env: Any) -> str:
    """The tables of ``env``'s task (a ``MotrixVectorEnv``, or a wrapper of one)."""
    env = getattr(env, "unwrapped", env)
    rt, task = env.runtime, env.task
    program = rt.program
    robot = task.scene.robot.name
    if task.name in TASKS and TASKS[task.name].robot:
        robot = f"{TASKS[task.name].robot} (model {robot})"
    lines = [f"{task.name}: robot {robot}, {env.num_envs} lane(s); control at "
             f"{1.0 / task.step_dt:g} Hz ({task.decimation} physics steps of {task.sim_dt * 1e3:g} ms); episodes "
             f"of at most {task.max_episode_steps} steps ({task.episode_length_s:g} s)"]
    if task.name in TASKS:
        options = task_options(task.name)
        lines.append("make-time options: " + ("any keyword" if options is None else ", ".join(options) or "none")
                     + "; overrides of any value below")
    terrain = task.scene.terrain
    if terrain.flat:
        lines.append("ground: a plane")
    else:
        count = Counter(sub.name for sub in columns(terrain))
        lines.append(f"ground: a heightfield of {terrain.rows} x {terrain.cols} tiles of {terrain.tile_size:g} m "
                     f"at {terrain.resolution:g} m (rows by difficulty, {terrain.difficulty[0]:g} to "
                     f"{terrain.difficulty[1]:g}, columns by sub-terrain; seed {terrain.seed})")
        lines += _table(("sub-terrain", "columns", "platform", "function"), [
            (sub.name, str(count[sub.name]), f"{sub.platform:g}", _call(sub)) for sub in terrain.sub_terrains])
    lines += [f"ball: {_value(ball)}" for ball in task.scene.balls]
    for group, terms in program.observations.items():
        cols = rt.observation_columns(group)
        lines += ["", f"observations {group!r}: {sum(rt.obs_dims[group])} columns"]
        lines += _table(("columns", "term", "scale", "noise", "clip", "history", "delay", "mirror", "function"), [
            (f"{cols[t.name].start}:{cols[t.name].stop}", t.name, _value(t.cfg.scale), _range(t.cfg.noise),
             _range(t.cfg.clip), str(t.cfg.history), _delay(t.cfg), _reflection(t.cfg),
             _call(t.cfg)) for t in terms])
    lines += ["", "rewards (each step adds weight * value * step_dt)"]
    lines += _table(("term", "weight", "function"),
                    [(t.name, _value(t.cfg.weight), _call(t.cfg)) for t in program.rewards])
    lines += ["", "terminations"]
    lines += _table(("term", "ends as", "function"),
                    [(t.name, "truncation" if t.cfg.time_out else "termination", _call(t.cfg))
                     for t in program.terminations])
    events = [(t.name, _range(t.interval_s) + " s", _call(t)) for t in task.events]
    for title, header, rows in (
            ("commands", ("name", "class"), [(t.name, _call(t)) for t in task.commands]),
            ("events (each lane at random intervals)", ("name", "every", "function"), events),
            ("resets", ("name", "function"), [(t.name, _call(t)) for t in task.resets])):
        if rows:
            lines += ["", title, *_table(header, rows)]
    action = program.action
    default = program.default_qpos[action.joints.qpos].tolist()
    late = f"; each episode a lane acts 0 to {action.max_delay} steps late" if action.max_delay else ""
    lines += ["", f"actions: {len(action.joints.names)} joint position targets, default + scale * action "
                  f"(actions clipped to +-{action.clip:g}{late})"]
    lines += _table(("index", "joint", "default", "scale"), [
        (str(i), name, f"{d:+.3f}", f"{s:.3f}")
        for i, (name, d, s) in enumerate(zip(action.joints.names, default, action.scale.tolist()))])
    lines += ["", _symmetry(rt, task.scene.robot.mirror)]
    r = program.randomization
    if r is None:
        lines += ["", "randomisation: none"]
    else:
        fields = {f.name: getattr(r.cfg, f.name) for f in dataclasses.fields(r.cfg)}
        lines += ["", "randomisation (per lane, drawn at each reset)"]
        lines += _table(("parameter", "range"), [(k, _value(v)) for k, v in fields.items()
                                                  if v is not None and not (isinstance(v, tuple) and not v)])
    lines += ["", f"divergence: a lane whose physics warned, or gave a non-finite value or a speed over "
                  f"{task.max_speed:g} (m/s, rad/s), has diverged"]
    return "\n".join(lines)

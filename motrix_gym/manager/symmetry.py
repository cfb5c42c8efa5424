"""Mirror symmetry of a task: its observations and actions reflected with the robot through the
robot's sagittal (x-z) plane, for PPO's symmetry augmentation and mirror loss (rsl_rl's
``symmetry_cfg``; Mittal et al., "Symmetry Considerations for Learning Task Symmetric Robot
Policies", ICRA 2024).

The robot says which joints are counterparts and which change sign (``RobotConfig.mirror``);
each observation term says how its values reflect (``ObservationTerm.mirror``), or its function
does (``@reflects``). Both resolve to one ``Reflection`` per observation group and one for the
action: a permutation and a sign per column, so that reflecting a batch is one gather and one
product. A term with a history reflects each of its observations alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from motrix_gym.manager.config import Mirror
from motrix_gym.manager.resolver import JointIndex, ResolvedProgram, ResolvedTerm, TaskConfigError


@dataclass(frozen=True)
class Reflection:
    """``x`` reflected: ``x[..., index] * sign``; applying it twice gives ``x`` back."""

    index: Tensor  # (d,) long
    sign: Tensor  # (d,) float32

    def __call__(self, x: Tensor) -> Tensor:
        return x[..., self.index] * self.sign


@dataclass(frozen=True)
class TaskMirror:
    """A task's reflections: of each observation group's vector and of the action."""

    observations: dict[str, Reflection]
    action: Reflection


def _reflection(index: Sequence[int], sign: Sequence[float], device: torch.device) -> Reflection:
    return Reflection(torch.tensor(index, dtype=torch.long, device=device),
                      torch.tensor(sign, dtype=torch.float32, device=device))


def joint_reflection(names: Sequence[str], mirror: Mirror, where: str) -> tuple[list[int], list[float]]:
    """The reflection of a vector over the joints ``names`` as ``(index, sign)``: its value ``i``
    is ``sign[i] * x[index[i]]``, ``index[i]`` the position of joint ``i``'s counterpart. A
    counterpart outside ``names`` is a TaskConfigError naming the joint."""
    index = []
    for name in names:
        other = mirror.counterpart(name)
        if other not in names:
            raise TaskConfigError(f"{where}: joint {name!r} mirrors to {other!r}, which is not among its joints")
        if mirror.sign(other) != mirror.sign(name):
            raise TaskConfigError(f"{where}: joint {name!r} and its counterpart {other!r} differ in whether "
                                  f"they change sign (the robot's mirror.flip)")
        index.append(list(names).index(other))
    return index, [mirror.sign(n) for n in names]


def _term(t: ResolvedTerm, width: int, action: JointIndex, mirror: Mirror,
          where: str) -> tuple[list[int], list[float]]:
    """One observation of term ``t`` (``width`` values) reflected."""
    spec = t.cfg.reflection()
    if spec is None:
        raise TaskConfigError(f"{where} term {t.name!r}: does not say how it mirrors (ObservationTerm.mirror, "
                              f"or @reflects on {t.func.__qualname__})")
    if spec == "joints":
        joints = t.params.get("joints")
        if not isinstance(joints, JointIndex):
            raise TaskConfigError(f"{where} term {t.name!r}: mirror='joints' needs a Joints parameter 'joints'")
        index, sign = joint_reflection(joints.names, mirror, f"{where} term {t.name!r}")
    elif spec == "actions":
        index, sign = joint_reflection(action.names, mirror, f"{where} term {t.name!r}")
    elif isinstance(spec, tuple):
        if not all(isinstance(s, int | float) and not isinstance(s, bool) and s in (1, -1) for s in spec):
            raise TaskConfigError(f"{where} term {t.name!r}: mirror signs must each be 1 or -1, got {spec!r}")
        index, sign = list(range(len(spec))), [float(s) for s in spec]
    elif callable(spec):
        index, sign = [int(i) for i in spec(**t.cfg.params)], [1.0] * width
        if sorted(index) != list(range(width)):
            raise TaskConfigError(f"{where} term {t.name!r}: its mirror function must return a permutation of "
                                  f"its {width} values, got {len(index)} indices")
    else:
        raise TaskConfigError(f"{where} term {t.name!r}: mirror must be signs, 'joints', 'actions' or a function, "
                              f"got {spec!r}")
    if len(index) != width:
        raise TaskConfigError(f"{where} term {t.name!r}: mirrors {len(index)} values, but it observes {width}")
    clip = t.cfg.clip
    if clip is not None and -1.0 in sign and clip[0] != -clip[1]:
        raise TaskConfigError(f"{where} term {t.name!r}: values that change sign need a clip symmetric about 0, "
                              f"got {clip}")
    return index, sign


def task_mirror(program: ResolvedProgram, widths: dict[str, Sequence[int]], device: torch.device) -> TaskMirror:
    """The reflections of ``program``'s observation groups (each term's single observation
    ``widths``) and action. A TaskConfigError names the robot without a mirror, the term that
    does not say how it mirrors, or the joint without a counterpart."""
    robot = program.task.scene.robot
    if robot.mirror is None:
        raise TaskConfigError(f"{program.task.name}: robot {robot.name!r} has no mirror (RobotConfig.mirror)")
    action = program.action.joints
    groups = {}
    for group, terms in program.observations.items():
        index: list[int] = []
        sign: list[float] = []
        for t, width in zip(terms, widths[group]):
            i, s = _term(t, width, action, robot.mirror, f"{program.task.name}: observation[{group}]")
            for _ in range(t.cfg.history):  # each observation of the history at its own offset
                index += [len(sign) + k for k in i]
                sign += s
        groups[group] = _reflection(index, sign, device)
    i, s = joint_reflection(action.names, robot.mirror, f"{program.task.name}: action 'joint_pos'")
    return TaskMirror(groups, _reflection(i, s, device))

"""The resolver rejects broken task tables with errors that name the term."""

import dataclasses
import inspect
import math
import re

import pytest

from motrix_gym.envs import TASKS, task_config
from motrix_gym.envs.walk.velocity import g1_flat
from motrix_gym.manager.resolver import TaskConfigError, resolve
from motrix_gym.manager.terms import (
    AtLeast,
    AtMost,
    Bodies,
    CommandName,
    Fraction,
    Joints,
    NonNegative,
    ObservationTerm,
    Positive,
    RewardTerm,
    Sensor,
    accepts_none,
    annotation,
    hints,
    term_function,
)
from motrix_gym.mdp import observations as obs
from motrix_gym.mdp import rewards as rew
from motrix_gym.mdp.command_names import VelocityCommandName
from motrix_gym.mdp.commands import VelocityCommand
from motrix_gym.mdp.terminations import physics_diverged
from motrix_gym.sim.scene import build_model, model_info

TASK = g1_flat()
INFO = model_info(build_model(TASK.scene, TASK.sim_dt))
GO1 = task_config("Go1WalkFlat")
GO1_INFO = model_info(build_model(GO1.scene, GO1.sim_dt))


def body_height(env, body: "Bodies", target: float = 0.0):
    return env.xpos[:, body[0], 2] - target


def with_rewards(*terms):
    return dataclasses.replace(TASK, rewards=TASK.rewards + terms)


def test_task_resolves():
    prog = resolve(TASK, INFO)
    assert len(prog.action.joints.names) == 29
    assert [t.name for t in prog.rewards][:2] == ["track_lin_vel", "track_ang_vel"]


def test_misspelled_body_names_the_term():
    bad = with_rewards(RewardTerm("head_height", body_height, weight=1.0, params={"body": Bodies("torso_lnk")}))
    with pytest.raises(TaskConfigError, match=r"reward term 'head_height'.*'torso_lnk'.*did you mean 'torso_link'"):
        resolve(bad, INFO)


def test_misspelled_joint_and_sensor():
    bad = dataclasses.replace(TASK, observations={"policy": (
        ObservationTerm("jp", obs.joint_pos_rel, params={"joints": Joints("left_knee")}),)})
    with pytest.raises(TaskConfigError, match=r"observation\[policy\] term 'jp'.*'left_knee'"):
        resolve(bad, INFO)
    bad = with_rewards(RewardTerm("fp", rew.feet_phase, weight=1.0,
                                  params={"clock": "gait", "sensors": (Sensor("left_foot"), Sensor("x"))}))
    with pytest.raises(TaskConfigError, match=r"reward term 'fp'.*sensor 'left_foot'"):
        resolve(bad, INFO)


def test_duplicate_names():
    with pytest.raises(TaskConfigError, match="reward term 'alive': duplicate"):
        resolve(with_rewards(RewardTerm("alive", rew.alive, weight=1.0)), INFO)


def test_parameter_checks():
    with pytest.raises(TaskConfigError, match=r"reward term 'h'.*unknown parameter.*'hieght'"):
        resolve(with_rewards(RewardTerm("h", body_height, weight=1.0,
                                        params={"body": Bodies("pelvis"), "hieght": 1.0})), INFO)
    with pytest.raises(TaskConfigError, match=r"reward term 'h'.*missing parameter.*'body'"):
        resolve(with_rewards(RewardTerm("h", body_height, weight=1.0)), INFO)
    with pytest.raises(TaskConfigError, match=r"reward term 'h'.*'target' must be a finite number, got 'high'"):
        resolve(with_rewards(RewardTerm("h", body_height, weight=1.0,
                                        params={"body": Bodies("pelvis"), "target": "high"})), INFO)
    with pytest.raises(TaskConfigError, match=r"reward term 'h'.*'body' must be Bodies"):
        resolve(with_rewards(RewardTerm("h", body_height, weight=1.0, params={"body": "pelvis"})), INFO)


def commanded_speed(env, command: CommandName, spare: CommandName | None = None):
    return env.commands[command].value[:, 0]  # annotations as objects: this module has no __future__ import


@pytest.mark.parametrize("params, message", [
    ({"command": "base_velocitty"}, "parameter 'command': no command 'base_velocitty' (the task's commands: "
                                    "['base_velocity', 'feet', 'gait'])"),
    ({"command": None}, "parameter 'command': no command None"),
    ({"command": "gait", "spare": "nope"}, "parameter 'spare': no command 'nope'"),
])
def test_a_command_name_must_be_one_of_the_task_s_commands(params, message):
    with pytest.raises(TaskConfigError, match="^reward term 'speed': " + re.escape(message)):
        resolve(with_rewards(RewardTerm("speed", commanded_speed, weight=1.0, params=params)), INFO)
    # the same names, given right, resolve; an optional one may be None
    resolve(with_rewards(RewardTerm("speed", commanded_speed, weight=1.0,
                                    params={"command": "base_velocity", "spare": None})), INFO)


class SteadyVelocity(VelocityCommand):
    """A subclass is of the class a term reads."""


@pytest.mark.parametrize("term, message", [
    (RewardTerm("slip", rew.foot_slip, weight=1.0, params={"feet": "gait"}),
     "reward term 'slip': parameter 'feet': command 'gait' is a GaitClock, the term reads a FeetState"),
    (RewardTerm("lin", rew.track_lin_vel_xy, weight=1.0, params={"command": "feet", "std": 0.5}),
     "reward term 'lin': parameter 'command': command 'feet' is a FeetState, the term reads a VelocityCommand"),
])
def test_a_command_of_another_class_than_the_term_reads_is_refused(term, message):
    with pytest.raises(TaskConfigError, match="^" + re.escape(message) + "$"):
        resolve(with_rewards(term), INFO)
    commands = tuple(dataclasses.replace(c, cls=SteadyVelocity) if c.name == "base_velocity" else c
                     for c in TASK.commands)
    resolve(dataclasses.replace(TASK, commands=commands), INFO)


@pytest.mark.parametrize("params, message", [
    ({"command": "base_velocity", "std": math.nan}, "parameter 'std' must be a finite number > 0, got nan"),
    ({"command": "base_velocity", "std": math.inf}, "parameter 'std' must be a finite number > 0, got inf"),
    ({"command": "base_velocity", "std": True}, "parameter 'std' must be a finite number > 0, got True"),
])
def test_a_float_parameter_must_be_a_finite_number(params, message):
    """Overrides refuse these themselves; a config written in Python meets the resolver."""
    with pytest.raises(TaskConfigError, match="^reward term 'lin': " + re.escape(message) + "$"):
        resolve(with_rewards(RewardTerm("lin", rew.track_lin_vel_xy, weight=1.0, params=params)), INFO)


@pytest.mark.parametrize("lin, message", [
    ((0.5, 0.5), "parameter 'lin' must be a tuple of 3 numbers, got (0.5, 0.5)"),
    (0.5, "parameter 'lin' must be a tuple of 3 numbers, got 0.5"),
    ((0.5, math.nan, 0.2), "parameter 'lin' item 1 must be a finite number >= 0, got nan (in (0.5, nan, 0.2))"),
    ([0.5, 0.5, "0.2"], "parameter 'lin' item 2 must be a finite number >= 0, got '0.2' (in [0.5, 0.5, '0.2'])"),
])
def test_each_item_of_a_tuple_of_numbers_is_checked(lin, message):
    push = next(e for e in GO1.events if e.name == "push")
    bad = dataclasses.replace(GO1, events=(dataclasses.replace(push, params={"lin": lin}),))
    with pytest.raises(TaskConfigError, match="^event term 'push': " + re.escape(message) + "$"):
        resolve(bad, GO1_INFO)
    resolve(dataclasses.replace(GO1, events=(dataclasses.replace(push, params={"lin": [0.5, 0.0, 1]}),)), GO1_INFO)


def test_every_built_in_term_s_annotations_resolve():
    """The resolver reads a term's annotations as objects where they resolve and as text where
    not, which cannot see ``Positive`` or a command's class: every built-in term's resolve."""
    for name in TASKS:
        for mode in ("train", "play"):
            cfg = task_config(name, mode=mode)
            terms = (*cfg.commands, *cfg.rewards, *cfg.terminations, *cfg.resets, *cfg.events,
                     *(t for group in cfg.observations.values() for t in group))
            for t in terms:
                func = term_function(t)
                annotated = set(inspect.get_annotations(func.__init__ if isinstance(func, type) else func))
                assert set(hints(func)) == annotated, t.name


ABOVE_0, FROM_0 = AtLeast(0.0, strict=True), AtLeast(0.0)


@pytest.mark.parametrize("ann, name, optional, bound, items, variadic", [
    (float, "float", False, None, (), False),
    (Positive, "float", False, ABOVE_0, (), False),
    (NonNegative | None, "float", True, FROM_0, (), False),
    ("float | None", "float", True, None, (), False),  # text: an annotation that does not resolve
    (tuple[NonNegative, NonNegative], "tuple", False, None, (FROM_0, FROM_0), False),
    (tuple[float, ...], "tuple", False, None, (None,), True),
    (tuple[float, float] | None, "tuple", True, None, (None, None), False),
    (VelocityCommandName, "CommandName", False, None, (), False),
    (int | str, None, False, None, (), False),
    (Fraction, "float", False, ABOVE_0, (), False),  # and at most 1: below
])
def test_an_annotation_reads_as_what_it_asks(ann, name, optional, bound, items, variadic):
    a = annotation(ann)
    assert (a.name, a.optional, a.bound, a.variadic) == (name, optional, bound, variadic)
    assert tuple(i.bound for i in a.items) == items
    assert a.command_class == ("VelocityCommand" if ann is VelocityCommandName else None)
    assert a.upper == (AtMost(1.0) if ann is Fraction else None)


def test_accepts_none_reads_fields_and_parameters():
    assert accepts_none(ObservationTerm, "noise") and not accepts_none(ObservationTerm, "scale")
    assert accepts_none(VelocityCommand, "heading") and not accepts_none(VelocityCommand, "levels")
    assert not accepts_none(rew.track_lin_vel_xy, "nope")


USER_TERMS = """
from __future__ import annotations

from typing import TYPE_CHECKING

from motrix_gym.manager.terms import Positive
from motrix_gym.mdp.command_names import VelocityCommandName

if TYPE_CHECKING:
    from motrix_gym.runtime.context import Context


def forward_speed(env: Context, command: VelocityCommandName, std: Positive, target: Speed = 0.0):
    return (env.commands[command].value[:, 0] - target).square().div(-std * std).exp()
"""


@pytest.mark.parametrize("params, message", [
    ({"command": "base_velocity", "std": -1.0}, "parameter 'std' must be a finite number > 0, got -1.0"),
    ({"command": "nope", "std": 1.0}, "parameter 'command': no command 'nope'"),
    ({"command": "gait", "std": 1.0}, "parameter 'command': command 'gait' is a GaitClock, the term reads a "
                                      "VelocityCommand"),
])
def test_a_term_s_annotations_are_checked_where_others_name_what_only_type_checkers_import(params, message):
    """A term module written as type checkers ask (``Context`` imported under ``TYPE_CHECKING``,
    an alias the module never defines): its other parameters are still checked."""
    module: dict = {}
    exec(compile(USER_TERMS, "user_terms.py", "exec"), module)
    speed = module["forward_speed"]
    assert set(hints(speed)) == {"command", "std"}
    with pytest.raises(TaskConfigError, match="^reward term 'fwd': " + re.escape(message)):
        resolve(with_rewards(RewardTerm("fwd", speed, weight=1.0, params=params)), INFO)
    resolve(with_rewards(RewardTerm("fwd", speed, weight=1.0, params={"command": "base_velocity", "std": 1.0,
                                                                         "target": 0.5})), INFO)


def test_a_task_must_end_the_lanes_whose_physics_diverged():
    """Without the term a diverged lane runs on from the state MuJoCo reset it to, mid-episode."""
    diverged = next(t for t in TASK.terminations if t.func is physics_diverged)
    others = tuple(t for t in TASK.terminations if t is not diverged)
    for terminations in (others, (*others, dataclasses.replace(diverged, time_out=True))):
        with pytest.raises(TaskConfigError, match="^task 'G1WalkFlat': no termination term calls "
                                                  "mdp.terminations.physics_diverged"):
            resolve(dataclasses.replace(TASK, terminations=terminations), INFO)
    resolve(dataclasses.replace(TASK, terminations=(*others, dataclasses.replace(diverged, name="nan"))), INFO)


def test_missing_policy_group():
    with pytest.raises(TaskConfigError, match="'policy' is required"):
        resolve(dataclasses.replace(TASK, observations={}), INFO)


@pytest.mark.parametrize("field, bad, message", [
    ("decimation", 0, "decimation must be an int >= 1, got 0"),
    ("decimation", 2.5, "decimation must be an int >= 1, got 2.5"),
    ("decimation", True, "decimation must be an int >= 1, got True"),
    ("sim_dt", 0.0, "sim_dt must be a finite number > 0, got 0.0"),
    ("sim_dt", float("nan"), "sim_dt must be a finite number > 0, got nan"),
    ("sim_dt", "0.005", "sim_dt must be a finite number > 0, got '0.005'"),
    ("episode_length_s", float("inf"), "episode_length_s must be a finite number > 0, got inf"),
    ("episode_length_s", 0.009, "episode_length_s 0.009 s is shorter than half a control step (0.02 s)"),
])
def test_a_task_s_timing_is_checked_as_it_is_made(field, bad, message):
    # before a scene is built from it: nothing rounds or truncates a bad value into a working one
    with pytest.raises(ValueError, match=f"^task 'G1WalkFlat': {re.escape(message)}$"):
        dataclasses.replace(TASK, **{field: bad})
    assert dataclasses.replace(TASK, **{field: getattr(TASK, field)}) == TASK


@pytest.mark.parametrize("change, message", [
    ({"clip": 0.0}, "action 'joint_pos': clip must be a finite number > 0 (the action space is [-clip, clip]), "
                    "got 0.0"),
    ({"clip": float("inf")}, "clip must be a finite number > 0 (the action space is [-clip, clip]), got inf"),
    ({"scale": {"left_knee_joint": float("nan"), ".*": 0.5}}, "the scale of ['left_knee_joint'] is not finite"),
])
def test_an_action_s_clip_and_scales_are_finite(change, message):
    with pytest.raises(TaskConfigError, match=re.escape(message)):
        resolve(dataclasses.replace(TASK, actions=dataclasses.replace(TASK.actions, **change)), INFO)


def with_first_policy_term(**change):
    first, *rest = TASK.observations["policy"]
    return dataclasses.replace(TASK, observations={**TASK.observations,
                                                   "policy": (dataclasses.replace(first, **change), *rest)})


@pytest.mark.parametrize("task, message", [
    (lambda: dataclasses.replace(TASK, rewards=(dataclasses.replace(TASK.rewards[0], weight=float("nan")),)),
     "reward term 'track_lin_vel': weight must be a finite number, got nan"),
    (lambda: dataclasses.replace(TASK, rewards=(dataclasses.replace(TASK.rewards[0], weight="1"),)),
     "reward term 'track_lin_vel': weight must be a finite number, got '1'"),
    (lambda: with_first_policy_term(scale=float("inf")), "scale must be a finite number, got inf"),
    (lambda: with_first_policy_term(noise=(float("nan"), 0.1)),
     "noise must be (lo, hi), finite numbers with lo <= hi, got (nan, 0.1)"),
    (lambda: with_first_policy_term(clip=(1.0, -1.0)), "clip must be (lo, hi) with lo < hi, got (1.0, -1.0)"),
])
def test_weights_scales_noise_and_clips_that_would_make_nan_or_nothing_are_refused(task, message):
    with pytest.raises(TaskConfigError, match=re.escape(message)):
        resolve(task(), INFO)


def test_vector_kernels_must_be_a_bool_or_groups_of_the_task():
    with pytest.raises(TaskConfigError, match="vector_kernels must be a bool or a tuple of observation groups, got 1"):
        resolve(dataclasses.replace(TASK, vector_kernels=1), INFO)
    with pytest.raises(TaskConfigError, match=r"got \['policy'\]"):
        resolve(dataclasses.replace(TASK, vector_kernels=["policy"]), INFO)
    with pytest.raises(TaskConfigError, match=r"group\(s\) \['critc'\] the task does not have"):
        resolve(dataclasses.replace(TASK, vector_kernels=("critc",)), INFO)


def test_bad_return_shape_is_caught_at_make():
    from motrix_gym.vector_env import MotrixVectorEnv

    bad = dataclasses.replace(TASK, observations={"policy": (
        ObservationTerm("flat", lambda env: env.qpos[:, 0]),)})
    with pytest.raises(TaskConfigError, match=r"observation\[policy\] term 'flat'.*\(lanes, d\)"):
        MotrixVectorEnv(bad, 2, compile=False)

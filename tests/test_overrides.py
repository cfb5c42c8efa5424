"""Overrides: a task's config changed by path (``overrides={"rewards.alive.weight": 0.0}``,
``--override PATH=VALUE``): exactly the value named changes, a bad path or value is refused naming
it, the env runs what was asked, and a training run keeps them."""

import dataclasses
import json
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import tiny
from motrix_gym.envs import task_config
from motrix_gym.learn import checkpoint
from motrix_gym.learn.play import play
from motrix_gym.learn.train import train
from motrix_gym.manager.overrides import OverrideError, apply, current, read
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.manager.terms import Bodies, Joints
from motrix_gym.registry import env_id
from motrix_gym.vector_env import MotrixVectorEnv

BASE = task_config("Go1WalkFlat")


def leaves(obj, path=""):
    """Every (path, value) of a config below ``path``, through fields, named terms, dicts and
    tuples of parts or of tuples (by index)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    elif isinstance(obj, tuple) and obj and all(dataclasses.is_dataclass(t) and hasattr(t, "name") for t in obj):
        items = [(t.name, t) for t in obj]
    elif isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, tuple) and any(isinstance(t, tuple) or dataclasses.is_dataclass(t) for t in obj):
        items = [(str(i), t) for i, t in enumerate(obj)]
    else:
        return [(path, obj)]
    return [leaf for k, v in items for leaf in leaves(v, f"{path}.{k}" if path else k)]


@pytest.mark.parametrize("path, value, stored", [
    ("rewards.alive.weight", 0, 0.0),
    ("observations.policy.joint_pos.history", 3, 3),
    ("observations.policy.joint_vel.noise", (-0.5, 0.5), (-0.5, 0.5)),
    ("observations.critic.joint_pos.clip", (-2, 2), (-2, 2)),  # None before: any value, the resolver checks
    ("events.push.interval_s", (2, 4), (2.0, 4.0)),
    ("events.push.interval_s", [2, 4], (2.0, 4.0)),  # as JSON holds it
    ("commands.base_velocity.params.ranges", [[0, 1], [0, 0], [-1, 1]], ((0.0, 1.0), (0.0, 0.0), (-1.0, 1.0))),
    ("commands.base_velocity.params.ranges", ((0, 1), (0, 0), (-1, 1)), ((0.0, 1.0), (0.0, 0.0), (-1.0, 1.0))),
    ("terminations.fell_over.params.limit_angle", 1.0, 1.0),
    ("randomization.friction", (0.5, 1.0), (0.5, 1.0)),
    ("commands.base_velocity.params.ranges.2", (-0.5, 0.5), (-0.5, 0.5)),  # by index
    ("scene.terrain.seed", 7, 7),
    ("episode_length_s", 10, 10.0),
    ("actions.clip", 3.0, 3.0),
    ("actions.scale..*_calf_joint", 0.3, 0.3),  # a dict's key with dots in it, whole
    ("scene.robot.default_joint_pos..*_thigh_joint", 1.0, 1.0),
    ("rewards.joint_limit.params.soft", 0.95, 0.95),  # a parameter the task leaves at its default
    ("observations.policy.joint_vel.noise", None, None),  # annotated X | None: None takes it away
    ("randomization", None, None),
    ("rewards.joint_acc.params.joints", Joints(".*_hip_joint"), Joints(".*_hip_joint")),  # a reference, whole
])
def test_an_override_changes_that_value_and_nothing_else(path, value, stored):
    cfg = apply(BASE, {path: value})
    assert current(cfg, path) == stored and type(current(cfg, path)) is type(stored)
    before, after = dict(leaves(BASE)), dict(leaves(cfg))
    changed = {p for p in before.keys() | after.keys() if before.get(p, "?") != after.get(p, "?")}
    assert changed and all(p == path or p.startswith(path + ".") for p in changed), changed
    assert task_config("Go1WalkFlat", overrides={path: value}) == cfg


@pytest.mark.parametrize("overrides, message", [
    ({"rewards.alivee.weight": 1.0}, "override 'rewards.alivee.weight': rewards has no 'alivee' (it has ["),
    ({"rewards.joint_limit.params.sfot": 0.9}, "override 'rewards.joint_limit.params.sfot': rewards.joint_limit.params "
                                               "has no 'sfot' (it has ['soft'])"),
    ({"rewards.joint_limit.params.soft": "0.9"}, "override 'rewards.joint_limit.params.soft': expected a finite "
                                                 "number, like 0.9, got '0.9'"),
    ({"observations.actor.joint_pos.scale": 1.0}, "observations has no 'actor' (it has ['critic', 'policy'])"),
    ({"rewards.alive.weight": True}, "override 'rewards.alive.weight': expected a finite number, like 0.5, got True"),
    ({"rewards.alive.weight": "1"}, "expected a finite number, like 0.5, got '1'"),
    ({"rewards.alive.weight": float("nan")}, "expected a finite number, like 0.5, got nan"),
    ({"observations.policy.joint_pos.history": 2.0}, "expected an int, like 1, got 2.0"),
    ({"events.push.interval_s": (1, 2, 3)}, "expected a tuple of 2, like (1.0, 3.0), got (1, 2, 3)"),
    ({"events.push.interval_s": [1, 2, 3]}, "expected a tuple of 2, like (1.0, 3.0), got (1, 2, 3)"),
    ({"randomization.friction": (0.5, "a")}, "override 'randomization.friction.1': expected a finite number"),
    ({"rewards.alive": 1.0}, "override 'rewards.alive': it holds a RewardTerm, not a value; change its fields"),
    ({"rewards.alive.func": len}, "override 'rewards.alive.func': it holds a function, not a value"),
    ({"sim_dt.x": 1.0}, "override 'sim_dt': it is a value; 'x' cannot be found in it"),
    ({"commands.base_velocity.params.ranges.3": (0, 1)}, "params.ranges has no '3' (it has ['0', '1', '2'])"),
    ({"commands.base_velocity.params.ranges.0": (0, 1, 2)}, "expected a tuple of 2, like (-1.0, 1.0)"),
    ({"commands.base_velocity.params.ranges.0": (0, "x")}, "override 'commands.base_velocity.params.ranges.0.1'"),
    ({"rewards..weight": 1.0}, "override paths are dotted names like 'rewards.alive.weight', got 'rewards..weight'"),
    ({"actions.scale..*_foot_joint": 1.0},
     "override 'actions.scale..*_foot_joint': actions.scale has no '.*_foot_joint' (it has ['.*_calf_joint', "),
    ({"mode": "play"}, "override 'mode': the task has no 'mode'"),
    ({"decimation": 0}, "override 'decimation': task 'Go1WalkFlat': decimation must be an int >= 1, got 0"),
    ({"episode_length_s": 0.005}, "override 'episode_length_s': task 'Go1WalkFlat': episode_length_s 0.005 s is "
                                  "shorter than half a control step (0.02 s)"),
    ({"randomization.friction": (2.0, 1.0)}, "override 'randomization.friction': randomization: friction must be "
                                             "(lo, hi), finite, with 0 < lo <= hi, got (2.0, 1.0)"),
    ({"scene.robot.actuators.0.stiffness": -5.0}, "override 'scene.robot.actuators.0.stiffness': actuators "
     "('.*_hip_joint', '.*_thigh_joint'): stiffness must be a finite number >= 0, got -5.0"),
    ({"scene.robot.actuators.1.effort_limit": 0.0}, "effort_limit must be a finite number > 0, got 0.0"),
    ({"scene.robot.actuators.1.armature": -1e-3}, "armature must be a finite number >= 0, got -0.001"),
    ({"scene.robot.base_height": -0.3}, "override 'scene.robot.base_height': robot 'go1': base_height must be a "
                                        "finite number > 0, got -0.3"),
    ({"max_speed": 0.0}, "override 'max_speed': task 'Go1WalkFlat': max_speed must be a number > 0, got 0.0"),
    ({"rewards.alive.weight": None}, "override 'rewards.alive.weight': it cannot be None (null); it holds 0.5"),
    ({"rewards.joint_limit.params.soft": None}, "override 'rewards.joint_limit.params.soft': it cannot be None "
                                                "(null); it holds 0.9"),
    ({"scene": None}, "override 'scene': it cannot be None (null); it holds a SceneConfig"),
    ({"rewards.joint_acc.params.joints": ".*_hip_joint"}, "override 'rewards.joint_acc.params.joints': expected a "
                                                          "Joints, like Joints(names=('.*',)), got '.*_hip_joint'"),
    ({"rewards.joint_acc.params.joints": Bodies(".*")}, "expected a Joints, like Joints(names=('.*',)), got Bodies("),
    ({"scene.terrain.sub_terrains": (1, 2)}, "override 'scene.terrain.sub_terrains': expected a tuple of SubTerrain, "
                                             "got (1, 2)"),  # empty: its annotation says what it holds
    ({"camera.distance": "far"}, "override 'camera.distance': camera distance must be None or > 0, got 'far'"),
    ({"rewards.joint_acc.params.joints.names": ("a",)}, "override 'rewards.joint_acc.params.joints': it is a value; "
                                                        "'names' cannot be found in it"),
    ({"randomization.friction": None}, "override 'randomization.friction': it cannot be None (null); it holds "
                                       "(0.4, 1.2)"),
])
def test_a_bad_override_is_refused_naming_it(overrides, message):
    with pytest.raises(OverrideError) as e:
        task_config("Go1WalkFlat", overrides=overrides)
    assert message in str(e.value)
    assert task_config("Go1WalkFlat") == BASE  # nothing changed in what the builder gives


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(-10**6, 10**6))
def test_text_reads_as_the_kind_of_the_value_it_replaces(x, n):
    assert read(BASE, "rewards.alive.weight", repr(x)) == x
    assert read(BASE, "observations.policy.joint_pos.history", str(n)) == n
    assert read(BASE, "events.push.interval_s", f"{x!r},{n}") == (x, float(n))
    assert read(BASE, "observations.policy.joint_pos.clip", f"{x!r},{n}") == (x, float(n))  # None: numbers
    assert read(BASE, "commands.base_velocity.params.ranges.1", f"{n},{x!r}") == (float(n), x)
    assert read(BASE, "rewards.joint_limit.params.soft", repr(x)) == x  # a default of the term's function


@pytest.mark.parametrize("path, raw, message", [
    ("rewards.alive.weight", "inf", "expected a finite number, got 'inf'"),
    ("observations.policy.joint_pos.clip", "-inf,1", "expected finite numbers, got '-inf,1'"),
    ("observations.policy.joint_pos.history", "2.5", "expected an int, got '2.5'"),
    ("events.push.interval_s", "1", "expected 2 comma-separated values, like 1.0,3.0, got '1'"),
    ("commands.base_velocity.params.ranges", "0,1", "it holds 3 parts; give one at a time, by index "
                                                    "(commands.base_velocity.params.ranges.0=...)"),
])
def test_text_that_does_not_read_as_that_kind_is_refused(path, raw, message):
    with pytest.raises(OverrideError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read(BASE, path, raw)


def test_null_is_none_where_a_field_or_term_parameter_may_be_none():
    assert read(BASE, "randomization", "null") is None
    assert apply(BASE, {"randomization": read(BASE, "randomization", "null")}).randomization is None
    stairs = task_config("Go1WalkStairs")
    path = "resets.default_pose.params.origins"  # TerrainCurriculumName | None
    assert current(stairs, path) == "terrain"
    cfg = apply(stairs, {path: read(stairs, path, "null")})
    assert current(cfg, path) is None and cfg.resets[0].params["origins"] is None
    with pytest.raises(OverrideError, match="^override 'rewards.alive.weight': it cannot be None"):
        apply(BASE, {"rewards.alive.weight": read(BASE, "rewards.alive.weight", "null")})


def test_null_in_place_of_a_term_takes_it_out_of_its_table():
    cfg = apply(BASE, {"events.push": read(BASE, "events.push", "null"), "rewards.alive": None})
    assert [e.name for e in cfg.events] == [e.name for e in BASE.events if e.name != "push"]
    assert [r.name for r in cfg.rewards] == [r.name for r in BASE.rewards if r.name != "alive"]
    assert dataclasses.replace(cfg, events=BASE.events, rewards=BASE.rewards) == BASE
    env = MotrixVectorEnv("Go1WalkFlat", 2, compile=False, overrides={"rewards.alive": None})
    assert "alive" not in env.runtime.reward_names and len(env.runtime.reward_names) == len(BASE.rewards) - 1
    env.close()
    with pytest.raises(OverrideError, match=r"^override 'observations.critic': it cannot be None \(null\); it "
                                            r"holds the terms \['base_lin_vel', "):
        apply(BASE, {"observations.critic": None})  # a group is not a term: the env reads its groups by name
    with pytest.raises(TaskConfigError, match="^reward term 'feet_air_time': parameter 'feet': no command 'feet'"):
        MotrixVectorEnv("Go1WalkFlat", 2, compile=False, overrides={"commands.feet": None})


TERMS = [f"{table}.{t.name}" for table in ("rewards", "terminations", "commands", "events", "resets")
         for t in getattr(BASE, table)] + [f"observations.{g}.{t.name}" for g, ts in BASE.observations.items()
                                           for t in ts]


@given(st.lists(st.sampled_from(TERMS), unique=True, max_size=4))
def test_null_takes_out_exactly_the_terms_it_names(gone):
    cfg = apply(BASE, dict.fromkeys(gone))
    for path in gone:
        with pytest.raises(OverrideError, match="has no"):
            current(cfg, path)
    kept = {p: v for p, v in leaves(BASE) if not any(p.startswith(g + ".") for g in gone)}
    assert {p: v for p, v in leaves(cfg) if v != () or p in kept} == kept  # a table emptied is a leaf ()


def test_an_empty_table_takes_terms_of_its_kind():
    play = task_config("Go1WalkFlat", mode="play")
    push = next(e for e in BASE.events if e.name == "push")
    assert play.events == () and apply(play, {"events": [push]}).events == (push,)
    with pytest.raises(OverrideError, match=r"^override 'events': expected a tuple of EventTerm, got \(RewardTerm"):
        apply(play, {"events": BASE.rewards[:1]})


def test_a_term_s_joints_are_given_by_their_names():
    path = "observations.policy.joint_pos.params.joints"
    assert read(BASE, path, ".*_hip_joint,.*_thigh_joint") == Joints(".*_hip_joint", ".*_thigh_joint")
    env = MotrixVectorEnv("Go1WalkFlat", 2, compile=False, overrides={path: read(BASE, path, ".*_calf_joint")})
    assert env.single_observation_space.shape[0] == 45 - 8  # 4 of the 12 joints
    env.close()
    with pytest.raises(TaskConfigError, match=r"^observation\[policy\] term 'joint_pos': joint '.\*_claf_joint' "
                                               "matches no joint of the model"):
        MotrixVectorEnv("Go1WalkFlat", 2, compile=False, overrides={path: Joints(".*_claf_joint")})


def test_the_env_runs_what_the_overrides_ask():
    env = MotrixVectorEnv("Go1WalkFlat", 4, compile=False,
                          overrides={"rewards.alive.weight": 0.0, "observations.policy.joint_pos.history": 2})
    plain = MotrixVectorEnv("Go1WalkFlat", 4, compile=False)
    assert env.single_observation_space.shape[0] == plain.single_observation_space.shape[0] + 12
    for e in (env, plain):
        e.reset(seed=0)
        e.step(np.zeros((4, 12), np.float32))
    alive = env.runtime.reward_names.index("alive")
    assert (env.runtime.reward_terms[:4, alive] == 0).all() and (plain.runtime.reward_terms[:4, alive] > 0).all()
    env.close()
    plain.close()


def test_a_run_keeps_its_overrides_and_the_command_line_reads_them(tmp_path, capsys):
    from motrix_gym.__main__ import main

    overrides = {"rewards.alive.weight": 0.0, "events.push.interval_s": (2.0, 4.0)}
    res = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                config=tiny("Go1WalkFlat"), task_options={"overrides": overrides})
    assert checkpoint.load(res.checkpoint)["infos"]["task_options"] == {"overrides": overrides}
    assert json.loads((res.run_dir / "config.json").read_text())["task_options"] == {
        "overrides": {"rewards.alive.weight": 0.0, "events.push.interval_s": [2.0, 4.0]}}
    again = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0,
                  progress=False, resume=res.checkpoint)
    assert checkpoint.load(again.checkpoint)["infos"]["task_options"] == {"overrides": overrides}

    argv = ["play", "Go1WalkFlat", "--checkpoint", str(again.checkpoint), "--steps", "3"]
    assert main([*argv, "--override", "rewards.alive.weight=0"]) == 0
    assert "alive                +0.00000" in capsys.readouterr().out
    assert main(["describe", "Go1WalkFlat", "--override", "actions.scale..*_calf_joint=0.3"]) == 0
    assert re.search(r"FR_calf_joint +-1\.800 +0\.300", capsys.readouterr().out)
    for bad, message in ((["--override", "rewards.alive.weight=x"], "argument --override: override "
                                                                    "'rewards.alive.weight': expected a finite number"),
                         (["--override", "alive=1"], "argument --override: override 'alive': the task has no"),
                         (["--override", "rewards.alive.weight"], "argument --override: expected PATH=VALUE"),
                         (["--override", "a.b=1", "--override", "a.b=2"], "argument --override: ['a.b'] given twice"),
                         (["--task-option", "overrides=1"], "overrides: give each as --override PATH=VALUE")):
        with pytest.raises(SystemExit) as exit:
            main([*argv, *bad])
        assert exit.value.code == 2 and message in capsys.readouterr().err, bad
    assert main(["describe", "Go1WalkFlat", "--override", "observations.policy.joint_pos.history=0"]) == 2
    assert "history must be an int >= 1" in capsys.readouterr().err


def test_a_sub_terrain_changes_by_name_and_tuples_of_tuples_by_index():
    """Sub-terrains are named parts, their params a term's (with the function's defaults); tuples
    of tuples are walked by index."""
    stairs = task_config("Go1WalkStairs")
    cfg = apply(stairs, {"scene.terrain.sub_terrains.inverted_pyramid_stairs.params.step_height": (0.02, 0.1),
                         "commands.base_velocity.params.ranges.2": (-0.5, 0.5)})
    subs, before = cfg.scene.terrain.sub_terrains, stairs.scene.terrain.sub_terrains
    assert subs[1] == dataclasses.replace(before[1], params={**before[1].params, "step_height": (0.02, 0.1)})
    assert subs[0] == before[0]
    assert current(cfg, "commands.base_velocity.params.ranges.2") == (-0.5, 0.5)
    assert current(stairs, "scene.terrain.sub_terrains.pyramid_stairs.params.step_width") == 0.25
    assert [s.name for s in apply(stairs, {"scene.terrain.sub_terrains.pyramid_stairs": None}).scene.terrain
            .sub_terrains] == ["inverted_pyramid_stairs"]
    with pytest.raises(OverrideError, match="'scene.terrain.sub_terrains.pyramid_stairs': it holds a SubTerrain, "
                                            "not a value"):
        apply(stairs, {"scene.terrain.sub_terrains.pyramid_stairs": 1})
    with pytest.raises(OverrideError, match="scene.terrain.sub_terrains.pyramid_stairs.params.step_width': expected "
                                            "a finite number"):
        apply(stairs, {"scene.terrain.sub_terrains.pyramid_stairs.params.step_width": "wide"})
    from motrix_gym.__main__ import main

    with pytest.raises(SystemExit):  # a part the command line could not name is an argparse error, not a crash
        main(["describe", "Go1WalkStairs", "--override", "scene.terrain.sub_terrains.x-1.noise=0,1"])


def test_every_command_that_makes_a_task_takes_options_and_overrides(capsys):
    from motrix_gym.__main__ import main

    assert main(["run", "Go1WalkFlat", "--num-envs", "2", "--steps", "2", "--no-compile", "--override",
                 "rewards.alive.weight=0", "--task-option", "mode=play"]) == 0
    assert "alive                +0.00000" in capsys.readouterr().out
    for cmd in ("run", "render", "describe", "bench", "train", "play", "evaluate", "dataset"):
        extra = {"render": ["--out", "x.gif"], "dataset": ["motrix/go1/x-v0"]}.get(cmd, [])
        with pytest.raises(SystemExit) as exit:
            main([cmd, "Go1WalkFlat", *extra, "--override", "rewards.alivee.weight=0"])
        assert exit.value.code == 2 and "rewards has no 'alivee'" in capsys.readouterr().err, cmd
    assert main(["describe", "Go1WalkFlat", "--override", "events.push=null", "--override", "randomization=null",
                 "--override", "observations.policy.joint_pos.params.joints=.*_calf_joint"]) == 0
    out = capsys.readouterr().out
    assert "push_by_velocity" not in out and "randomisation: none" in out
    assert "observations 'policy': 37 columns" in out and "joint_pos_rel(joints=.*_calf_joint)" in out


def test_a_run_starts_from_a_checkpoint_whose_overrides_gave_it_the_same_observations(tmp_path):
    """``--start-from`` compares the checkpoint's observation layout with the new task as its
    overrides make it, not with the task's defaults."""
    kept = {"overrides": {"observations.policy.joint_pos.history": 2}}
    first = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0,
                  progress=False, config=tiny("Go1WalkFlat"), task_options=kept)
    again = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0,
                  progress=False, config=tiny("Go1WalkFlat"), task_options=kept, start_from=first.checkpoint)
    assert again.iterations == 1
    with pytest.raises(checkpoint.CheckpointError, match=r"with histories \[2\], Motrix/Go1WalkFlat-v0's 'policy' "
                                                         r"observations keep \[1\]"):
        train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path / "no", compile=False, progress=False,
              config=tiny("Go1WalkFlat"), start_from=first.checkpoint)


def test_a_run_compares_and_records_its_policy_on_the_task_as_its_overrides_made_it(tmp_path):
    """The final comparison and the videos run the task with the run's overrides (which here give
    the policy wider observations: on the plain task it could not act), but without its make-time
    options; the videos leave out the overrides that play mode has no place for (pushes)."""
    overrides = {"observations.policy.joint_pos.history": 2, "rewards.alive.weight": 0.0,
                 "events.push.interval_s": (2.0, 4.0)}
    res = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=2, progress=False,
                config=tiny("Go1WalkFlat"), video=True, video_length=2,
                task_options={"overrides": overrides, "heading_command": True})
    assert res.summary["eval_overrides"] == overrides
    for name in ("policy", "random", "zero"):
        assert res.summary["eval"][name]["reward_terms"]["alive"] == 0.0, name
    assert (res.run_dir / "videos" / "model_0.mp4").stat().st_size > 0
    with pytest.raises(checkpoint.CheckpointError, match=r"its actor observed \['joint_pos'\] with histories \[2\], "
                                                         r".*keep \[1\] \(its run trained Motrix/Go1WalkFlat-v0 "
                                                         r"with task options {'overrides': {'obs"):
        play(env_id("Go1WalkFlat"), res.checkpoint, steps=1, progress=False)
    played = play(env_id("Go1WalkFlat"), res.checkpoint, steps=2, progress=False,
                  task_options={"overrides": {"observations.policy.joint_pos.history": 2}})
    assert played.steps == 2


def test_play_and_evaluate_take_the_run_s_overrides_when_asked(tmp_path, capsys):
    """``--run-overrides``: play takes those of the run's overrides that play mode has a place
    for (not the pushes), evaluate all of them, which gives the run's final comparison again; an
    ``--override`` of the same path wins."""
    from motrix_gym.__main__ import main

    overrides = {"observations.policy.joint_pos.history": 2, "rewards.alive.weight": 0.0,
                 "events.push.interval_s": (2.0, 4.0)}
    res = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=2, progress=False,
                config=tiny("Go1WalkFlat"), task_options={"overrides": overrides})
    capsys.readouterr()
    ckpt = ["--checkpoint", str(res.checkpoint)]
    assert main(["play", "Go1WalkFlat", *ckpt, "--steps", "2", "--run-overrides"]) == 0
    out = capsys.readouterr().out
    assert "the run's overrides: {'observations.policy.joint_pos.history': 2, 'rewards.alive.weight': 0.0}" in out
    assert "alive                +0.00000" in out
    assert main(["play", "Go1WalkFlat", *ckpt, "--steps", "2", "--run-overrides",
                 "--override", "rewards.alive.weight=2"]) == 0
    out = capsys.readouterr().out
    assert "the run's overrides: {'observations.policy.joint_pos.history': 2}" in out
    assert "alive                +0.04000" in out
    figures = tmp_path / "figures.json"
    assert main(["evaluate", "Go1WalkFlat", *ckpt, "--lanes", "2", "--run-overrides", "--json", str(figures)]) == 0
    assert json.loads(figures.read_text())["eval"] == json.loads(json.dumps(res.summary["eval"]))
    assert main(["play", "Go1WalkFlat", *ckpt, "--steps", "2"]) == 2  # without them, the policy cannot read the task
    assert "its actor observed ['joint_pos'] with histories [2]" in capsys.readouterr().err


@pytest.fixture
def go1_longer():
    """Go1WalkFlat whose make-time option ``longer`` keeps a history of joint positions,
    registered as a task of its own while the test runs."""
    import gymnasium as gym

    from motrix_gym.envs import TASKS
    from motrix_gym.registry import register_task

    def build(mode: str = "train", longer: bool = False):
        cfg = task_config("Go1WalkFlat", mode=mode)
        return apply(cfg, {"observations.policy.joint_pos.history": 2}) if longer else cfg

    register_task("Go1Longer", build, ppo=tiny("Go1WalkFlat"))
    yield env_id("Go1Longer")
    TASKS.pop("Go1Longer")
    gym.registry.pop(env_id("Go1Longer"))


@pytest.mark.parametrize("eval_lanes, video", [(2, False), (0, True)])
def test_a_run_whose_options_change_the_observations_is_refused_before_it_starts(go1_longer, tmp_path,
                                                                                  eval_lanes, video):
    """Without its make-time options the task would give the policy other observations: the final
    comparison or the videos could not run it, which the run says before it starts."""
    what = "the final comparison" if eval_lanes else "the videos"
    with pytest.raises(ValueError, match=rf"{what}: {go1_longer} made with .* has history .*'joint_pos': 2"):
        train(go1_longer, iterations=1, log_dir=tmp_path, compile=False, eval_lanes=eval_lanes, progress=False,
              video=video, task_options={"longer": True})
    assert not any(tmp_path.rglob("*.pt"))
    assert train(go1_longer, iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                 task_options={"longer": True}).iterations == 1


@pytest.mark.parametrize("task, path, value, message", [
    ("G1WalkFlat", "rewards.track_lin_vel.params.std", 0.0, "reward term 'track_lin_vel': parameter 'std' must be "
                                                            "a finite number > 0, got 0.0"),
    ("G1WalkFlat", "rewards.track_lin_vel.params.std", -0.5, "parameter 'std' must be a finite number > 0, got -0.5"),
    ("G1WalkFlat", "resets.default_pose.params.lift", -0.5, "reset term 'default_pose': parameter 'lift' must be a "
                                                            "finite number >= 0, got -0.5"),
    ("G1WbtDance", "terminations.anchor_height.params.threshold", 0.0, "termination term 'anchor_height': parameter "
                                                                       "'threshold' must be a finite number > 0"),
    ("Go1WalkFlat", "commands.base_velocity.params.good_error", -0.1, "command term 'base_velocity': parameter "
                                                                      "'good_error' must be a finite number > 0"),
    ("G1WbtDance", "resets.motion_start.params.joint_noise", -0.1, "parameter 'joint_noise' must be a finite number "
                                                                   ">= 0, got -0.1"),
    ("Go1WalkFlat", "rewards.joint_limit.params.soft", 1.5, "reward term 'joint_limit': parameter 'soft' must be a "
                                                            "finite number > 0 and <= 1, got 1.5"),
    ("Go1BallBalance", "terminations.tilted.params.limit_angle", 3.5, "termination term 'tilted': parameter "
                                                                      "'limit_angle' must be a finite number > 0 and "
                                                                      "< 3.14159, got 3.5"),
    ("Go1WalkStairs", "observations.policy.height_scan.params.size", (-1.6, 1.0),
     "observation[policy] term 'height_scan': parameter 'size' item 0 must be a finite number >= 0, got -1.6 "
     "(in (-1.6, 1.0))"),
    ("Go1WalkFlat", "events.push.params.ang", (0.5, -0.5, 0.8), "event term 'push': parameter 'ang' item 1 must be "
                                                               "a finite number >= 0, got -0.5"),
])
def test_a_term_parameter_outside_what_its_annotation_allows_is_refused(task, path, value, message):
    """A std of 0 zeroes a tracking reward (or NaN where the error is 0), a negative one is the
    positive one, a negative lift spawns the robot into the ground, a negative scan size fails deep
    in torch, a negative push amplitude is the positive one, a soft joint limit beyond the range or
    a tilt limit of pi never fires: each is refused, naming it."""
    with pytest.raises(TaskConfigError, match=re.escape(message)):
        MotrixVectorEnv(task, 2, compile=False, overrides={path: value})

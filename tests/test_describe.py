"""``describe``: a made env's tables of terms say what its runtime runs (columns, weights,
joints), for tasks of every family and for a custom config."""

import dataclasses
import re

import gymnasium as gym
import pytest

from motrix_gym.describe import describe
from motrix_gym.envs import ppo_config, task_config
from motrix_gym.learn.config import PpoConfig
from motrix_gym.registry import env_id
from motrix_gym.vector_env import MotrixVectorEnv


def section(text: str, title: str) -> list[list[str]]:
    """The rows (split on runs of two or more spaces) of the table under the line starting with
    ``title``, header included."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def check_tables(env: MotrixVectorEnv) -> str:
    text = describe(env)
    rt = env.runtime
    for group in rt.program.observations:
        header, *rows = section(text, f"observations {group!r}: {sum(rt.obs_dims[group])} columns")
        assert header[:2] == ["columns", "term"]
        assert [(r[1], r[0]) for r in rows] == [(name, f"{s.start}:{s.stop}")
                                                for name, s in rt.observation_columns(group).items()]
    _, *rows = section(text, "rewards")
    assert [(r[0], float(r[1])) for r in rows] == [(t.name, t.cfg.weight) for t in rt.program.rewards]
    _, *rows = section(text, "terminations")
    assert [(r[0], r[1] == "truncation") for r in rows] == [(t.name, t.cfg.time_out)
                                                            for t in rt.program.terminations]
    _, *rows = section(text, "actions:")
    assert [(int(r[0]), r[1]) for r in rows] == list(enumerate(rt.program.action.joints.names))
    return text


@pytest.mark.parametrize("task", ["Go1WalkStairs", "Go1BallBalance", "G1WbtDance", "T1WalkFlat"])
def test_the_tables_name_every_term_where_the_runtime_puts_it(task):
    env = gym.make_vec(env_id(task), num_envs=1, compile=False, progress=False)
    text = check_tables(env.unwrapped)
    assert ("ground: a plane" in text) == (task in ("Go1BallBalance", "G1WbtDance", "T1WalkFlat"))
    if task == "Go1WalkStairs":  # each sub-terrain, its columns and its function with every parameter
        assert "  pyramid_stairs           5        2         sim.terrain.pyramid_stairs(step_height=(0.03, 0.14), " \
               "step_width=0.25)" in text.splitlines()
    assert ("ball: Ball(" in text) == (task == "Go1BallBalance")
    symmetry = next(line for line in text.splitlines() if line.startswith("mirror symmetry: "))
    assert symmetry.startswith("mirror symmetry: none (G1WbtDance: observation[policy] term 'command'") == (
        task == "G1WbtDance")
    env.close()


def test_the_mirror_column_shows_a_term_s_own_reflection_else_its_function_s():
    cfg = task_config("Go1WalkStairs")
    changes = {"base_ang_vel": {"mirror": (1, -1, 1)}, "command": {"mirror": None}}
    policy = tuple(dataclasses.replace(t, **changes.get(t.name, {})) for t in cfg.observations["policy"])
    env = MotrixVectorEnv(dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy}), 1,
                          compile=False)
    text = check_tables(env)
    header, *rows = section(text, "observations 'policy'")
    mirror = {r[1]: r[header.index("mirror")] for r in rows}
    assert mirror == {"base_ang_vel": "(1, -1, 1)", "projected_gravity": "(1, -1, 1)", "command": "-",
                      "joint_pos": "joints", "joint_vel": "joints", "last_action": "actions",
                      "height_scan": "scan_mirror()"}
    assert "mirror symmetry: none (Go1WalkStairs: observation[policy] term 'command': does not say" in text
    env.close()
    env = MotrixVectorEnv(cfg, 1, compile=False)
    assert ("mirror symmetry: joints FR_* <-> FL_*, RR_* <-> RL_*; those matching .*_hip_joint change sign"
            in describe(env))
    env.close()


def test_a_custom_config_shows_its_histories_and_delays():
    cfg = task_config("Go1WalkFlat")
    changes = {"joint_pos": {"history": 3, "delay": (0, 2)}, "joint_vel": {"delay": (1, 3), "delay_every": 2}}
    policy = tuple(dataclasses.replace(t, **changes.get(t.name, {})) for t in cfg.observations["policy"])
    env = MotrixVectorEnv(dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy}), 1,
                          compile=False)
    rows = {r[1]: r for r in section(check_tables(env), "observations 'policy': 69 columns")[1:]}
    assert rows["joint_pos"][:7] == ["9:45", "joint_pos", "1", "[-0.01, 0.01]", "-", "3", "[0, 2]"]
    assert rows["joint_vel"][:7] == ["45:57", "joint_vel", "0.05", "[-1.5, 1.5]", "-", "1", "[1, 3] every 2"]
    assert rows["last_action"][6] == "-"
    env.close()


def test_describe_on_the_command_line_takes_task_options(capsys):
    from motrix_gym.__main__ import main

    assert main(["describe", "Go1WalkFlat", "--task-option", "mode=play"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Go1WalkFlat: robot Unitree Go1 12-DoF (model go1), 1 lane(s)")
    assert "randomisation: none" in out and "events" not in out  # play mode: no pushes or randomisation
    assert all(r[3] == "-" for r in section(out, "observations 'policy'")[1:])  # nor noise
    assert main(["describe", "Go1WalkFlat"]) == 0
    out = capsys.readouterr().out
    assert "push" in out
    ppo = out.split("train's PPO settings (--ppo NAME=VALUE changes one)\n")[1].split()
    assert {"num_envs=1024", "actor_hidden=256,128,128", "obs_normalization=true", "rnn_type=none"} <= set(ppo)
    assert dict(PpoConfig.parse_setting(s) for s in ppo) == dataclasses.asdict(ppo_config("Go1WalkFlat"))
    with pytest.raises(SystemExit) as exit:
        main(["describe", "G1WbtDance", "--task-option", "heading_command=true"])
    assert exit.value.code == 2
    assert "argument --task-option: Motrix/G1WbtDance-v0 got an unexpected keyword argument" in (
        capsys.readouterr().err)

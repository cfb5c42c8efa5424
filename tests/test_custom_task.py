"""Tasks of your own (``registry.register_task``, ``examples/custom_task.py``): made, trained,
started from and played as the built-in tasks are."""

import importlib
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from motrix_gym.envs import TASKS
from motrix_gym.registry import BUILTIN, env_id, register_task

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "motrix_gym"]
TINY = [f"--ppo={k}={v}" for k, v in (("num_steps_per_env", 4), ("actor_hidden", 16), ("critic_hidden", 16),
                                       ("num_learning_epochs", 1), ("num_mini_batches", 1))]


@pytest.fixture
def eager(monkeypatch):
    """examples/custom_task.py imported, which registers Motrix/G1WalkEager-v0 and
    Motrix/Go1WalkRidge-v0; unregistered after."""
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module("examples.custom_task")
    yield module
    for name, id in (("G1WalkEager", module.ENV_ID), ("Go1WalkRidge", module.RIDGE_ID)):
        TASKS.pop(name)
        gym.registry.pop(id)
    sys.modules.pop("examples.custom_task")


def test_a_registered_task_runs_the_table_its_builder_gives(eager):
    """From the same seed and actions, G1WalkEager's reward terms are G1WalkFlat's with the
    tracking terms doubled, bit for bit: the same physics and lanes, its own table."""
    envs = [gym.make_vec(i, num_envs=4, compile=False, progress=False) for i in (env_id("G1WalkFlat"), eager.ENV_ID)]
    names = envs[0].unwrapped.runtime.reward_names
    assert envs[1].unwrapped.runtime.reward_names == names
    scale = torch.tensor([2.0 if n in eager.TRACKING else 1.0 for n in names])
    tracking = scale == 2.0
    assert tracking.sum() == 2
    for env in envs:
        env.reset(seed=3)
    for actions in np.random.default_rng(0).uniform(-1, 1, (5, 4, 29)).astype(np.float32):
        for env in envs:
            env.step(actions)
        flat, mine = (env.unwrapped.runtime.reward_terms[:4] for env in envs)
        assert (flat[:, tracking] != 0).any(0).all()
        assert torch.equal(mine, flat * scale)
    for env in envs:
        env.close()


def test_a_task_on_a_sub_terrain_of_one_s_own_stands_its_robots_on_it(eager):
    """Go1WalkRidge's tiles are the example's function's heights, with the row's difficulty; its
    lanes spawn on them and stand with zero actions."""
    env = gym.make_vec(eager.RIDGE_ID, num_envs=8, compile=False, progress=False)
    env.reset(seed=0)
    rt = env.unwrapped.runtime
    hm = rt.program.model.heightfield
    assert hm.tile_kinds == ("flat",) * 2 + ("ridge",) * 8
    n, b = 80, 40  # samples per tile and in the border
    x = (np.arange(n) + 0.5) * 0.1
    level = np.floor(np.minimum(np.minimum(x, 8.0 - x), 3.0) / 0.5) * 0.08
    for row in (0, 4, 9):
        tile = hm.heights[b + 5 * n:b + 6 * n, b + row * n:b + (row + 1) * n]  # column 5: a ridge
        np.testing.assert_allclose(tile, np.broadcast_to(level * row / 9, (n, n)), atol=1e-12)
    for _ in range(50):
        obs, _, terminated, _, _ = env.step(np.zeros((8, 12), np.float32))
    assert not terminated.any() and np.isfinite(obs).all()
    env.close()


def test_the_command_line_trains_plays_and_lists_a_task_named_after_its_module(tmp_path):
    """``module:Task`` on the command line imports the module that registers the task; a run of it
    can then start a built-in task of the same robot."""
    logs, gif = tmp_path / "logs", tmp_path / "eager.gif"
    run = subprocess.run([*CLI, "train", "examples.custom_task:G1WalkEager", "--num-envs", "4", "--iterations", "1",
                          "--no-compile", "--eval-lanes", "2", "--log-dir", str(logs), *TINY],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    (ckpt,) = logs.glob("G1WalkEager/*/model_0.pt")
    run = subprocess.run([*CLI, "play", "examples.custom_task:Motrix/G1WalkEager-v0", "--log-dir", str(logs),
                          "--out", str(gif), "--steps", "4", "--lanes", "1"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and gif.stat().st_size > 1000, run.stderr[-2000:]
    assert f"checkpoint: {ckpt}" in run.stdout
    run = subprocess.run([*CLI, "train", "G1WalkFlat", "--num-envs", "4", "--iterations", "1", "--no-compile",
                          "--eval-lanes", "0", "--log-dir", str(logs), "--start-from", str(ckpt), *TINY],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    # a checkpoint that does not record its task's facts: they come from the task, where it is registered
    old = torch.load(ckpt, weights_only=True)
    del old["infos"]["task"]
    torch.save(old, tmp_path / "old.pt")
    runs = {task: subprocess.run([*CLI, "train", task, "--num-envs", "4", "--iterations", "1", "--no-compile",
                                  "--eval-lanes", "0", "--log-dir", str(logs), "--start-from", str(tmp_path / "old.pt"),
                                  *TINY], capture_output=True, text=True, cwd=ROOT)
            for task in ("G1WalkFlat", "examples.custom_task:G1WalkEager")}
    assert runs["G1WalkFlat"].returncode == 2, runs["G1WalkFlat"].stderr[-2000:]
    assert "start from a checkpoint of Motrix/G1WalkEager-v0, which it does not describe: unknown task" in (
        runs["G1WalkFlat"].stderr)
    assert runs["examples.custom_task:G1WalkEager"].returncode == 0, runs["examples.custom_task:G1WalkEager"].stderr
    run = subprocess.run([*CLI, "train", "Go1WalkFlat", "--iterations", "1", "--no-compile", "--log-dir",
                          str(logs), "--start-from", str(ckpt)], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and "trained on Motrix/G1WalkEager-v0 (Unitree G1 29-DoF)" in run.stderr, run.stderr
    run = subprocess.run([*CLI, "list", "examples.custom_task"], capture_output=True, text=True, cwd=ROOT)
    lines = run.stdout.splitlines()
    assert run.returncode == 0 and any(line.startswith("Motrix/G1WalkEager-v0 ") for line in lines), run.stderr[-2000:]
    assert lines[-1] == "  mode, command: G1WalkEager"  # its builder's options


@pytest.mark.parametrize("argv, message", [
    (["run", "no_such_module:G1WalkEager"], "importing 'no_such_module' failed: ModuleNotFoundError"),
    (["run", "examples.custom_task:NoSuchTask"], "unknown task 'NoSuchTask'; registered: G1WbtDance"),
    (["list", "no_such_module"], "importing 'no_such_module' failed"),
    (["bench", "examples.custom_task:G1WalkEager", "--startup"], "built-in tasks only"),
])
def test_a_task_module_that_does_not_serve_is_a_one_line_cli_error(argv, message):
    run = subprocess.run([*CLI, *argv], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize("args, kwargs, error, message", [
    (("G1WalkFlat", "m:f"), {"ppo": "m:p"}, ValueError, "'G1WalkFlat' is a built-in task"),
    (("My-Task", "m:f"), {"ppo": "m:p"}, ValueError, "letters, digits and underscores"),
    (("MyTask", "not a reference"), {"ppo": "m:p"}, TypeError, "builder must be a callable"),
    (("MyTask", "m:f"), {"ppo": {"learning_rate": 1e-3}}, TypeError, "ppo must be a PpoConfig"),
    (("MyTask", "m:f"), {"ppo": "m:p", "robot": None}, TypeError, "robot and family must be strings"),
])
def test_register_task_refuses_what_it_cannot_serve_and_registers_nothing(args, kwargs, error, message):
    before = (dict(TASKS), set(gym.registry))
    with pytest.raises(error, match=message):
        register_task(*args, **kwargs)
    assert (dict(TASKS), set(gym.registry)) == before
    assert tuple(TASKS) == BUILTIN


def test_a_builder_with_keyword_arguments_gets_the_options_it_passes_on_and_a_name_registered_again_is_replaced():
    from motrix_gym.envs.walk.rl_cfg import WALK
    from motrix_gym.envs.walk.velocity import g1_flat

    register_task("G1Forwarded", lambda **options: g1_flat(**options), ppo=WALK)
    try:
        env = gym.make_vec(env_id("G1Forwarded"), num_envs=1, compile=False, progress=False, command=(0.5, 0, 0))
        env.close()
        with pytest.raises(TypeError, match="unexpected keyword argument 'sampling'"):
            gym.make_vec(env_id("G1Forwarded"), num_envs=1, compile=False, progress=False, sampling="uniform")
        register_task("G1Forwarded", lambda: {"name": "G1Forwarded"}, ppo=WALK)
        with pytest.raises(TypeError, match="the builder of Motrix/G1Forwarded-v0 returned a dict, not a TaskConfig"):
            gym.make_vec(env_id("G1Forwarded"), num_envs=1, compile=False, progress=False)
        register_task("G1Forwarded", "motrix_gym.envs.walk.velocity:t1_flat", ppo=WALK)  # a notebook cell run again
        env = gym.make_vec(env_id("G1Forwarded"), num_envs=1, compile=False, progress=False)
        assert env.single_action_space.shape == (29,) and env.unwrapped.task.scene.robot.name == "t1"
        env.close()
    finally:
        TASKS.pop("G1Forwarded")
        gym.registry.pop(env_id("G1Forwarded"))


def test_startup_times_refuses_a_task_its_fresh_processes_cannot_import(eager, tmp_path, monkeypatch):
    import tempfile

    from motrix_gym.bench import startup_times

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ValueError, match="built-in tasks only, not Motrix/G1WalkEager-v0"):
        startup_times(eager.ENV_ID, 8, new_lanes=())
    assert not list(tmp_path.iterdir())  # refused before any process or cache folder was made

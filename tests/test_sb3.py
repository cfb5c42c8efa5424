"""Stable-Baselines3 through the adapter: real PPO training, VecMonitor, VecNormalize."""

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize

from conftest import ENV_ID, make, needs_gl
from motrix_gym.integrations.sb3 import Sb3VecEnv, make_sb3


def test_ppo_trains_under_vecmonitor_and_evaluates(tmp_path):
    venv = VecMonitor(make_sb3(ENV_ID, num_envs=16, compile=False))
    assert isinstance(venv.unwrapped, VecEnv)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=1024, n_epochs=2, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), []))  # SB3's default logger leaves a folder in the system temp dir
    model.learn(total_timesteps=4096)
    assert model.num_timesteps >= 4096
    mean, std = evaluate_policy(model, venv, n_eval_episodes=4)
    assert np.isfinite(mean) and np.isfinite(std)
    venv.close()


def test_step_infos_and_seeding():
    venv = make_sb3(ENV_ID, num_envs=4, compile=False)
    venv.seed(5)
    first = venv.reset()
    venv.seed(5)
    np.testing.assert_array_equal(venv.reset(), first)
    assert first.dtype == np.float32
    ended = 0
    rng = np.random.default_rng(0)
    for _ in range(120):
        obs, rew, dones, infos = venv.step(rng.standard_normal((4, 29)).astype(np.float32) * 1.5)
        assert rew.dtype == np.float32 and dones.dtype == np.bool_ and len(infos) == 4
        for i in np.flatnonzero(dones):
            assert infos[i]["terminal_observation"].shape == (98,)
            assert isinstance(infos[i]["TimeLimit.truncated"], bool)
            ended += 1
        for i in np.flatnonzero(~dones):
            assert "terminal_observation" not in infos[i]
    assert ended > 0
    assert venv.get_attr("num_envs") == [4] * 4
    venv.set_attr("render_markers", False)
    assert venv.get_attr("render_markers") == [False] * 4
    with pytest.raises(AttributeError, match="'num_envs' is fixed when the env is made"):
        venv.set_attr("num_envs", 2)
    assert venv.env_is_wrapped(VecMonitor) == [False] * 4
    assert venv.env_method("render") == [None] * 4  # render_mode is None
    venv.close()


def test_vecnormalize_runs():
    venv = VecNormalize(make_sb3(ENV_ID, num_envs=4, compile=False))
    venv.reset()
    for _ in range(10):
        obs, rew, *_ = venv.step(np.zeros((4, 29), np.float32))
    assert np.isfinite(obs).all() and np.isfinite(rew).all()
    venv.close()


def test_rejects_unsupported_envs():
    with pytest.raises(ValueError, match="SAME_STEP"):
        Sb3VecEnv(make(2, output="torch"))


def test_make_sb3_refuses_torch_outputs_before_building():
    # an unknown id would fail when the env is built: the adapter's error comes first
    with pytest.raises(ValueError, match="Sb3VecEnv needs output='numpy', got 'torch'"):
        make_sb3("Motrix/Nope-v0", num_envs=2, output="torch")


@needs_gl
def test_sb3_render_tiles_a_frame_per_lane():
    venv = make_sb3(ENV_ID, num_envs=4, compile=False, render_mode="rgb_array", width=32, height=24)
    venv.reset()
    assert venv.render_mode == "rgb_array" and len(venv.get_images()) == 4
    assert venv.render().shape == (48, 64, 3)  # SB3 tiles the lanes' frames 2 x 2
    venv.close()

"""rsl_rl's OnPolicyRunner trains through the adapter."""

import re

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode
from rsl_rl.runners import OnPolicyRunner

from conftest import ENV_ID
from motrix_gym.integrations.rsl_rl import RslRlVecEnv, make_rsl_rl

TRAIN_CFG = {
    "num_steps_per_env": 16,
    "save_interval": 100,
    "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2, "learning_rate": 1e-3},
    "actor": {"class_name": "MLPModel", "hidden_dims": [64, 64], "activation": "elu",
              "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
    "critic": {"class_name": "MLPModel", "hidden_dims": [64, 64], "activation": "elu"},
    "multi_gpu": None,
}


def test_on_policy_runner_two_iterations(tmp_path):
    torch.manual_seed(0)  # the runner draws its random initial episode lengths from torch
    env = make_rsl_rl(ENV_ID, num_envs=16, compile=False)
    obs = env.get_observations()
    assert set(obs.keys()) == {"policy", "critic"} and obs["policy"].shape == (16, 98)
    runner = OnPolicyRunner(env, TRAIN_CFG, log_dir=str(tmp_path), device="cpu")
    runner.learn(num_learning_iterations=2, init_at_random_ep_len=True)
    assert runner.current_learning_iteration == 1
    assert any(p.name.startswith("model_") for p in tmp_path.iterdir())
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):  # large actions: episodes end within a few dozen steps
        _, rew, dones, extras = env.step(3.0 * torch.randn(16, 29, generator=gen))
        assert extras["time_outs"].dtype == torch.bool and rew.dtype == torch.float32
        if dones.any():
            break
    assert dones.any() and "Episode_Reward/track_lin_vel" in extras["log"]
    env.close()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"output": "numpy"}, "RslRlVecEnv needs output='torch', got 'numpy'"),
    ({"autoreset_mode": AutoresetMode.NEXT_STEP}, "RslRlVecEnv needs autoreset_mode=<AutoresetMode.SAME_STEP"),
    ({"autoreset_mode": "Disabled"}, "got 'Disabled'"),
])
def test_make_rsl_rl_refuses_other_outputs_before_building(kwargs, message):
    # an unknown id would fail when the env is built: the adapter's error comes first
    with pytest.raises(ValueError, match=re.escape(message)):
        make_rsl_rl("Motrix/Nope-v0", num_envs=2, **kwargs)


def test_make_rsl_rl_takes_the_settings_it_needs_when_named():
    env = make_rsl_rl(ENV_ID, num_envs=2, compile=False, progress=False, output="torch", autoreset_mode="SameStep")
    assert env.get_observations()["policy"].shape == (2, 98)
    env.close()
    plain = gym.make_vec(ENV_ID, num_envs=2, compile=False, progress=False, output="torch",
                         autoreset_mode=AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="RslRlVecEnv needs output='torch' and autoreset_mode=SAME_STEP, got "
                                         "output='torch' and autoreset_mode=NEXT_STEP"):
        RslRlVecEnv(plain)
    plain.close()

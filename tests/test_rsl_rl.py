"""rsl_rl's OnPolicyRunner trains through the adapter."""

import torch
from rsl_rl.runners import OnPolicyRunner

from conftest import ENV_ID
from motrix_gym.integrations.rsl_rl import make_rsl_rl

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

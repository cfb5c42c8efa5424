"""skrl plugs in unchanged: ``wrap_env`` over the native vector env, trained for a few updates
of skrl's PPO agent by its SequentialTrainer (numpy and torch outputs)."""

import gymnasium as gym
import pytest
import torch

from conftest import ENV_ID

pytest.importorskip("skrl")  # the optional extra "skrl"; the test extra installs it

from skrl.agents.torch.ppo import PPO, PPO_CFG  # noqa: E402
from skrl.envs.wrappers.torch import wrap_env  # noqa: E402
from skrl.memories.torch import RandomMemory  # noqa: E402
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model  # noqa: E402
from skrl.trainers.torch import SequentialTrainer  # noqa: E402


def mlp(n_in: int, n_out: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(n_in, 64), torch.nn.ELU(), torch.nn.Linear(64, n_out))


class Policy(GaussianMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        GaussianMixin.__init__(self)
        self.net = mlp(self.num_observations, self.num_actions)
        self.log_std = torch.nn.Parameter(torch.zeros(self.num_actions))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, device):
        Model.__init__(self, observation_space=observation_space, device=device)
        DeterministicMixin.__init__(self)
        self.net = mlp(self.num_observations, 1)

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


@pytest.mark.parametrize("output", ["numpy", "torch"])
def test_wrap_env_ppo_updates(output, tmp_path):
    torch.manual_seed(0)
    env = wrap_env(gym.make_vec(ENV_ID, num_envs=8, compile=False, output=output))
    assert env.num_envs == 8 and env.observation_space.shape == (98,)
    models = {"policy": Policy(env.observation_space, env.action_space, env.device),
              "value": Value(env.observation_space, env.device)}
    cfg = PPO_CFG(rollouts=16, learning_epochs=2, mini_batches=2)
    cfg.experiment.directory = str(tmp_path)
    agent = PPO(models=models, memory=RandomMemory(memory_size=16, num_envs=8, device=env.device),
                observation_space=env.observation_space, action_space=env.action_space, device=env.device, cfg=cfg)
    before = [p.clone() for p in models["policy"].parameters()]
    # skrl's default trainer settings (not headless) render through the vector env's call("render")
    SequentialTrainer(env=env, agents=agent, cfg={"timesteps": 64, "disable_progressbar": True,
                                                  "close_environment_at_exit": False}).train()
    assert all(not torch.equal(a, b) for a, b in zip(before, models["policy"].parameters()))
    obs, _ = env.reset()
    assert torch.isfinite(obs).all() and obs.shape == (8, 98)
    env.close()

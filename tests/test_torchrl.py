"""TorchRL plugs in unchanged: ``GymWrapper`` over the native vector env and ``GymEnv`` by id,
each rolled out and trained for a few PPO updates with TorchRL's own collector and loss."""

import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode

from conftest import ENV_ID

torchrl = pytest.importorskip("torchrl")  # the optional extra "torchrl"; the test extra installs it

from tensordict.nn import TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs import GymWrapper  # noqa: E402
from torchrl.modules import NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator  # noqa: E402
from torchrl.objectives import ClipPPOLoss  # noqa: E402
from torchrl.objectives.value import GAE  # noqa: E402


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_gym_wrapper_ppo_updates(mode):
    torch.manual_seed(0)
    env = GymWrapper(gym.make_vec(ENV_ID, num_envs=8, compile=False, autoreset_mode=mode))
    assert env.batch_size == (8,)
    obs_dim, act_dim = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    net = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 2 * act_dim), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
                               spec=env.action_spec, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               distribution_kwargs={"low": -5.0, "high": 5.0}, return_log_prob=True)
    value = ValueOperator(nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 1)), in_keys=["observation"])
    loss, advantage = ClipPPOLoss(actor, value), GAE(gamma=0.99, lmbda=0.95, value_network=value)
    opt = torch.optim.Adam(loss.parameters(), 3e-4)
    before = [p.clone() for p in loss.parameters()]
    collector = Collector(env, actor, frames_per_batch=8 * 32, total_frames=8 * 32 * 3,
                          auto_register_policy_transforms=False)
    done = 0
    for batch in collector:
        assert batch.shape == (8, 32) and torch.isfinite(batch["next", "observation"]).all()
        done += int(batch["next", "done"].sum())
        advantage(batch)
        out = loss(batch.reshape(-1))
        opt.zero_grad()
        (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()
        opt.step()
    collector.shutdown()
    assert done > 0  # episodes ended and the env reset them under TorchRL's bookkeeping
    assert all(not torch.equal(a, b) for a, b in zip(before, loss.parameters()))


def test_gym_env_by_id_with_num_envs(tmp_path):
    """``GymEnv(id, num_envs=N)`` runs N single-lane envs in worker processes that TorchRL spawns;
    the script that imports motrix_gym registers the ids in each worker, as a user's script does."""
    script = tmp_path / "rollout.py"
    script.write_text(textwrap.dedent(f"""
        import torch
        import motrix_gym  # noqa: F401
        from torchrl.envs import GymEnv

        if __name__ == "__main__":
            env = GymEnv("{ENV_ID}", num_envs=2)
            td = env.rollout(40, break_when_any_done=False)
            assert td["next", "reward"].shape == (2, 40, 1) and torch.isfinite(td["next", "observation"]).all()
            env.close()
            print("ok")
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]

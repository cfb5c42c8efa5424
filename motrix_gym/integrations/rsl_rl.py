"""rsl_rl adapter: the ``rsl_rl.env.VecEnv`` interface that Isaac Lab and mjlab users train with.

    from rsl_rl.runners import OnPolicyRunner
    from motrix_gym.integrations.rsl_rl import make_rsl_rl

    env = make_rsl_rl("Motrix/G1WalkFlat-v0", num_envs=4096)
    OnPolicyRunner(env, train_cfg, log_dir="logs").learn(1500)

Torch end to end (``output="torch"``), observation groups ``policy`` and ``critic`` as a
TensorDict, time-outs in ``extras["time_outs"]`` for bootstrapping and the env's aggregates
(``Episode_Reward/<term>``, ...) in ``extras["log"]``.
"""

from __future__ import annotations

from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from motrix_gym.integrations import make_vec, motrix_base
from motrix_gym.vector_env import MotrixVectorEnv


class RslRlVecEnv(VecEnv):
    """Wraps a torch-output, SAME_STEP ``MotrixVectorEnv`` whose groups include ``policy``."""

    def __init__(self, env: MotrixVectorEnv, seed: int = 0) -> None:
        base = motrix_base(env, "RslRlVecEnv", "torch")
        self.env = base
        self.num_envs = base.num_envs
        self.num_actions = base.single_action_space.shape[0]
        self.max_episode_length = base.task.max_episode_steps
        self.device = base.device
        self.cfg = base.task
        self._obs = self._pack(base.reset(seed=seed)[0])

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Steps since each lane's reset (a view; assigning writes into the env's counters)."""
        return self.env.runtime.ctx.episode_step[: self.num_envs]

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.runtime.ctx.episode_step[: self.num_envs].copy_(value)

    def _pack(self, obs: Any) -> TensorDict:
        groups = obs if isinstance(obs, dict) else {self.env.obs_groups[0]: obs}
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def reset(self) -> tuple[TensorDict, dict]:
        """Every lane starts a new episode (the lane RNG streams go on), as Isaac Lab's wrapper
        resets: the observations, and no extras."""
        self._obs = self._pack(self.env.reset()[0])
        return self._obs, {}

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        obs, rew, term, trunc, _ = self.env.step(actions)
        self._obs = self._pack(obs)
        extras = {"time_outs": trunc, "log": dict(self.env.log)}
        return self._obs, rew, term | trunc, extras

    def close(self) -> None:
        self.env.close()


def mirror_augmentation(env: RslRlVecEnv, obs: TensorDict | None = None,
                        actions: torch.Tensor | None = None) -> tuple[TensorDict | None, torch.Tensor | None]:
    """rsl_rl's symmetry ``data_augmentation_func`` (``PpoConfig.symmetry_augmentation``,
    ``symmetry_loss_coef``): ``obs`` and ``actions`` each followed by their reflection through
    the robot's sagittal plane (``manager/symmetry.py``), twice the batch; None stays None."""
    mirror = env.env.runtime.mirror()
    if obs is not None:
        reflected = TensorDict({g: mirror.observations[g](x) for g, x in obs.items()}, batch_size=obs.batch_size,
                               device=obs.device)
        obs = torch.cat([obs, reflected])
    if actions is not None:
        actions = torch.cat([actions, mirror.action(actions)])
    return obs, actions


def make_rsl_rl(env_id: str, num_envs: int, seed: int = 0, **kwargs: Any) -> RslRlVecEnv:
    """``gym.make_vec`` with torch outputs and both observation groups, wrapped for rsl_rl."""
    kwargs.setdefault("obs_groups", ("policy", "critic"))
    return RslRlVecEnv(make_vec("RslRlVecEnv", env_id, num_envs, "torch", kwargs), seed=seed)

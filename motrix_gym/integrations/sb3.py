"""Stable-Baselines3 adapter: a real ``stable_baselines3.common.vec_env.VecEnv``.

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from motrix_gym.integrations.sb3 import make_sb3

    venv = VecMonitor(make_sb3("Motrix/G1WalkFlat-v0", num_envs=16))
    PPO("MlpPolicy", venv).learn(10_000)

SB3 needs numpy observations and its own info layout: for lanes that ended, ``infos[i]`` holds
``terminal_observation`` and ``TimeLimit.truncated`` (plus motrix-gym's ``reward_terms`` and
``termination_terms``). Seeding: ``seed(s)`` then ``reset()`` seeds every lane from ``s`` (lane i
draws stream ``(s, i)``, not SB3's ``s + i``: one int seeds the whole batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from motrix_gym.integrations import make_vec, motrix_base
from motrix_gym.vector_env import MotrixVectorEnv


class Sb3VecEnv(VecEnv):
    """Wraps a numpy-output, SAME_STEP ``MotrixVectorEnv`` for SB3."""

    def __init__(self, env: MotrixVectorEnv) -> None:
        base = motrix_base(env, "Sb3VecEnv", "numpy")
        self.env = base
        self.render_mode = base.render_mode
        self._actions: np.ndarray | None = None
        super().__init__(base.num_envs, base.single_observation_space, base.single_action_space)

    def reset(self) -> Any:
        seed = self._seeds[0]
        if any(o for o in self._options):
            raise ValueError(f"motrix-gym takes no reset options through SB3, got {self._options[0]}")
        obs, _ = self.env.reset(seed=seed)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        obs, rew, term, trunc, info = self.env.step(self._actions)
        self._actions = None
        dones = term | trunc
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            final = info["final_info"]
            for i in np.flatnonzero(dones):
                infos[i] = {
                    "terminal_observation": info["final_obs"][i],
                    "TimeLimit.truncated": bool(trunc[i] and not term[i]),
                    "reward_terms": {k: float(v[i]) for k, v in final["reward_terms"].items()},
                    "termination_terms": {k: bool(v[i]) for k, v in final["termination_terms"].items()},
                }
        return obs, rew, dones, infos

    def close(self) -> None:
        self.env.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        frames = self.env.render()  # one per lane, each drawn when read
        return [None] * self.num_envs if frames is None else frames

    # The lanes share one env: attributes and methods are the env's, reported once per lane.
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.env, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        idx = list(self._get_indices(indices))
        if len(idx) != self.num_envs:
            raise ValueError("attributes are shared by all lanes: set them for every index")
        self.env.set_attr(attr_name, value)  # the env's settings that may change, checked

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]  # lanes are never gymnasium-wrapped


def make_sb3(env_id: str, num_envs: int, **kwargs: Any) -> Sb3VecEnv:
    """``gym.make_vec(env_id, num_envs, **kwargs)`` wrapped for SB3."""
    return Sb3VecEnv(make_vec("Sb3VecEnv", env_id, num_envs, "numpy", kwargs))

"""MotrixEnv: a single-lane ``gymnasium.Env`` view of a task, for notebooks and checkers.

    env = gym.make("Motrix/G1WalkFlat-v0")
    obs, info = env.reset(seed=0)

It runs one lane of :class:`MotrixVectorEnv` (eager by default) without autoreset: after an
episode ends, call ``reset()``. ``lane_offset`` selects the lane's global RNG stream, so lane
``i`` of a vector env and ``MotrixEnv(lane_offset=i)`` produce the same episode for the same seed.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from motrix_gym.manager.config import TaskConfig
from motrix_gym.vector_env import MotrixVectorEnv


class MotrixEnv(gymnasium.Env):
    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 50}

    def __init__(self, task: str | TaskConfig, *, render_mode: str | None = None, compile: bool = False,
                 obs_groups: tuple[str, ...] | str = ("policy",), lane_offset: int = 0,
                 nthread: int | None = 1, width: int | None = None, height: int | None = None,
                 render_markers: bool = True,
                 backend: str = "mujoco", **task_options: Any) -> None:
        fixed = sorted(set(task_options) & {"num_envs", "autoreset_mode"})
        if fixed:
            raise TypeError(f"{fixed[0]!r} is not an option of the single-lane env (one lane, no autoreset); "
                            "use gymnasium.make_vec(id, num_envs=N, ...) for lanes and autoreset modes")
        self.vec = MotrixVectorEnv(task, 1, compile=compile, obs_groups=obs_groups, lane_offset=lane_offset,
                                   autoreset_mode=AutoresetMode.DISABLED, render_mode=render_mode,
                                   nthread=nthread, width=width, height=height, render_markers=render_markers,
                                   backend=backend, **task_options)
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self.vec.task.step_dt)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if not (options is None or isinstance(options, dict)):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}")
        obs, info = self.vec.reset(seed=seed)
        self._np_random, self._np_random_seed = self.vec.np_random, self.vec.np_random_seed  # the lane's seed
        return self._one(obs), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        action = np.asarray(action)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {action.shape}")
        obs, rew, term, trunc, info = self.vec.step(action[None])
        info = {k: v for k, v in info.items() if not k.startswith("_")}
        info = {k: ({kk: vv[0] for kk, vv in v.items()} if isinstance(v, dict) else v[0]) for k, v in info.items()}
        return self._one(obs), float(rew[0]), bool(term[0]), bool(trunc[0]), info

    def render(self) -> np.ndarray | None:
        frames = self.vec.render()
        return None if frames is None else frames[0]

    def close(self) -> None:
        self.vec.close()

    @staticmethod
    def _one(obs: Any) -> Any:
        return {k: v[0] for k, v in obs.items()} if isinstance(obs, dict) else obs[0]

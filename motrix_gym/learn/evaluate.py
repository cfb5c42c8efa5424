"""A policy against uniform random and zero actions, measured the same way: ``train``'s final
comparison, and ``python -m motrix_gym evaluate`` for a checkpoint.

Each is run on a fresh env of ``lanes`` lanes made with the same seed (so the same initial
states), until every lane's first episode has ended; the figures are over those first episodes:
mean return, mean length in steps, and each reward term's mean per env step (weight and step_dt
included, as the env adds it to the reward).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from motrix_gym.runtime.rng import LaneRng

Act = Callable[[TensorDict], torch.Tensor]


def start_episodes(policy: Any, dones: torch.Tensor | None = None) -> None:
    """Zero a recurrent policy's state (an rsl_rl model's) for the lanes whose episodes start:
    those ``dones`` marks, or every lane (its state then takes the size of the next batch of
    lanes it reads). Nothing for a policy without one."""
    if getattr(policy, "is_recurrent", False):
        policy.reset(dones)


def first_episodes(env_id: str, act: Act, lanes: int = 64, seed: int = 0, **make: Any) -> dict[str, Any]:
    """Figures of the first episode of every lane under ``act`` (observations -> actions; a
    recurrent policy starts each episode from a zero state)."""
    from motrix_gym.integrations.rsl_rl import make_rsl_rl

    make = {"compile": False, "progress": False, **make}
    env = make_rsl_rl(env_id, num_envs=lanes, seed=seed, **make)
    rt = env.env.runtime
    dev = env.device
    ret = torch.zeros(lanes, device=dev)
    length = torch.zeros(lanes, dtype=torch.long, device=dev)
    alive = torch.ones(lanes, dtype=torch.bool, device=dev)
    terms = torch.zeros(len(rt.reward_names), dtype=torch.float64, device=dev)
    try:
        start_episodes(act)
        obs = env.get_observations()
        for _ in range(env.max_episode_length + 1):
            with torch.inference_mode():
                actions = act(obs)
                obs, rewards, dones, _ = env.step(actions)
                start_episodes(act, dones)
            ret += torch.where(alive, rewards, 0.0)
            length += alive.long()
            terms += (rt.reward_terms[:lanes] * alive.unsqueeze(-1).to(rt.device)).sum(0).double().to(dev)
            alive &= ~dones
            if not alive.any():
                break
    finally:
        env.close()
    steps = int(length.sum())
    return {"lanes": lanes, "mean_return": float(ret.mean()), "mean_episode_length": float(length.float().mean()),
            "unfinished_lanes": int(alive.sum()),
            "reward_terms": {n: float(t) / steps for n, t in zip(rt.reward_names, terms)}}


# random actions' lane streams are seeded with the env's seed xor this, so that they are not the
# env's own lane streams (seeded with that seed)
ACTION_STREAMS = 0x5EED_AC71


class RandomActions:
    """Actions uniform in ``[low, high]`` (one lane's bounds), lane ``i``'s from its own stream
    (``LaneRng``, of ``seed`` and the lane's number), so that a lane acts alike beside any number
    of others. Each call draws one step's actions for ``lanes`` lanes, the first call's count."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor, seed: int) -> None:
        self.low, self.high, self.seed = low, high, seed
        self.rng: LaneRng | None = None

    def __call__(self, lanes: int, device: torch.device | str = "cpu") -> torch.Tensor:
        if self.rng is None:
            self.rng = LaneRng(lanes, device)
            self.rng.seed(self.seed ^ ACTION_STREAMS, torch.arange(lanes, device=device))
        return self.rng.range(self.low.to(device), self.high.to(device), tuple(self.low.shape))


BASELINES = ("random", "zero")  # what a trained policy is compared with


def baselines(space: Any, seed: int) -> dict[str, Act]:
    """Uniform random actions over ``space`` (one lane's action space, a ``Box``; each lane's from
    its own stream: ``RandomActions``), and zero actions (the default pose)."""
    draw = RandomActions(torch.as_tensor(space.low), torch.as_tensor(space.high), seed)

    def random(obs: TensorDict) -> torch.Tensor:
        return draw(obs.batch_size[0], obs.device)

    def zero(obs: TensorDict) -> torch.Tensor:
        return torch.zeros(obs.batch_size[0], *space.shape, device=obs.device)

    return {"random": random, "zero": zero}


def task_action_space(env_id: str, **make: Any) -> Any:
    """One lane's action space of ``env_id`` made with ``make``, read from a one-lane env."""
    import gymnasium as gym

    import motrix_gym  # noqa: F401  (registers the ids)

    probe = gym.make_vec(env_id, num_envs=1, compile=False, progress=False, **make)
    try:
        return probe.single_action_space
    finally:
        probe.close()


def evaluate(env_id: str, policy: Act | None, lanes: int = 64, seed: int = 0, progress: bool = True,
             action_space: Any = None, **make: Any) -> dict[str, dict[str, Any]]:
    """``first_episodes`` of ``policy`` (its deterministic output; skipped when None), random and
    zero actions. ``action_space``: the task's (one lane's), where the caller has it at hand;
    otherwise a one-lane env is made to read it."""
    from tqdm import tqdm

    acts: dict[str, Act] = {} if policy is None else {"policy": policy}
    acts.update(baselines(task_action_space(env_id, **make) if action_space is None else action_space, seed))
    out = {}
    for name, act in tqdm(acts.items(), desc=f"evaluate {env_id}", unit="policy", disable=not progress, leave=False):
        out[name] = first_episodes(env_id, act, lanes, seed, **make)
    return out


def evaluate_checkpoint(env_id: str, path: str | Path, lanes: int = 64, seed: int = 1, progress: bool = True,
                        task_options: Mapping[str, Any] | None = None, device: str = "cpu") -> dict[str, Any]:
    """``evaluate`` of the policy of checkpoint ``path`` (a run's folder: its last; or an exported
    ``.onnx`` file) on ``env_id``
    made with ``task_options`` (``overrides`` included): its task or another of its robot whose
    observations include the policy's (``play.check_policy``). With the run's seed + 1, its lanes
    and the options and overrides of its final comparison, the figures are that comparison's."""
    from motrix_gym.arguments import is_int
    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn import checkpoint
    from motrix_gym.learn.play import open_policy, ready_policy
    from motrix_gym.registry import check_id, check_task_options
    from motrix_gym.runtime.rng import check_seed

    check_id(env_id)
    if not (is_int(lanes) and lanes >= 1):
        raise ValueError(f"lanes must be an int >= 1, got {lanes!r}")
    check_seed(seed)
    options = check_task_options(task_options)
    path = checkpoint.resolve(path)
    source, _ = open_policy(path, env_id, options, "evaluate")
    probe = make_rsl_rl(env_id, num_envs=1, compile=False, progress=False, device=device, **options)
    try:
        policy, _ = ready_policy(source, probe, env_id, "evaluate")
        actions = probe.env.single_action_space
    finally:
        probe.close()
    return {"checkpoint": str(path), "env_id": env_id, "lanes": lanes, "seed": seed, "task_options": options,
            "eval": evaluate(env_id, policy, lanes, seed, progress, action_space=actions, device=device, **options)}

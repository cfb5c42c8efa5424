"""``python -m motrix_gym dataset``: a trained policy's episodes, or random or zero actions', as a
Minari dataset (``integrations/minari.py``), for offline RL and imitation learning."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from motrix_gym.learn.evaluate import BASELINES, baselines, start_episodes, task_action_space

ROWS = 64  # the block a feed-forward policy's actions are computed in (``checkpoint_policy``)


def checkpoint_policy(path: Path, env_id: str, options: Mapping[str, Any],
                      device: str = "cpu") -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], None]]:
    """The deterministic policy of ``path`` (a checkpoint or an exported ``.onnx``, checked for
    ``env_id`` made with ``options`` as ``play`` checks it) over numpy observations of the
    policy group, and what zeroes a recurrent policy's state where episodes start."""
    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn.onnx_policy import OnnxPolicy
    from motrix_gym.learn.play import open_policy, ready_policy

    source, _ = open_policy(path, env_id, options, "record")
    probe = make_rsl_rl(env_id, num_envs=1, compile=False, progress=False, device=device, **options)
    try:
        policy, _ = ready_policy(source, probe, env_id, "record")
    finally:
        probe.close()

    def batch(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            groups = TensorDict({"policy": torch.from_numpy(obs).to(device)}, batch_size=[obs.shape[0]])
            return policy(groups).cpu().numpy()

    def act(obs: np.ndarray) -> np.ndarray:
        """A feed-forward network's actions in blocks of ``ROWS`` rows (the last padded): a
        matrix product rounds a row at one place of a block of one size alike whatever the other
        rows hold, but may round it otherwise in a batch of another size; so lane i acts alike
        beside any number of lanes. A recurrent policy keeps one state per lane of the whole
        batch, and an exported file runs one lane per call: both see the batch as it is."""
        if getattr(policy, "is_recurrent", False) or isinstance(policy, OnnxPolicy):
            return batch(obs)
        padded = np.concatenate([obs, np.zeros((-len(obs) % ROWS, obs.shape[1]), obs.dtype)])
        return np.concatenate([batch(padded[k:k + ROWS]) for k in range(0, len(padded), ROWS)])[: len(obs)]

    def starts(mask: np.ndarray) -> None:
        if mask.any():
            with torch.inference_mode():  # the state is an inference tensor, as the policy made it
                start_episodes(policy, None if mask.all() else torch.from_numpy(mask).to(device))

    return act, starts


def record(env_id: str, dataset_id: str, policy: str | Path, episodes: int, lanes: int = 64, seed: int = 0,
           task_options: Mapping[str, Any] | None = None, progress: bool = True, **metadata: Any) -> Any:
    """The Minari dataset ``dataset_id`` of ``episodes`` episodes on ``env_id`` (made with
    ``task_options``, ``lanes`` lanes reset with ``seed``) of ``policy``: ``"random"``,
    ``"zero"`` or a checkpoint (a run's folder: its last; or an exported ``.onnx``).
    ``metadata`` go to Minari (``author``, ...); the algorithm's name and a description are
    filled in unless given."""
    import motrix_gym
    from motrix_gym.integrations.minari import record_dataset
    from motrix_gym.learn import checkpoint
    from motrix_gym.registry import check_id, check_task_options

    check_id(env_id)
    options = check_task_options(task_options)
    starts = None
    if isinstance(policy, str) and policy in BASELINES:
        baseline = baselines(task_action_space(env_id, **options), seed)[policy]

        def act(obs: np.ndarray) -> np.ndarray:
            return baseline(TensorDict({"policy": torch.from_numpy(obs)}, batch_size=[len(obs)])).numpy()
        what = {"random": "uniform random actions over the action space", "zero": "zero actions (the default pose)"}
        algorithm = what[policy]
    else:
        path = checkpoint.resolve(policy)
        act, starts = checkpoint_policy(path, env_id, options)
        algorithm = f"rsl_rl PPO, the deterministic policy of {path.parent.name}/{path.name}"
    metadata.setdefault("algorithm_name", algorithm)
    metadata.setdefault("description", f"{episodes} episodes of {algorithm} on {env_id}"
                        f"{f' made with {options}' if options else ''}: the first episodes of {lanes} lanes reset "
                        f"with seed {seed}, recorded by motrix-gym {motrix_gym.__version__}")
    return record_dataset(dataset_id, env_id, act, episodes, lanes, seed, options, episode_starts=starts,
                          progress=progress, **metadata)

"""Minari datasets of a policy's episodes, recorded from every lane of one batch at once.

    from motrix_gym.integrations.minari import record_dataset

    ds = record_dataset("motrix/go1walkflat/zero-v0", "Motrix/Go1WalkFlat-v0", lambda obs: 0 * obs[:, :12],
                        episodes=128, num_envs=64)
    env = ds.recover_environment()  # gym.make of the task as it was recorded

Each episode holds the policy group's observations (its last one the episode's final
observation), the actions as the env applied them (clipped to the action space), the rewards and
the termination and truncation flags: Minari's layout, as its own ``DataCollector`` records a
single env. Its ``infos["reward_terms"]`` hold each reward term per step (weight and step_dt
included; they sum to the reward) at the index of the observation the step returned (index 0,
the reset's, is zero), so that a dataset can be relabelled with other weights.

Lane ``i`` records its first ``k_i`` episodes, ``k_i`` being ``episodes // num_envs`` and one
more for the first ``episodes % num_envs`` lanes, and the dataset lists them lane by lane: which
episodes a dataset holds does not depend on which lanes end theirs first (stopping at the first
``episodes`` to end would favour short ones), so the same seed, lanes and policy record the same
dataset. Lanes that recorded theirs keep stepping until every lane has; a recording keeps each
lane's current episode in memory (lanes x episode length x observation size).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from motrix_gym.arguments import is_int
from motrix_gym.integrations import motrix_base
from motrix_gym.sim.backend import MissingExtra
from motrix_gym.vector_env import MotrixVectorEnv

Policy = Callable[[np.ndarray], Any]  # observations (lanes, obs_dim) -> actions (lanes, action_dim)
# Minari's storage formats, each with the package it needs and Minari's extra that installs it
FORMATS = {"hdf5": ("h5py", "hdf5"), "arrow": ("pyarrow", "arrow"), "parquet": ("pyarrow", "arrow")}


class DatasetError(ValueError):
    """A dataset id that Minari cannot take, or that names a dataset which exists already."""


def check_dataset_id(dataset_id: Any) -> None:
    """A DatasetError unless ``dataset_id`` has the form Minari gives ids: ``NAMESPACE/NAME-vVERSION``
    (the namespace optional)."""
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        parse_dataset_id(dataset_id)
    except (ValueError, TypeError):  # Minari's parser raises TypeError where the version is missing
        raise DatasetError("a Minari dataset id has the form NAMESPACE/NAME-vVERSION (the namespace optional, "
                           "two or more of letters, digits, -, _ and /; the version a number), got "
                           f"{dataset_id!r}") from None


def _recorder_env(envs: Any) -> MotrixVectorEnv:
    base = motrix_base(envs, "record_episodes", None)
    if len(base.obs_groups) != 1:
        raise ValueError(f"record_episodes records one observation group, the env returns {list(base.obs_groups)}")
    return base


def _host(x: Any) -> np.ndarray:
    """An output of the env as a numpy array of its own (torch outputs: on the CPU)."""
    return x.detach().cpu().numpy().copy() if hasattr(x, "detach") else np.array(x)


def record_episodes(envs: Any, policy: Policy, episodes: int, seed: int = 0,
                    episode_starts: Callable[[np.ndarray], None] | None = None, progress: bool = False) -> list[Any]:
    """``episodes`` episodes of ``policy`` on ``envs`` (a ``MotrixVectorEnv``, SAME_STEP
    autoreset, one observation group), reset with ``seed``, as Minari ``EpisodeBuffer``s numbered
    lane by lane (module docstring). ``policy`` gets the observations the env returns (numpy or
    torch) and returns the actions. ``episode_starts``, when given, is told before each call of
    ``policy`` which lanes' observations start an episode (a bool array; every lane after the
    reset): a recurrent policy zeroes their state there. ``progress``: a bar of the episodes
    recorded."""
    from minari.data_collector import EpisodeBuffer
    from tqdm import tqdm

    base = _recorder_env(envs)
    if not (is_int(episodes) and episodes >= 1):
        raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
    if episode_starts is not None and not callable(episode_starts):
        raise TypeError(f"episode_starts must be None or a callable, got {episode_starts!r}")
    n, names = base.num_envs, base.runtime.reward_names
    low, high = base.single_action_space.low, base.single_action_space.high
    wanted = np.full(n, episodes // n)
    wanted[: episodes % n] += 1
    got = np.zeros(n, dtype=int)
    obs, _ = envs.reset(seed=seed)
    # every step since the oldest episode still recorded began: observation, action, reward,
    # terminated, truncated, reward terms, each (lanes, ...); steps[0] is env step ``first``
    steps: list[tuple[np.ndarray, ...]] = []
    first = 0
    start = np.zeros(n, dtype=int)  # the env step at which each lane's current episode began
    starts = np.ones(n, dtype=bool)
    found: dict[tuple[int, int], Any] = {}
    bar = tqdm(total=episodes, desc=f"record {base.spec.id if base.spec else 'episodes'}", unit="episode",
               disable=not progress, leave=False)
    while (got < wanted).any():
        if episode_starts is not None:
            episode_starts(starts.copy())
        actions = policy(obs)
        nxt, reward, terminated, truncated, info = envs.step(actions)
        # the env took the actions (it checks their shape and values): store them as it applied them
        applied = np.clip(_host(actions).astype(np.float32), low, high)
        terminated, truncated = _host(terminated), _host(truncated)
        steps.append((_host(obs), applied, _host(reward), terminated, truncated, _host(base.runtime.reward_terms[:n])))
        done = terminated | truncated
        for i in np.flatnonzero(done & (got < wanted)):  # the episodes that ended, not every lane
            seq = steps[start[i] - first:]
            terms = np.concatenate([np.zeros((1, len(names)), np.float32), np.stack([s[5][i] for s in seq])])
            found[(int(i), int(got[i]))] = EpisodeBuffer(
                observations=np.stack([s[0][i] for s in seq] + [_host(info["final_obs"][i])]),
                actions=np.stack([s[1][i] for s in seq]),
                rewards=[float(s[2][i]) for s in seq],
                terminations=[bool(s[3][i]) for s in seq],
                truncations=[bool(s[4][i]) for s in seq],
                infos={"reward_terms": dict(zip(names, terms.T))})
            got[i] += 1
            bar.update()
        start[done] = first + len(steps)
        starts = done
        obs = nxt
        recording = got < wanted
        oldest = int(start[recording].min()) if recording.any() else first + len(steps)
        del steps[: oldest - first]
        first = oldest
    bar.close()
    return [dataclasses.replace(found[key], id=k) for k, key in enumerate(sorted(found))]


def record_dataset(dataset_id: str, env_id: str, policy: Policy, episodes: int, num_envs: int = 64, seed: int = 0,
                   task_options: Mapping[str, Any] | None = None,
                   episode_starts: Callable[[np.ndarray], None] | None = None, data_format: str = "hdf5",
                   progress: bool = False, **metadata: Any) -> Any:
    """``record_episodes`` of ``policy`` on ``gym.make_vec(env_id, num_envs, **task_options)``
    (numpy outputs, eager runtime) as the local Minari dataset ``dataset_id`` (under
    ``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``), which this returns. The dataset's env,
    and the one it names for evaluation, is the task made with ``task_options``
    (``recover_environment`` makes it); ``metadata`` go to ``minari.create_dataset_from_buffers``
    (``algorithm_name``, ``author``, ``author_email``, ``code_permalink``, ``description``, ...).
    ``progress``: a bar of the episodes recorded. An id that exists already is refused before
    anything runs."""
    import minari
    from minari.storage import get_dataset_path

    import motrix_gym  # noqa: F401  (registers the ids)
    from motrix_gym.registry import check_id, check_task_options

    check_id(env_id)
    check_dataset_id(dataset_id)
    if get_dataset_path(dataset_id).exists():
        raise DatasetError(f"a Minari dataset {dataset_id!r} exists already at {get_dataset_path(dataset_id)}: "
                           "give another id or version")
    options = check_task_options(task_options)
    if data_format not in FORMATS:
        raise DatasetError(f"data_format must be one of {list(FORMATS)}, got {data_format!r}")
    module, extra = FORMATS[data_format]
    if importlib.util.find_spec(module) is None:  # else Minari fails after the recording, leaving a folder
        raise MissingExtra(f"Minari's {data_format} storage needs {module}: pip install \"minari[{extra}]\"")
    envs = gym.make_vec(env_id, num_envs=num_envs, compile=False, progress=False, **options)
    try:
        buffers = record_episodes(envs, policy, episodes, seed, episode_starts, progress)
    finally:
        envs.close()
    spec = gym.spec(env_id)
    spec = dataclasses.replace(spec, kwargs={**spec.kwargs, **options})
    metadata.setdefault("eval_env", spec)  # evaluate on the task as recorded
    return minari.create_dataset_from_buffers(dataset_id, buffers, env=spec, data_format=data_format, **metadata)

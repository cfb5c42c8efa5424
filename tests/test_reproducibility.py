"""Each sentence of docs/reproducibility.md, tested."""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TASK, make, random_actions
from motrix_gym.envs import TASKS, task_options
from motrix_gym.vector_env import MotrixVectorEnv

STEPS = 60


def lane_streams(mode: AutoresetMode, num_envs: int, seed: int, actions: np.ndarray,
                 lanes: int, task: str = TASK, **kwargs) -> list[list[np.ndarray]]:
    """Per lane, everything it produced in order, as one stream independent of the autoreset mode.

    The action of lane i is ``actions[k_i, i]`` with k_i the lane's count of real transitions, so
    a NEXT_STEP restart step (which ignores its action) does not shift the lane's actions.
    """
    env = MotrixVectorEnv(task, num_envs, compile=False, autoreset_mode=mode, **kwargs)
    obs, _ = env.reset(seed=seed)
    streams = [[obs[i]] for i in range(lanes)]
    k = np.zeros(num_envs, int)
    restarting = np.zeros(num_envs, bool)
    while k[:lanes].min() < len(actions) or restarting[:lanes].any():
        a = actions[np.minimum(k, len(actions) - 1), np.arange(num_envs) % actions.shape[1]]
        obs, rew, term, trunc, info = env.step(a)
        done = term | trunc
        recording = (k < len(actions)) | restarting  # a NEXT_STEP restart after the last action: its reset
        for i in range(lanes):
            if not recording[i]:
                continue
            s = streams[i]
            if not restarting[i]:
                s += [rew[i:i + 1], term[i:i + 1], trunc[i:i + 1]]
            if done[i] and mode is AutoresetMode.SAME_STEP:
                s.append(info["final_obs"][i])
            s.append(obs[i])
        if mode is AutoresetMode.DISABLED and done.any():
            obs, _ = env.reset(options={"reset_mask": done})
            for i in np.flatnonzero(done[:lanes]):
                if k[i] < len(actions):
                    streams[i].append(obs[i])
        k += ~restarting
        restarting = done & recording if mode is AutoresetMode.NEXT_STEP else np.zeros(num_envs, bool)
    env.close()
    return streams


def assert_streams_equal(a, b) -> None:
    assert len(a) == len(b)
    for lane_a, lane_b in zip(a, b):
        assert len(lane_a) == len(lane_b)
        for x, y in zip(lane_a, lane_b):
            np.testing.assert_array_equal(x, y)


@given(seed=st.integers(0, 2**63 - 1), sizes=st.sampled_from([(4, 16), (16, 64), (4, 64)]),
       nthread=st.sampled_from([(1, 2), (2, 1), (2, 2)]),
       mode=st.sampled_from(list(AutoresetMode)), action_seed=st.integers(0, 1000))
@settings(max_examples=6, deadline=None)
def test_lane_identical_across_num_envs_threads(seed, sizes, nthread, mode, action_seed):
    actions = random_actions(STEPS, 4, 29, seed=action_seed)
    small = lane_streams(mode, sizes[0], seed, actions, 4, nthread=nthread[0])
    big = lane_streams(mode, sizes[1], seed, actions, 4, nthread=nthread[1])
    assert_streams_equal(small, big)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_autoreset_modes_define_the_same_transitions(mode, task):
    # tracking tasks with uniform start frames: adaptive sampling couples the lanes (docs/reproducibility.md)
    options = {"sampling": "uniform"} if "sampling" in task_options(task) else {}
    actions = random_actions(STEPS, 4, 12 if task.startswith("Go1") else 29, seed=12)
    same = lane_streams(AutoresetMode.SAME_STEP, 4, 99, actions, 4, task=task, **options)
    other = lane_streams(mode, 4, 99, actions, 4, task=task, **options)
    assert sum(len(s) for s in same) > 4 * (3 * STEPS + 1)  # episodes ended along the way
    assert_streams_equal(same, other)


@given(seed=st.integers(0, 2**63 - 1), offset=st.integers(0, 12))
@settings(max_examples=4, deadline=None)
def test_lane_offset(seed, offset):
    actions = random_actions(40, 16, 29, seed=offset)
    whole = make(16)
    part = make(4, lane_offset=offset)
    o1, _ = whole.reset(seed=seed)
    o2, _ = part.reset(seed=seed)
    np.testing.assert_array_equal(o1[offset:offset + 4], o2)
    for a in actions:
        r1, r2 = whole.step(a), part.step(a[offset:offset + 4])
        for x, y in zip(r1[:4], r2[:4]):
            np.testing.assert_array_equal(x[offset:offset + 4], y)
    whole.close()
    part.close()


def test_an_unseeded_run_replays_from_the_seed_it_reports():
    """Gymnasium's ``np_random_seed`` is the seed the lanes run from: given, or drawn at a first
    reset without one; the single-lane env reports its lane's."""
    import gymnasium as gym

    from conftest import ENV_ID

    actions = random_actions(30, 4, 29, seed=5)
    runs = []
    for seed in (None, "reported"):
        env = make(4)
        obs, _ = env.reset(seed=runs[0][0] if seed == "reported" else None)
        runs.append((env.np_random_seed, [obs] + [env.step(a)[0] for a in actions]))
        env.close()
    (drawn, first), (again, second) = runs
    assert drawn == again and isinstance(drawn, int)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    env = make(4)
    env.reset(seed=3)
    env.reset()  # continues the streams: the seed stays
    assert env.np_random_seed == 3
    env.close()
    single = gym.make(ENV_ID)
    single.reset()
    assert single.np_random_seed == single.unwrapped.vec.np_random_seed >= 0
    single.close()

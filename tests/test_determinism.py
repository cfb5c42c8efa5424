"""Lane i's trajectory depends only on (seed, global lane id, its actions)."""

import numpy as np
import pytest

from conftest import make, random_actions
from motrix_gym.envs import TASKS, task_options
from motrix_gym.vector_env import MotrixVectorEnv

STEPS = 80


def rollout(num_envs: int, seed: int, actions: np.ndarray, task: str = "G1WalkFlat", **kwargs) -> list[tuple]:
    env = MotrixVectorEnv(task, num_envs, compile=False, **kwargs)
    obs, _ = env.reset(seed=seed)
    out = [(obs,)]
    for a in actions:
        obs, rew, term, trunc, info = env.step(a[:num_envs])
        out.append((obs, rew, term, trunc))
    env.close()
    return out


def assert_lanes_equal(a: list[tuple], b: list[tuple], lanes: slice) -> None:
    for step_a, step_b in zip(a, b, strict=True):
        for x, y in zip(step_a, step_b, strict=True):
            np.testing.assert_array_equal(x[lanes], y[lanes])


@pytest.mark.parametrize("task", TASKS)
def test_lanes_identical_across_num_envs(task):
    """Terrain, curriculum, randomised physics, action delay and pushes included; tracking with
    uniform start frames (adaptive sampling couples the lanes: docs/reproducibility.md)."""
    na = 12 if task.startswith("Go1") else 29
    options = {"sampling": "uniform"} if "sampling" in task_options(task) else {}
    actions = random_actions(STEPS, 16, na, seed=9)
    small, big = rollout(4, 21, actions, task, **options), rollout(16, 21, actions, task, **options)
    assert_lanes_equal(small, big, slice(0, 4))
    assert any(s[2].any() for s in big[1:])  # episodes ended and lanes were reset in between


def test_adaptive_start_frames_couple_the_lanes():
    """What docs/reproducibility.md says of the one exception: the failures of the other lanes
    shape the start frames a lane draws after its first episode."""
    actions = random_actions(STEPS, 16, 29, seed=9)
    small, big = rollout(4, 21, actions, "G1WbtDance"), rollout(16, 21, actions, "G1WbtDance")
    assert_lanes_equal(small[:2], big[:2], slice(0, 4))  # the first draws: uniform in both
    with pytest.raises(AssertionError):
        assert_lanes_equal(small, big, slice(0, 4))


def test_lanes_identical_across_threads():
    actions = random_actions(STEPS, 8, 29, seed=4)
    assert_lanes_equal(rollout(8, 5, actions, nthread=1), rollout(8, 5, actions, nthread=2), slice(None))


def test_lane_offset_matches_global_numbering():
    actions = random_actions(STEPS, 8, 29, seed=2)
    whole = rollout(8, 13, actions)
    shifted = rollout(4, 13, actions[:, 4:], lane_offset=4)
    for step_w, step_s in zip(whole, shifted, strict=True):
        for x, y in zip(step_w, step_s, strict=True):
            np.testing.assert_array_equal(x[4:8], y)


def test_seed_restarts_streams_and_unseeded_reset_continues():
    env = make(4)
    acts = random_actions(10, 4, 29)
    first, _ = env.reset(seed=3)
    for a in acts:
        env.step(a)
    again, _ = env.reset(seed=3)
    np.testing.assert_array_equal(first, again)
    cont, _ = env.reset()
    assert not np.array_equal(cont, again)  # streams continue: new noise, new start states
    env.close()


REPLAYED = [("G1WbtDance", {}), ("Go1WalkStairs", {}),
            ("Go1WalkFlat", {"command_curriculum": True, "heading_command": True,
                             "overrides": {"observations.policy.joint_pos.delay": (0, 2),
                                           "observations.policy.joint_pos.history": 2, "actions.max_delay": 2}})]


@pytest.mark.parametrize("task, options", REPLAYED + [(t, {}) for t in TASKS if t not in {t for t, _ in REPLAYED}])
def test_a_seeded_reset_replays_the_run_of_a_new_env(task, options):
    """After episodes of a first run ended (failures, curricula moved, the adaptive sampler
    learnt), ``reset(seed=s)`` runs what a new env's ``reset(seed=s)`` runs, step for step."""
    n = 8
    used = MotrixVectorEnv(task, n, compile=False, obs_groups=("policy", "critic"), **options)
    na = used.single_action_space.shape[0]
    used.reset(seed=5)
    ended = 0
    for a in random_actions(300, n, na, std=3.0, seed=1):
        _, _, terminated, _, _ = used.step(a)
        ended += int(terminated.sum())
        if ended >= n and terminated.any():
            break  # lanes ended at the last step: the seeded reset must not count them either
    assert ended >= n and terminated.any()  # failures were counted, levels moved
    new = MotrixVectorEnv(task, n, compile=False, obs_groups=("policy", "critic"), **options)
    actions = random_actions(40, n, na, std=1.0, seed=2)
    runs = []
    for env in (used, new):
        obs, _ = env.reset(seed=11)
        run = [obs["policy"], obs["critic"]]
        for a in actions:
            obs, reward, terminated, truncated, _ = env.step(a)
            run += [obs["policy"], obs["critic"], reward, terminated, truncated]
        state = {k: v for k, v in env.log.items() if k.startswith(("Motion/", "Curriculum/"))}
        runs.append((run, state))
        env.close()
    (a_run, a_state), (b_run, b_state) = runs
    for step, (x, y) in enumerate(zip(a_run, b_run, strict=True)):
        np.testing.assert_array_equal(x, y, err_msg=f"item {step}")
    assert a_state == b_state

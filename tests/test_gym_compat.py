"""Gymnasium's own wrappers, checker and benchmark on our envs, in the modes they support."""

import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.utils.performance import benchmark_vector_step
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vw

from conftest import ENV_ID, random_actions
from motrix_gym.registry import BUILTIN, env_id


def vec(mode=AutoresetMode.SAME_STEP, n=4):
    return gym.make_vec(ENV_ID, num_envs=n, compile=False, autoreset_mode=mode)


def run(env, steps=60):
    env.reset(seed=0)
    out = None
    for a in random_actions(steps, env.num_envs, 29, std=1.5):
        out = env.step(a)
    return out


@pytest.mark.parametrize("wrap, mode", [
    (vw.RecordEpisodeStatistics, AutoresetMode.SAME_STEP),
    (vw.RecordEpisodeStatistics, AutoresetMode.NEXT_STEP),
    (vw.ClipAction, AutoresetMode.SAME_STEP),
    (lambda e: vw.RescaleAction(e, np.float32(-1), np.float32(1)), AutoresetMode.SAME_STEP),
    (vw.NormalizeReward, AutoresetMode.SAME_STEP),
    (vw.NormalizeObservation, AutoresetMode.NEXT_STEP),
    (lambda e: vw.TransformObservation(e, lambda o: o * 2.0), AutoresetMode.NEXT_STEP),
    (vw.DictInfoToList, AutoresetMode.SAME_STEP),
    (vw.DictInfoToList, AutoresetMode.NEXT_STEP),
])
def test_vector_wrappers(wrap, mode):
    env = wrap(vec(mode))
    obs, rew, term, trunc, info = run(env)
    assert np.isfinite(obs).all() and np.isfinite(rew).all()
    env.close()


def test_record_episode_statistics_reports_our_returns():
    env = vw.RecordEpisodeStatistics(vec())
    env.reset(seed=0)
    seen = 0
    for a in random_actions(80, 4, 29, std=1.5):
        _, _, term, trunc, info = env.step(a)
        if "episode" in info:
            done = info["_episode"]
            np.testing.assert_allclose(info["episode"]["r"][done], info["final_info"]["episode"]["r"][done],
                                       rtol=1e-5)
            np.testing.assert_array_equal(info["episode"]["l"][done], info["final_info"]["episode"]["l"][done])
            seen += done.sum()
    assert seen > 0
    env.close()


def test_call_get_attr_and_set_attr_as_sync_vector_env_gives_them():
    """One result per lane, as SyncVectorEnv gives one per sub-env; the lanes share one env."""
    env = vec(n=3)
    env.reset(seed=0)
    assert env.get_attr("render_mode") == (None, None, None)
    assert env.call("render") == (None, None, None) and env.call("num_envs") == (3, 3, 3)
    assert env.call("get_attr", "autoreset_mode") == ((AutoresetMode.SAME_STEP,) * 3,) * 3  # a method, called
    env.set_attr("render_markers", False)
    assert env.render_markers is False
    env.set_attr("render_markers", [True] * 3)
    assert env.render_markers is True
    with pytest.raises(ValueError, match="the 3 lanes share one env, so give one value or 3 equal ones"):
        env.set_attr("render_markers", [True, False, True])
    with pytest.raises(ValueError, match="3 equal ones"):
        env.set_attr("render_markers", [False, False])
    with pytest.raises(AttributeError, match="'render_marker' is not an attribute of the env; set_attr changes "
                                             "render_markers, copy, viewer_lane"):
        env.set_attr("render_marker", False)
    assert env.render_markers is True and not hasattr(env, "render_marker")
    for name, value in [("num_envs", 2), ("autoreset_mode", "same_step"), ("runtime", None), ("torch_threads", 2)]:
        with pytest.raises(AttributeError, match=f"set_attr\\('{name}'\\): '{name}' is fixed when the env is made"):
            env.set_attr(name, value)
    with pytest.raises(ValueError, match="set_attr\\('copy'\\): must be True or False, got 1"):
        env.set_attr("copy", 1)
    assert env.num_envs == 3 and env.autoreset_mode is AutoresetMode.SAME_STEP and env.copy is True
    env.set_attr("viewer_lane", [2] * 3)
    assert env.viewer_lane == 2
    with pytest.raises(ValueError, match=re.escape("set_attr('viewer_lane'): must be an int in [0, 2] (a lane of "
                                                   "this env), got 3")):
        env.set_attr("viewer_lane", 3)
    assert env.viewer_lane == 2
    env.set_attr("copy", False)
    first = env.step(np.zeros((3, *env.single_action_space.shape), np.float32))[0]
    assert not first.flags.owndata  # a view of the env's buffer, as copy=False gives
    with pytest.raises(AttributeError, match="nope"):
        env.call("nope")
    env.close()


@pytest.mark.parametrize("task", BUILTIN)
def test_check_env_on_every_task(task):
    env = gym.make(env_id(task))
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_benchmark_vector_step(mode):
    env = vec(mode, n=8)
    sps = benchmark_vector_step(env, target_duration=1, seed=0)
    assert sps > 0
    env.close()

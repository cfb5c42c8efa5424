"""Our three autoreset modes against Gymnasium's SyncVectorEnv over single-lane views.

Sub-env ``i`` of the SyncVectorEnv is ``MotrixEnv(lane_offset=i)`` seeded with the same int, so
it draws lane ``i``'s random stream: both sides simulate the same lanes and must agree bit for bit.
That needs lanes that are bit-identical whatever their number, which only the C backend gives
(MuJoCo Warp's constraint solve differs in the last bits with the number of worlds); the modes'
own semantics are checked on both backends.
"""

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from conftest import TASK, make, random_actions
from motrix_gym.env import MotrixEnv
from motrix_gym.vector_env import MotrixVectorEnv

N = 4
STEPS = 120


def sync_env(mode: AutoresetMode) -> SyncVectorEnv:
    return SyncVectorEnv([lambda i=i: MotrixEnv(TASK, lane_offset=i) for i in range(N)], autoreset_mode=mode)


def assert_info_equal(ours: dict, theirs: dict, path: str = "") -> None:
    for key in ("final_obs", "_final_obs", "_final_info"):
        assert (key in ours) == (key in theirs), f"{path}{key}"
    if "final_obs" in ours:
        np.testing.assert_array_equal(ours["_final_obs"], theirs["_final_obs"])
        for a, b in zip(ours["final_obs"], theirs["final_obs"]):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a, b)


def twins(mode: AutoresetMode, seed: int):
    """Our env and the SyncVectorEnv of single-lane views, reset alike and checked equal."""
    ours, theirs = make(N, autoreset_mode=mode), sync_env(mode)
    np.testing.assert_array_equal(ours.reset(seed=seed)[0], theirs.reset(seed=[seed] * N)[0])
    return ours, theirs


def step_both(ours, theirs, a) -> tuple:
    r1, r2 = ours.step(a), theirs.step(a)
    for x, y in zip(r1[:4], r2[:4]):
        np.testing.assert_array_equal(x, np.asarray(y, dtype=x.dtype))
    return r1, r2


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_matches_sync_vector_env(mode):
    ours, theirs = twins(mode, 11)
    ended = 0
    for a in random_actions(STEPS, N, 29, seed=5):
        r1, r2 = step_both(ours, theirs, a)
        if mode is AutoresetMode.SAME_STEP:
            assert_info_equal(r1[4], r2[4])
            if "final_info" in r1[4]:
                ep, ended_mask = r1[4]["final_info"]["episode"], r1[4]["_final_info"]
                np.testing.assert_array_equal(ended_mask, r2[4]["_final_obs"])
                assert (ep["l"][ended_mask] > 0).all()
        ended += int((r1[2] | r1[3]).sum())
    assert ended >= N  # the comparison covered resets
    ours.close()
    theirs.close()


def test_next_step_semantics(backend):
    env = make(N, autoreset_mode=AutoresetMode.NEXT_STEP, backend=backend)
    env.reset(seed=2)
    prev_done = np.zeros(N, bool)
    seen = 0
    for a in random_actions(STEPS, N, 29, seed=1):
        obs, rew, term, trunc, info = env.step(a)
        assert "final_obs" not in info
        if prev_done.any():
            assert (rew[prev_done] == 0).all()
            assert not term[prev_done].any() and not trunc[prev_done].any()
            seen += 1
        done = term | trunc
        if done.any():
            np.testing.assert_array_equal(info["_reward_terms"], done)
            assert "episode" not in info
        prev_done = done
    assert seen > 0
    env.close()


@pytest.mark.parametrize("task, options", [("Go1WalkFlat", {"command_curriculum": True}), ("G1WbtKick", {}),
                                           ("Go1WalkStairs", {})])
def test_next_step_resets_a_lane_as_its_last_step_left_it(task, options):
    """The restart step evaluates every lane's terms (commands, counters, curricula's sums), but a
    restarting lane's reset finds all of its state as its last step left it, as in SAME_STEP."""
    env = MotrixVectorEnv(task, N, compile=False, autoreset_mode=AutoresetMode.NEXT_STEP, **options)
    rt = env.runtime
    rows = lambda lanes: [t[lanes].clone() for t in rt.lane_tensors()]  # noqa: E731
    seen, plain_reset = [], rt.reset

    def reset(mask):
        seen.append(rows(mask))
        plain_reset(mask)

    rt.reset = reset
    env.reset(seed=3)
    seen.clear()
    left, checked = None, 0
    for a in random_actions(STEPS, N, env.single_action_space.shape[0], seed=5):
        _, _, terminated, truncated, _ = env.step(a)
        if left is not None:
            for before, at_reset in zip(left, seen.pop(), strict=True):
                torch.testing.assert_close(at_reset, before, rtol=0, atol=0)
            checked += 1
        assert not seen
        ended = torch.from_numpy(terminated | truncated)
        left = rows(torch.cat((ended, ended.new_zeros(rt.ctx.num_lanes - N)))) if ended.any() else None
    assert checked > 3
    env.close()


def test_same_step_final_obs_equals_next_step_terminal_obs(backend):
    same, nxt = make(N, backend=backend), make(N, autoreset_mode=AutoresetMode.NEXT_STEP, backend=backend)
    same.reset(seed=4)
    nxt.reset(seed=4)
    checked = 0
    for a in random_actions(60, N, 29, seed=2):
        o1, _, t1, u1, i1 = same.step(a)
        o2, _, t2, u2, i2 = nxt.step(a)
        done = t1 | u1
        np.testing.assert_array_equal(done, t2 | u2)
        for i in np.flatnonzero(done):
            np.testing.assert_array_equal(i1["final_obs"][i], o2[i])
            checked += 1
        if done.any():
            break  # after this the modes legitimately differ by one step
    assert checked > 0
    same.close()
    nxt.close()


def test_disabled_mode_and_reset_mask():
    env, theirs = twins(AutoresetMode.DISABLED, 8)
    resets = 0
    for a in random_actions(STEPS, N, 29, seed=3):
        r1, _ = step_both(env, theirs, a)
        done = r1[2] | r1[3]
        if done.any():
            with pytest.raises(ValueError, match="reset_mask"):
                env.step(a)
            o1, _ = env.reset(options={"reset_mask": done})
            o2, _ = theirs.reset(options={"reset_mask": done})
            np.testing.assert_array_equal(o1, o2)
            resets += 1
    assert resets > 0
    env.close()
    theirs.close()


def test_a_torch_env_takes_its_own_done_tensor_as_reset_mask():
    ours, theirs = make(N, autoreset_mode=AutoresetMode.DISABLED, output="torch"), make(
        N, autoreset_mode=AutoresetMode.DISABLED)
    ours.reset(seed=8)
    theirs.reset(seed=8)
    resets = 0
    for a in random_actions(STEPS, N, 29, seed=3):
        _, _, term, trunc, _ = ours.step(torch.from_numpy(a))
        _, _, *ended, _ = theirs.step(a)
        if term.any() or trunc.any():
            o1, _ = ours.reset(options={"reset_mask": term | trunc})
            o2, _ = theirs.reset(options={"reset_mask": ended[0] | ended[1]})
            np.testing.assert_array_equal(o1.numpy(), o2)
            resets += 1
    assert resets > 0
    ours.close()
    theirs.close()


@pytest.mark.parametrize("bad, err", [
    ([True, False, False, False], TypeError),
    (np.ones(3, bool), ValueError),
    (np.ones(4, int), TypeError),
    (np.zeros(4, bool), ValueError),
    (torch.ones(4, dtype=torch.int64), TypeError),
    (torch.ones(3, dtype=torch.bool), ValueError),
    (torch.ones(4, dtype=torch.bool, device="meta"), ValueError),
])
def test_bad_reset_mask(bad, err):
    env = make(N)
    env.reset(seed=0)
    with pytest.raises(err, match="reset_mask"):
        env.reset(options={"reset_mask": bad})
    with pytest.raises(TypeError, match="options must be a dict or None, got list"):
        env.reset(options=[("reset_mask", np.ones(4, bool))])
    env.close()

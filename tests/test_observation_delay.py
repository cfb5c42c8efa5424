"""Observation delay (``ObservationTerm.delay``): a term shows what it observed ``lag`` steps
before, ``lag`` drawn per lane at each episode's start (and every ``delay_every`` steps within
it); checked against the same observations taken without delay."""

import dataclasses
import re

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from conftest import compiled_as_eager, first_lanes_alike, random_actions
from motrix_gym.envs import task_config
from motrix_gym.manager.overrides import apply
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.vector_env import MotrixVectorEnv

# (delay, history) of Go1WalkFlat's policy terms: fixed, drawn, and drawn with a history
FIXED = {"base_ang_vel": ((2, 2), 1), "joint_pos": ((1, 1), 2), "last_action": ((3, 3), 1)}
DRAWN = {"projected_gravity": ((0, 3), 1), "joint_pos": ((1, 2), 2), "joint_vel": ((0, 1), 3)}


def delayed(terms: dict, noise: bool = True, **options):
    """Go1WalkFlat with ``terms``' delays and histories in its policy group (without noise there
    if ``noise`` is False: then each policy term equals the critic's term of that name)."""
    cfg = task_config("Go1WalkFlat", **options)

    def change(t):
        delay, history = terms.get(t.name, ((0, 0), 1))
        return dataclasses.replace(t, delay=delay, history=history, noise=t.noise if noise else None)

    return dataclasses.replace(cfg, observations={**cfg.observations,
                                                  "policy": tuple(map(change, cfg.observations["policy"]))})


class Past:
    """Each lane's observations of its episode so far, newest last, the first one standing for
    the steps before it: what a delayed term's slice is cut from."""

    def __init__(self, first: np.ndarray, depth: int = 8) -> None:
        self.obs = np.repeat(first[None], depth, 0)

    def add(self, obs: np.ndarray, started: np.ndarray, stepped: bool = True) -> None:
        """``stepped``: every lane was observed anew (else the ``started`` lanes' were replaced)."""
        if stepped:
            self.obs = np.concatenate([self.obs[1:], obs[None]])
        self.obs = np.where(started[None, :, None], obs[None], self.obs)

    def cut(self, cols: slice, lag: np.ndarray, history: int) -> np.ndarray:
        """Per lane, the ``history`` observations of ``cols`` that end ``lag`` steps before now."""
        depth, lanes = len(self.obs), np.arange(self.obs.shape[1])
        return np.concatenate([self.obs[depth - 1 - lag - back, lanes, cols]
                               for back in range(history - 1, -1, -1)], -1)


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_a_fixed_delay_shows_what_the_plain_env_observed_that_many_steps_before(mode):
    """Same seed and actions with and without fixed delays: a fixed delay draws nothing, so every
    lane runs as in the plain env, and each delayed slice is the plain env's observation (noise
    included) from that many steps before within the episode. Falls, pushes and a partial reset
    happen in between."""
    n = 8
    plain = MotrixVectorEnv("Go1WalkFlat", n, compile=False, autoreset_mode=mode)
    late = MotrixVectorEnv(delayed(FIXED), n, compile=False, autoreset_mode=mode)
    cols, dcols = plain.runtime.observation_columns("policy"), late.runtime.observation_columns("policy")

    def check(b: np.ndarray, past: Past) -> None:
        for name in cols:
            (lag, _), history = FIXED.get(name, ((0, 0), 1))
            np.testing.assert_array_equal(b[:, dcols[name]], past.cut(cols[name], np.full(n, lag), history),
                                          err_msg=name)

    a, _ = plain.reset(seed=5)
    b, _ = late.reset(seed=5)
    past = Past(a)
    check(b, past)
    ended_before, starts = np.zeros(n, bool), 0
    for t, act in enumerate(random_actions(300, n, 12, std=1.0, seed=2)):
        if t == 150:
            mask = np.isin(np.arange(n), [0, 2])
            a, _ = plain.reset(options={"reset_mask": mask})
            b, _ = late.reset(options={"reset_mask": mask})
            past.add(a, mask, stepped=False)
            check(b, past)
            ended_before[mask] = False
        a, ra, ta, ua, _ = plain.step(act)
        b, rb, tb, ub, _ = late.step(act)
        np.testing.assert_array_equal(ra, rb)
        started = ta | ua if mode == AutoresetMode.SAME_STEP else ended_before
        past.add(a, started)
        check(b, past)
        starts += int(started.sum())
        ended_before = ta | ua
    assert starts >= n
    plain.close()
    late.close()


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_a_drawn_lag_holds_for_an_episode_and_cuts_the_term_s_own_past(mode):
    """Without noise each policy term equals the critic's term of that name, so every delayed
    slice must be the critic's from its lane's lag before (its history ending there). Each lane's
    lag stays within the term's range for a whole episode and is drawn again at the next one;
    over the run every lag in the range occurs."""
    n = 16
    env = MotrixVectorEnv(delayed(DRAWN, noise=False), n, compile=False, autoreset_mode=mode,
                          obs_groups=("policy", "critic"))
    pcols, ccols = (env.runtime.observation_columns(g) for g in ("policy", "critic"))
    observer = env.runtime._observers["policy"]
    names = [t.cfg.name for t in observer.terms if t.cfg.delay[1]]
    assert names == list(DRAWN)

    def check(obs: dict, past: Past) -> np.ndarray:
        lags = observer.lag[:n].numpy().copy()  # the buffer itself changes in place
        for j, name in enumerate(names):
            (lo, hi), history = DRAWN[name]
            assert ((lo <= lags[:, j]) & (lags[:, j] <= hi)).all(), name
            np.testing.assert_array_equal(obs["policy"][:, pcols[name]], past.cut(ccols[name], lags[:, j], history),
                                          err_msg=name)
        for name in pcols.keys() - DRAWN.keys():
            np.testing.assert_array_equal(obs["policy"][:, pcols[name]], obs["critic"][:, ccols[name]], err_msg=name)
        return lags

    obs, _ = env.reset(seed=7)
    past = Past(obs["critic"])
    lags = check(obs, past)
    seen, redrawn = [set(lags[:, j]) for j in range(len(names))], 0
    ended_before = np.zeros(n, bool)
    for act in random_actions(300, n, 12, std=1.0, seed=3):
        obs, _, term, trunc, _ = env.step(act)
        started = term | trunc if mode == AutoresetMode.SAME_STEP else ended_before
        past.add(obs["critic"], started)
        now = check(obs, past)
        np.testing.assert_array_equal(now[~started], lags[~started])  # one lag per episode
        redrawn += int((now[started] != lags[started]).any(-1).sum())
        for j in range(len(names)):
            seen[j] |= set(now[:, j])
        lags, ended_before = now, term | trunc
    assert seen == [set(range(lo, hi + 1)) for (lo, hi), _ in DRAWN.values()]
    assert redrawn >= 3
    env.close()


JITTER = {"projected_gravity": 1, "joint_pos": 3}  # delay_every of two of DRAWN's terms


def jittered(noise: bool = True, **options):
    cfg = delayed(DRAWN, noise=noise, **options)
    policy = tuple(dataclasses.replace(t, delay_every=JITTER.get(t.name, 0)) for t in cfg.observations["policy"])
    return dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy})


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_a_lag_drawn_every_k_steps_changes_only_then_and_never_goes_back_in_time(mode):
    """With ``delay_every=k`` a lane's lag is drawn again at every k-th step of its episode, to at
    most one more than its last (so a slice never shows an older observation than the step
    before showed), and each slice is still the critic's from the lane's lag before. A term
    without it keeps its episode's lag."""
    n = 16
    env = MotrixVectorEnv(jittered(noise=False), n, compile=False, autoreset_mode=mode, obs_groups=("policy", "critic"))
    pcols, ccols = (env.runtime.observation_columns(g) for g in ("policy", "critic"))
    observer, ctx = env.runtime._observers["policy"], env.runtime.ctx
    names = [t.cfg.name for t in observer.terms if t.cfg.delay[1]]
    obs, _ = env.reset(seed=11)
    past = Past(obs["critic"])
    lags = observer.lag[:n].numpy().copy()
    ended_before = np.zeros(n, bool)
    changed = {name: 0 for name in names}
    seen = [set(lags[:, j]) for j in range(len(names))]
    for act in random_actions(300, n, 12, std=1.0, seed=4):
        obs, _, term, trunc, _ = env.step(act)
        started = term | trunc if mode == AutoresetMode.SAME_STEP else ended_before
        past.add(obs["critic"], started)
        now, step = observer.lag[:n].numpy().copy(), ctx.episode_step[:n].numpy()
        for j, name in enumerate(names):
            (lo, hi), history = DRAWN[name]
            np.testing.assert_array_equal(obs["policy"][:, pcols[name]], past.cut(ccols[name], now[:, j], history),
                                          err_msg=name)
            assert ((lo <= now[:, j]) & (now[:, j] <= hi)).all(), name
            going = ~started
            moved = going & (now[:, j] != lags[:, j])
            every = JITTER.get(name, 0)
            assert not moved.any() if every == 0 else (step[moved] % every == 0).all(), name
            assert (now[going, j] <= lags[going, j] + 1).all(), name  # in order: at most one step older
            changed[name] += int(moved.sum())
            seen[j] |= set(now[:, j])
        lags, ended_before = now, term | trunc
    assert all(changed[name] >= 20 for name in JITTER) and changed["joint_vel"] == 0, changed
    assert seen == [set(range(lo, hi + 1)) for (lo, hi), _ in DRAWN.values()]
    env.close()


def test_with_lags_drawn_within_episodes_a_lane_runs_the_same_beside_any_number_of_lanes():
    first_lanes_alike(jittered())


def test_with_drawn_lags_a_lane_runs_the_same_beside_any_number_of_lanes():
    first_lanes_alike(delayed(DRAWN))


def test_a_compiled_delay_agrees_with_eager_without_recompiles():
    """Observation delays and an action delay of up to 3 steps (its older actions are reset in
    the reset graph), compiled and eager, guards checked on every call."""
    n = 16
    fast, slow = compiled_as_eager(apply(jittered(), {"actions.max_delay": 3,
                                                      "observations.policy.base_ang_vel.delay": (2, 2)}), n)
    torch.testing.assert_close(*(env.runtime._observers["policy"].lag[:n] for env in (fast, slow)))
    torch.testing.assert_close(*(env.runtime.action_delay[:n] for env in (fast, slow)))
    assert set(slow.runtime.action_delay[:n].tolist()) == {0, 1, 2, 3}
    fast.close()
    slow.close()


@pytest.mark.parametrize("every, delay, message", [
    (-1, (0, 2), "delay_every must be an int >= 0 (env steps between draws of the lag; 0: one per episode), got -1"),
    (1.0, (0, 2), "delay_every must be an int >= 0"), (True, (0, 2), "delay_every must be an int >= 0"),
    (2, (1, 1), "delay_every=2 draws the lag again from a range, but delay (1, 1) is one value"),
    (1, (0, 0), "delay_every=1 draws the lag again from a range, but delay (0, 0) is one value"),
])
def test_a_delay_every_that_cannot_draw_is_refused_naming_the_term(every, delay, message):
    cfg = apply(task_config("Go1WalkFlat"), {"observations.policy.joint_vel.delay": delay})
    policy = tuple(dataclasses.replace(t, delay_every=every) if t.name == "joint_vel" else t
                   for t in cfg.observations["policy"])
    with pytest.raises(TaskConfigError, match=re.escape(f"observation term 'joint_vel': {message}")):
        MotrixVectorEnv(dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy}), 2,
                        compile=False)


@pytest.mark.parametrize("delay", [(-1, 0), (2, 1), (0, 1.0), [0, 1], (True, 1), (1,), 2])
def test_a_delay_that_is_not_a_range_of_steps_is_refused_naming_the_term(delay):
    with pytest.raises(TaskConfigError, match=re.escape(f"observation term 'joint_vel': delay must be a tuple (lo, hi) "
                                                        f"of ints with 0 <= lo <= hi (env steps), got {delay!r}")):
        MotrixVectorEnv(delayed({"joint_vel": (delay, 1)}), 2, compile=False)

"""A hypothesis state machine interleaving valid and invalid calls; Gymnasium's invariants hold."""

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conftest import make, snapshot

N, NA = 4, 29
finite = st.floats(-10, 10, allow_nan=False, width=32)
bad_actions = st.one_of(
    st.just(np.zeros((N, NA + 1), np.float32)),
    st.just(np.zeros((N - 1, NA), np.float32)),
    st.just(np.zeros((N, NA), np.complex64)),
    st.just(np.full((N, NA), "x")),
    st.integers(0, N * NA - 1).map(lambda i: np.where(np.arange(N * NA).reshape(N, NA) == i, np.nan, 0.0)),
    st.integers(0, N * NA - 1).map(lambda i: np.where(np.arange(N * NA).reshape(N, NA) == i, -np.inf, 0.0)),
)


def same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k].nan_to_num(), b[k].nan_to_num()) if a[k].is_floating_point()
               else torch.equal(a[k], b[k]) for k in a)


class EnvMachine(RuleBasedStateMachine):
    @initialize(mode=st.sampled_from(list(AutoresetMode)), seed=st.integers(0, 2**32))
    def start(self, mode, seed):
        self.env = make(N, autoreset_mode=mode)
        self.mode = mode
        self.obs, _ = self.env.reset(seed=seed)
        self.pending = np.zeros(N, bool)
        self.closed = False

    @precondition(lambda self: not self.closed and not (self.mode is AutoresetMode.DISABLED and self.pending.any()))
    @rule(scale=st.floats(0, 4), values=st.lists(finite, min_size=NA, max_size=NA))
    def step(self, scale, values):
        a = np.tile(np.asarray(values, np.float32) * scale, (N, 1))
        obs, rew, term, trunc, info = self.env.step(a)
        done = term | trunc
        assert rew.shape == (N,) and rew.dtype == np.float32 and np.isfinite(rew).all()
        assert term.dtype == np.bool_ and trunc.dtype == np.bool_ and not (term & trunc).any()
        if self.mode is AutoresetMode.SAME_STEP:
            assert ("final_obs" in info) == bool(done.any())
            if done.any():
                np.testing.assert_array_equal(info["_final_obs"], done)
                assert (self.env.runtime.ctx.episode_step[:N][torch.from_numpy(done)] == 0).all()
        if self.mode is AutoresetMode.NEXT_STEP:
            assert not (rew[self.pending] != 0).any() and not done[self.pending].any()
        self.pending = done
        self.obs = obs

    @precondition(lambda self: not self.closed)
    @rule(bad=bad_actions)
    def bad_step(self, bad):
        before = snapshot(self.env)
        with pytest.raises(ValueError):
            self.env.step(bad)
        assert same(before, snapshot(self.env))

    @precondition(lambda self: not self.closed)
    @rule(seed=st.one_of(st.none(), st.integers(0, 2**32)))
    def reset(self, seed):
        self.obs, info = self.env.reset(seed=seed)
        assert info == {}
        self.pending[:] = False

    @precondition(lambda self: not self.closed)
    @rule(mask=st.lists(st.booleans(), min_size=N, max_size=N))
    def reset_mask(self, mask):
        m = np.asarray(mask)
        if not m.any():
            before = snapshot(self.env)
            with pytest.raises(ValueError):
                self.env.reset(options={"reset_mask": m})
            assert same(before, snapshot(self.env))
            return
        old = self.obs.copy()
        self.obs, _ = self.env.reset(options={"reset_mask": m})
        np.testing.assert_array_equal(self.obs[~m], old[~m])  # other lanes untouched
        self.pending &= ~m

    @precondition(lambda self: not self.closed)
    @rule()
    def close(self):
        self.env.close()
        self.closed = True

    @precondition(lambda self: self.closed)
    @rule()
    def use_after_close(self):
        self.env.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            self.env.step(np.zeros((N, NA)))
        with pytest.raises(RuntimeError, match="closed"):
            self.env.reset()

    @invariant()
    def observations_valid(self):
        if not hasattr(self, "env") or self.closed:
            return
        assert self.obs.shape == (N, 98) and self.obs.dtype == np.float32 and np.isfinite(self.obs).all()
        steps = self.env.runtime.ctx.episode_step[:N]
        assert (steps >= 0).all() and (steps <= self.env.task.max_episode_steps).all()

    def teardown(self):
        if hasattr(self, "env"):
            self.env.close()


EnvMachine.TestCase.settings = settings(max_examples=8, stateful_step_count=25, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
test_env_machine = EnvMachine.TestCase

"""Motion tracking tasks: every id runs, kinematic replay of every bundled clip scores (nearly) full
tracking reward without a termination, and the adaptive sampler keeps its contracts."""

import dataclasses
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from motrix_gym.envs.wbt.tracking import G1_TRACKING, MOTIONS, T1_TRACKING, tracking
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.mdp import motion as mo
from motrix_gym.vector_env import MotrixVectorEnv

TRACKING_IDS = ("G1WbtDance", "G1WbtKick", "G1WbtMix", "T1WbtDance", "T1WbtKick")
TRACKING_TERMS = ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel")


@pytest.mark.parametrize("task", TRACKING_IDS)
def test_runs_300_random_steps(task):
    env = MotrixVectorEnv(task, 8, compile=False, obs_groups=("policy", "critic"))
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        obs, rew, *_ = env.step(rng.standard_normal((8, 29)).astype(np.float32) * 0.5)
        assert np.isfinite(obs["policy"]).all() and np.isfinite(obs["critic"]).all() and np.isfinite(rew).all()
    assert obs["policy"].shape == (8, 154) and obs["critic"].shape == (8, 286)
    env.close()


@pytest.mark.parametrize("clip", sorted(p.name for p in MOTIONS.glob("*.npz")))
def test_kinematic_replay(clip):
    """Write each reference frame into the simulation instead of stepping physics: this checks
    that the reward and termination terms measure in the right frames."""
    robot = {"g1": G1_TRACKING, "t1": T1_TRACKING}[clip.split("_")[0]]
    task = dataclasses.replace(tracking("replay", robot, (clip,), sampling="start"), events=(),
                               episode_length_s=1e6)  # no pushes, no time-out: only the terms under test
    env = MotrixVectorEnv(task, 1, compile=False)
    env.reset(seed=0)
    rt, ctx = env.runtime, env.runtime.ctx
    cmd = ctx.commands["motion"]
    every = torch.ones(ctx.num_lanes, dtype=torch.bool)
    track = [rt.reward_names.index(n) for n in TRACKING_TERMS]
    best = torch.tensor([rt.reward_weights[i] for i in track])
    worst = torch.ones(len(track))
    last = int(cmd.clip_last[0])
    for f in range(1, last + 1):
        cmd.frame.fill_(f)
        mo.reset_to_motion(ctx, every, "motion")  # the robot at frame f, no noise
        rt.sim.reset(np.array([0], np.int32), ctx.qpos[:1].numpy(), ctx.qvel[:1].numpy(), full=False)
        cmd.frame.fill_(f - 1)
        rt.read()
        rt.evaluate()  # the command advances to frame f and scores the robot against it
        worst = torch.minimum(worst, rt.reward_terms[0, track] / best)
        assert not rt.terminated[0], [n for n, x in zip(rt.termination_names, rt.termination_terms[0]) if x]
    assert (worst >= 0.95).all(), dict(zip(TRACKING_TERMS, worst.tolist()))
    assert rt.truncated[0] and rt.termination_terms[0, rt.termination_names.index("motion_end")]
    env.close()


def test_play_mode_is_sequential_and_teleports():
    env = MotrixVectorEnv("G1WbtMix", 2, compile=False, mode="play")
    env.reset(seed=0)
    cmd = env.runtime.ctx.commands["motion"]
    assert (cmd.frame[:2] == 0).all() and "time_out" not in env.runtime.termination_names
    cmd.frame[:2] = cmd.clip_last[0] - 2  # near the end of the first clip
    for _ in range(2):  # to its last frame; after that step's terms, onto the next clip
        _, _, term, trunc, _ = env.step(np.zeros((2, 29), np.float32))
        assert not (term | trunc).any()  # a clip's end is no episode end in play mode
    assert (cmd.clip[:2] == 1).all() and (cmd.frame[:2] == cmd.c.clip_start[1]).all()
    root = cmd.c.body_pos_w[cmd.c.clip_start[1], 0].double()
    np.testing.assert_allclose(env.sim.qpos[:2, :3].numpy(), root.expand(2, 3).numpy(), atol=1e-6)  # teleported
    with pytest.raises(ValueError, match="sequential"):
        MotrixVectorEnv("G1WbtMix", 2, compile=False, mode="play", sampling="uniform")
    env.close()


def test_play_teleport_comes_after_the_terms():
    """Terms never see a teleport's joints with the body frames from before it: a termination
    that compares the root body's frame with the free joint's position never fires, though the
    robot stands a metre away from where the next clip starts."""
    from motrix_gym.envs import task_config
    from motrix_gym.manager.terms import TerminationTerm

    def frames_lag_joints(env):
        return (env.xpos[:, 1] - env.qpos[:, :3]).norm(dim=-1) > 1e-4

    cfg = task_config("G1WbtMix", mode="play")
    cfg = dataclasses.replace(cfg, terminations=(*cfg.terminations, TerminationTerm("lag", frames_lag_joints)))
    env = MotrixVectorEnv(cfg, 2, compile=False)
    env.reset(seed=0)
    cmd, ids = env.runtime.ctx.commands["motion"], np.arange(2, dtype=np.int32)
    qpos = env.sim.qpos.numpy()[ids].copy()
    qpos[:, 0] += 1.0
    env.sim.reset(ids, qpos, env.sim.qvel.numpy()[ids].copy(), full=False)
    env.runtime.read_lanes(ids)
    cmd.frame[:2] = cmd.clip_last[0] - 1
    for _ in range(3):
        _, _, term, trunc, _ = env.step(np.zeros((2, 29), np.float32))
        assert not (term | trunc).any(), env.runtime.termination_terms[:2]
    assert (cmd.clip[:2] == 1).all()
    env.close()


def test_sampling_options():
    for sampling in mo.SAMPLING:
        env = MotrixVectorEnv("G1WbtMix", 4, compile=False, sampling=sampling)
        env.reset(seed=1)
        cmd = env.runtime.ctx.commands["motion"]
        if sampling in ("start", "sequential"):
            assert set(cmd.frame[:4].tolist()) <= set(cmd.c.clip_start.tolist())
        env.close()
    with pytest.raises(ValueError, match="sampling"):
        MotrixVectorEnv("G1WbtMix", 2, compile=False, sampling="random")


@pytest.mark.parametrize("param, value, message", [
    ("floor", 1.5, "parameter 'floor' must be a finite number >= 0 and <= 1, got 1.5"),
    ("alpha", 0.0, "parameter 'alpha' must be a finite number > 0 and <= 1, got 0.0"),
    ("smoothing", -0.1, "parameter 'smoothing' must be a finite number >= 0 and <= 1, got -0.1"),
    ("kernel", -1, "parameter 'kernel' must be int >= 0, got int -1"),
    ("bin_s", 0.0, "parameter 'bin_s' must be a finite number > 0, got 0.0"),
])
def test_adaptive_sampler_settings_out_of_range_are_refused(param, value, message):
    """A floor above 1 gives negative probabilities; the others weigh or bin nothing."""
    with pytest.raises(TaskConfigError, match="^command term 'motion': " + re.escape(message) + "$"):
        MotrixVectorEnv("G1WbtDance", 2, compile=False, overrides={f"commands.motion.params.{param}": value})


# ------------------------------------------------------------------------ adaptive sampler
@pytest.fixture(scope="module")
def command():
    env = MotrixVectorEnv("G1WbtMix", 64, compile=False)
    env.reset(seed=0)
    yield env.runtime.ctx, env.runtime.ctx.commands["motion"]
    env.close()


def fail_at(ctx, cmd, frames: list[int]) -> None:
    """Pretend the first lanes' episodes ran and terminated at ``frames`` and let the sampler
    learn from it."""
    mask = torch.zeros(ctx.num_lanes, dtype=torch.bool)
    mask[: len(frames)] = True
    cmd.frame[: len(frames)] = torch.tensor(frames)
    ctx.terminated.copy_(mask)
    ctx.episode_step.masked_fill_(mask, 10)
    cmd.stats.copy_(cmd.shared_stats(ctx, mask))  # what the runtime does, one process
    cmd._update_probs()
    ctx.terminated.fill_(False)
    ctx.episode_step.fill_(0)


@given(frames=st.lists(st.integers(0, 2000), min_size=1, max_size=64), rounds=st.integers(1, 20))
@settings(max_examples=30, deadline=None)
def test_probabilities_stay_a_distribution_with_a_floor(command, frames, rounds):
    ctx, cmd = command
    cmd.failures.zero_()
    n = cmd.probs.shape[0]
    for _ in range(rounds):
        fail_at(ctx, cmd, [f % cmd.c.num_frames for f in frames])
    p = cmd.probs
    assert (p >= 0).all() and abs(float(p.sum()) - 1.0) < 1e-5
    assert float(p.min()) >= cmd.floor / n - 1e-7  # the uniform floor holds


@given(bin_a=st.integers(0, 10), extra=st.integers(1, 30))
@settings(max_examples=20, deadline=None)
def test_more_failures_more_mass(command, bin_a, extra):
    ctx, cmd = command
    cmd.failures.zero_()
    n = cmd.probs.shape[0]
    a, b = bin_a % n, (bin_a + n // 2) % n  # two bins far apart, so smoothing does not mix them
    fa, fb = int(cmd.bin_start[a]), int(cmd.bin_start[b])
    fail_at(ctx, cmd, [fa] * (2 + extra) + [fb] * 2)
    assert cmd.probs[a] > cmd.probs[b]


@given(seed=st.integers(0, 2**32), lanes=st.sampled_from([(4, 16), (8, 64)]))
@settings(max_examples=5, deadline=None)
def test_draws_identical_across_num_envs(seed, lanes):
    frames = []
    for n in lanes:
        env = MotrixVectorEnv("G1WbtMix", n, compile=False)
        env.reset(seed=seed)
        frames.append(env.runtime.ctx.commands["motion"].frame[: lanes[0]].clone())
        env.close()
    assert torch.equal(frames[0], frames[1])


def test_a_failure_is_counted_once_though_the_lane_is_reset_again_before_its_next_step():
    env = MotrixVectorEnv("G1WbtDance", 16, compile=False)
    env.reset(seed=0)
    cmd = env.runtime.ctx.commands["motion"]
    rng = np.random.default_rng(1)
    for _ in range(300):
        _, _, terminated, _, _ = env.step((rng.standard_normal((16, 29)) * 3).astype(np.float32))
        if terminated.any():
            break
    assert terminated.any() and float(cmd.stats.sum()) == terminated.sum()  # counted at the autoreset
    env.reset()  # the lanes that failed have run no step since
    assert float(cmd.stats.sum()) == 0
    env.close()


def test_pushed_lanes_are_observed_after_the_push():
    """A push fires inside the step graph, after which the lane is written to the simulation and
    observed again: every returned observation is that of the state the next step starts from."""
    env = MotrixVectorEnv("G1WbtDance", 4, compile=False, obs_groups=("critic",))  # critic: no noise
    env.reset(seed=0)
    rt = env.runtime
    rt.event_timers[:2] = 0.5  # lanes 0 and 1 are pushed at the next step
    qvel_before = rt.sim.qvel[:4].clone()
    obs, *_ = env.step(np.zeros((4, 29), np.float32))
    pushed = (rt.sim.qvel[:4, :3] - qvel_before[:, :3]).norm(dim=-1)
    fresh = torch.zeros(rt.ctx.num_lanes, obs.shape[1])
    rt.observe_graphs["critic"].eager(fresh, torch.ones(rt.ctx.num_lanes, dtype=torch.bool))
    np.testing.assert_array_equal(obs, fresh[:4].numpy())
    assert (pushed[:2] > 0.05).all(), pushed  # the push reached the simulation
    env.close()

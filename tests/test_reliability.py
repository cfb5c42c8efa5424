"""Diverging physics, lifecycle, threads and processes."""

import gc
import os
import subprocess
import sys
import threading

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ENV_ID, make, random_actions


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_diverged_lanes_are_terminated_reset_and_counted(backend):
    a, b = make(8, backend=backend), make(8, backend=backend)
    a.reset(seed=0)
    b.reset(seed=0)
    acts = random_actions(30, 8, 29, std=0.3)
    for x in acts[:5]:
        a.step(x)
        b.step(x)
    a.sim.qvel[3, :] = 1e5  # exploding velocity
    a.sim.qpos[5, 10] = float("nan")  # MuJoCo resets such a lane itself; we must still see it
    obs, rew, term, trunc, info = a.step(acts[5])
    b.step(acts[5])
    assert term[3] and term[5]
    fired = info["final_info"]["termination_terms"]["physics_diverged"]
    np.testing.assert_array_equal(np.flatnonzero(fired), [3, 5])
    assert rew[3] == 0 and rew[5] == 0
    assert np.isfinite(obs).all() and all(np.isfinite(info["final_obs"][i]).all() for i in (3, 5))
    assert a.log["Physics/diverged_lanes"] == 2
    others = [0, 1, 2, 4, 6, 7]
    for x in acts[6:]:
        ra, rb = a.step(x), b.step(x)
        for u, v in zip(ra[:4], rb[:4]):
            np.testing.assert_array_equal(u[others], v[others])
    assert np.abs(a.sim.qvel.numpy()[3]).max() < 1e3  # the lane was reset and runs again
    a.close()
    b.close()


def test_a_diverged_lane_is_counted_once_when_it_restarts_a_step_later():
    env = make(8, autoreset_mode=AutoresetMode.NEXT_STEP)
    env.reset(seed=0)
    acts = random_actions(4, 8, 29, std=0.3)
    env.step(acts[0])
    env.sim.qvel[3, :] = 1e5
    _, _, term, _, _ = env.step(acts[1])
    assert term[3] and env.log["Physics/diverged_lanes"] == 1
    env.sim.qvel[5, :] = 1e5  # while lane 3 restarts
    _, _, term, _, _ = env.step(acts[2])
    assert term[5] and not term[3] and env.log["Physics/diverged_lanes"] == 2
    env.close()


def test_a_diverged_lane_is_found_with_mujoco_s_log_turned_off(tmp_path, monkeypatch):
    """The env finds divergence by MuJoCo's warning counters, not its log: with the log's console
    and file output off (the README's recipe) the lane still ends, and no MUJOCO_LOG.TXT appears."""
    import mujoco

    monkeypatch.chdir(tmp_path)
    config = mujoco.MjLogConfig.get()
    before = config.logto_console, config.logto_file
    config.logto_console = config.logto_file = False
    config.set()
    try:
        env = make(4)
        env.reset(seed=0)
        env.sim.qpos[1, 10] = float("nan")
        _, _, term, _, info = env.step(np.zeros((4, 29), np.float32))
        env.close()
    finally:
        config.logto_console, config.logto_file = before
        config.set()
    np.testing.assert_array_equal(np.flatnonzero(info["final_info"]["termination_terms"]["physics_diverged"]), [1])
    assert term[1] and not (tmp_path / "MUJOCO_LOG.TXT").exists()
    after = mujoco.MjLogConfig.get()
    assert (after.logto_console, after.logto_file) == before


ODD = st.sampled_from([0.0, 0.5, -2.0, 999.0, 1001.0, -1e4, 1e39, 1e300, float("nan"), float("inf"), -float("inf")])


def test_read_flags_divergence_and_zeroes_non_finite_values():
    """read(): the float32 cast of every read field, non-finite values as zeros; a lane diverged
    when MuJoCo flagged it, a position or velocity is not finite, or a speed exceeds max_speed."""
    env = make(4)
    env.reset(seed=0)
    rt, sim = env.runtime, env.sim
    ids = np.arange(4, dtype=np.int32)
    start = sim.qpos.numpy().copy(), sim.qvel.numpy().copy()

    @settings(max_examples=40, deadline=None)
    @given(lane=st.integers(0, 3), q=st.lists(st.tuples(st.integers(0, 35), ODD), max_size=3),
           v=st.lists(st.tuples(st.integers(0, 34), ODD), max_size=3), failed=st.booleans())
    def check(lane, q, v, failed):
        qpos, qvel = (x.copy() for x in start)
        for i, x in q:
            qpos[lane, i] = x
        for i, x in v:
            qvel[lane, i] = x
        with np.errstate(all="ignore"):
            sim.reset(ids, qpos, qvel, full=False)  # derived fields follow: NaN positions give NaN frames
        rt.failed.zero_()
        rt.failed[lane] = failed
        rt.read()
        q64, v64 = torch.from_numpy(qpos), torch.from_numpy(qvel)
        bad = ~(torch.isfinite(q64).all(-1) & torch.isfinite(v64).all(-1)) | (v64.abs().amax(-1) > 1000.0)
        assert torch.equal(rt.ctx.diverged[:4], bad | rt.failed[:4])
        for name in rt.program.reads:
            want = torch.nan_to_num(sim.views[name].float(), nan=0.0, posinf=0.0, neginf=0.0)
            assert torch.equal(getattr(rt.ctx, name)[:4], want), name

    check()
    env.close()


def test_close_releases_mujoco_threads():
    """The threads that making and stepping an env starts (MuJoCo's pools) end with close; other
    threads of the process (torch's pool, a GL driver's) are not counted."""
    def threads() -> set[int]:
        return {int(t) for t in os.listdir("/proc/self/task")}

    torch.zeros(10).sum()  # start torch's own pool first
    before = threads()
    env = make(4, nthread=2)
    env.reset(seed=0)
    env.step(np.zeros((4, 29)))
    started = threads() - before
    assert started
    env.close()
    gc.collect()
    assert not started & threads()


def test_make_close_loop_does_not_grow_memory():
    def cycle(i: int) -> None:
        env = make(4)
        env.reset(seed=i)
        env.step(np.zeros((4, 29)))
        env.close()

    for i in range(5):
        cycle(i)
    gc.collect()
    start = rss_mb()
    for i in range(50):
        cycle(i)
    gc.collect()
    assert rss_mb() - start < 20  # measured: about 1 MB over 40 cycles


def test_runs_inside_a_thread():
    env = make(4)
    env.reset(seed=0)
    out = {}

    def work():
        for a in random_actions(20, 4, 29):
            out["r"] = env.step(a)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert np.isfinite(out["r"][0]).all()
    env.close()


def test_async_vector_env_spawn():
    # A spawned worker imports nothing of ours: the "module:id" form imports motrix_gym there.
    env = gym.vector.AsyncVectorEnv([lambda: gym.make(f"motrix_gym:{ENV_ID}") for _ in range(2)], context="spawn")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 98)
    obs, rew, *_ = env.step(np.zeros((2, 29), np.float32))
    assert np.isfinite(obs).all()
    env.close()


CHILD = """
import hashlib, numpy as np, sys
sys.path.insert(0, "tests")
from conftest import make, random_actions
env = make(4)
h = hashlib.sha256(env.reset(seed=17)[0].tobytes())
for a in random_actions(40, 4, 29, seed=3):
    for x in env.step(a)[:4]:
        h.update(np.ascontiguousarray(x).tobytes())
print(h.hexdigest())
"""


def test_identical_across_processes():
    runs = [subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True, text=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0].strip()) == 64


def test_actions_on_wrong_device():
    env = make(2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="device"):
        env.step(torch.zeros(2, 29, device="meta"))
    env.close()


def test_misspelled_id_gets_gymnasiums_error():
    with pytest.raises(gym.error.Error, match="G1WalkFlt"):
        gym.make_vec("Motrix/G1WalkFlt-v0", num_envs=2)


@pytest.mark.slow
def test_soak_no_rss_growth():
    """10,000 steps at 256 lanes: resident memory stays flat after warm-up."""
    env = make(256)
    env.reset(seed=0)
    acts = random_actions(100, 256, 29, std=1.0)
    for a in acts:
        env.step(a)
    gc.collect()
    start = rss_mb()
    for i in range(10_000):
        env.step(acts[i % 100])
    gc.collect()
    growth = rss_mb() - start
    env.close()
    assert growth < 20, f"RSS grew by {growth:.1f} MB"

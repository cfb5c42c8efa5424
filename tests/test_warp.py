"""The MuJoCo Warp backend (on Warp's CPU device) against the C backend: the same task, reset and
actions give observations within a tolerance (Warp computes in float32; on terrain its
heightfield collision finds a slightly different contact set, see docs/performance.md), the same
RNG streams and the same terminations; per-lane model fields are written alike."""

import numpy as np
import pytest
import torch

from motrix_gym.envs import TASKS
from motrix_gym.vector_env import MotrixVectorEnv

N = 4
PARITY_STEPS = 10
# Largest observation difference allowed over the first 10 steps: float32 physics on flat ground;
# on terrain, heightfield contacts that differ from the first touch-down.
FLAT_TOL, TERRAIN_TOL = 1e-3, 0.5


def tolerance(task: str) -> float:
    return TERRAIN_TOL if any(k in task for k in ("Rough", "Stairs", "Slope")) else FLAT_TOL


def parity(task: str, steps: int = PARITY_STEPS, seed: int = 1) -> float:
    """Step both backends from the same seed with the same random actions; check RNG streams and
    flags are identical every step; return the largest observation difference."""
    envs = {b: MotrixVectorEnv(task, N, backend=b, compile=False, progress=False, obs_groups=("policy", "critic"))
            for b in ("mujoco", "warp")}
    obs = {b: e.reset(seed=seed)[0] for b, e in envs.items()}
    worst = max(np.abs(obs["mujoco"][g] - obs["warp"][g]).max() for g in obs["mujoco"])
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        a = rng.uniform(-1, 1, envs["mujoco"].action_space.shape).astype(np.float32)
        (oc, rc, tc, uc, _), (ow, rw, tw, uw, _) = (e.step(a) for e in envs.values())
        np.testing.assert_array_equal(tc, tw)
        np.testing.assert_array_equal(uc, uw)
        assert torch.equal(envs["mujoco"].runtime.ctx.rng.state, envs["warp"].runtime.ctx.rng.state)
        assert all(np.isfinite(ow[g]).all() for g in ow)
        worst = max(worst, *(np.abs(oc[g] - ow[g]).max() for g in oc))
    for e in envs.values():
        e.close()
    return float(worst)


def test_parity_walk_flat():
    assert parity("G1WalkFlat") < FLAT_TOL


@pytest.mark.slow
@pytest.mark.parametrize("task", [t for t in TASKS if t != "G1WalkFlat"])
def test_parity_every_task(task):
    assert parity(task) < tolerance(task)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_fifty_steps_finite(task):
    env = MotrixVectorEnv(task, N, backend="warp", compile=False, progress=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        obs, rew, *_ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        assert np.isfinite(obs).all() and np.isfinite(rew).all()
    env.close()


def test_lane_fields_match_the_c_backend():
    """Randomised friction, masses, centre of mass, gains and the ball, and the constants derived
    from them, per lane, in both the physics and the sensing model."""
    envs = {b: MotrixVectorEnv("Go1BallBalance", N, backend=b, compile=False, progress=False)
            for b in ("mujoco", "warp")}
    for e in envs.values():
        e.reset(seed=2)
    c, w = envs["mujoco"].sim, envs["warp"].sim
    fields = ("geom_friction", "body_mass", "body_inertia", "body_ipos", "actuator_gainprm", "actuator_biasprm",
              "geom_size", "geom_solref", "dof_damping", "body_subtreemass", "dof_invweight0")
    for f in fields:
        want = c.batch.expanded(f)
        assert want is not None, f
        got = getattr(w.m, f).numpy().reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=f)
    for f in ("body_mass", "body_ipos", "geom_size"):
        want = c.sensing.expanded(f)
        np.testing.assert_allclose(getattr(w.sm, f).numpy().reshape(want.shape), want, rtol=1e-6, err_msg=f)
    for e in envs.values():
        e.close()


def test_overflowing_buffers_fail_the_lane_and_warn():
    from motrix_gym.sim.warp_batch import WarpBatchSim
    env = MotrixVectorEnv("G1WalkFlat", 2, backend="warp", compile=False, progress=False)
    env.reset(seed=0)
    sim = env.sim
    small = WarpBatchSim(sim.model, 2, reads=("qpos",), sensing=sim.model, njmax=4)
    small.reset(np.arange(2), sim.arrays["qpos"], sim.arrays["qvel"])
    with pytest.warns(RuntimeWarning, match="njmax=4"):
        for _ in range(20):  # the robot falls onto the ground
            failed = small.step(4)
            if len(failed):
                break
    np.testing.assert_array_equal(failed, [0, 1])
    np.testing.assert_allclose(small.arrays["qpos"], np.tile(sim.model.qpos0, (2, 1)))  # reset to the defaults
    small.close()
    env.close()


@pytest.mark.parametrize("kwargs, match", [
    (dict(backend="Warp"), "backend must be one of"),
    (dict(backend="warp", nthread=2), "nthread must be None or 1"),
    (dict(backend="warp", current_kinematics=False), "current_kinematics True"),
])
def test_bad_backend_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MotrixVectorEnv("G1WalkFlat", 2, compile=False, **kwargs)


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_bench_rows(backend):
    from motrix_gym.bench import bench_task
    row = bench_task("Motrix/G1WalkFlat-v0", 2, steps=2, repeats=1, compile=False, nthread=1, backend=backend)
    assert row["backend"] == backend and row["num_envs"] == 2
    assert row["env_ms"] > 0 and row["raw_ms"] > 0 and np.isfinite(row["overhead_ratio"])

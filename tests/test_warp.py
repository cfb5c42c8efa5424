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


# Warp's devices here: the CPU always, a GPU where there is one (these cases run only there)
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def parity(task: str, steps: int = PARITY_STEPS, seed: int = 1, device: str = "cpu") -> float:
    """Step both backends from the same seed with the same random actions; check RNG streams and
    flags are identical every step; return the largest observation difference."""
    envs = {b: MotrixVectorEnv(task, N, backend=b, compile=False, progress=False, obs_groups=("policy", "critic"),
                               device=device if b == "warp" else "cpu")
            for b in ("mujoco", "warp")}
    obs = {b: e.reset(seed=seed)[0] for b, e in envs.items()}
    worst = max(np.abs(obs["mujoco"][g] - obs["warp"][g]).max() for g in obs["mujoco"])
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        a = rng.uniform(-1, 1, envs["mujoco"].action_space.shape).astype(np.float32)
        (oc, rc, tc, uc, _), (ow, rw, tw, uw, _) = (e.step(a) for e in envs.values())
        np.testing.assert_array_equal(tc, tw)
        np.testing.assert_array_equal(uc, uw)
        assert torch.equal(envs["mujoco"].runtime.ctx.rng.state, envs["warp"].runtime.ctx.rng.state.cpu())
        assert all(np.isfinite(ow[g]).all() for g in ow)
        worst = max(worst, *(np.abs(oc[g] - ow[g]).max() for g in oc))
    for e in envs.values():
        e.close()
    return float(worst)


@pytest.mark.parametrize("device", DEVICES)
def test_parity_walk_flat(device):
    assert parity("G1WalkFlat", device=device) < FLAT_TOL


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


DEVICE_TASKS = ("G1WalkRough", "G1WbtDance", "Go1BallBalance")  # terrain, motion, ball and randomisation


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("task", DEVICE_TASKS)
def test_no_tensor_depends_on_the_default_device(task, device):
    """What a GPU run needs of the code, checked on the CPU: with torch's default device set to
    "meta", a warp env builds, resets, steps through episode ends and observes. A tensor made
    without a device outside the runtime's build (where the device is set), and every use of one
    with the env's tensors, fails; on a GPU so does every host tensor the step meets."""
    torch.set_default_device("meta")
    try:
        env = MotrixVectorEnv(task, N, backend="warp", device=device, compile=False, progress=False,
                              autoreset_mode="NextStep" if task == "G1WbtDance" else "SameStep")
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(30):
            _, _, term, trunc, _ = env.step((rng.standard_normal(env.action_space.shape) * 3).astype(np.float32))
            ended += int((term | trunc).sum())
        assert ended > 0  # the resets ran
        env.reset(seed=1, options={"reset_mask": np.array([True, False, True, False])})
        assert env.runtime.ctx.qpos.device.type == device
        env.close()
    finally:
        torch.set_default_device(None)


def _tensors(x, seen, out):
    """Every tensor reachable from ``x`` through dataclasses, containers and attributes."""
    import dataclasses
    import types
    if id(x) in seen or isinstance(x, (type, types.ModuleType, types.FunctionType, str, bytes)):
        return
    seen.add(id(x))
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for v in x:
            _tensors(v, seen, out)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors(v, seen, out)
    elif dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            if f.name not in ("task", "cfg", "model"):  # configs: what the resolver read
                _tensors(getattr(x, f.name), seen, out)
    elif hasattr(x, "__dict__"):
        _tensors(vars(x), seen, out)


@pytest.mark.parametrize("task", TASKS)
def test_every_tensor_of_a_program_moves_to_the_device(task):
    """``on_device`` reaches every index tensor and table the terms are given."""
    from motrix_gym.envs import task_config
    from motrix_gym.manager.resolver import on_device, resolve
    from motrix_gym.sim.scene import build_model, height_map, model_info
    cfg = task_config(task)
    program = resolve(cfg, model_info(build_model(cfg.scene, cfg.sim_dt), height_map(cfg.scene.terrain)))
    before, moved = [], []
    _tensors(program, set(), before)
    _tensors(on_device(program, torch.device("meta")), set(), moved)
    assert before and len(moved) == len(before)
    assert {t.device.type for t in moved} == {"meta"}, [tuple(t.shape) for t in moved if t.device.type != "meta"]
    assert on_device(program, torch.device("cpu")) is program


@pytest.mark.parametrize("kwargs, match", [
    (dict(device="meta"), "CPU or CUDA device"),
    (dict(device="gpu"), "device must be a torch device"),
    (dict(backend="warp", device="cuda:0"), "CUDA is not available"),
])
def test_bad_devices(kwargs, match):
    if torch.cuda.is_available() and "CUDA" in match:
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match=match):
        MotrixVectorEnv("G1WalkFlat", 2, compile=False, **kwargs)

"""Per-lane physical parameters: drawn from the lane RNG at reset, different per lane, the same for
the same seed and global lane id whatever the number of lanes, and seen by the sensing model."""

import dataclasses

import numpy as np
import pytest

from motrix_gym.vector_env import MotrixVectorEnv

FIELDS = ("geom_friction", "body_mass", "body_ipos", "actuator_gainprm", "actuator_biasprm")


def drawn(task: str, num_envs: int, seed: int, **kwargs) -> dict[str, np.ndarray]:
    env = MotrixVectorEnv(task, num_envs, compile=False, **kwargs)
    env.reset(seed=seed)
    out = {f: env.sim.batch.expanded(f).copy() for f in FIELDS}
    out["delay"] = env.runtime.action_delay[:num_envs].numpy().copy()
    out["sensing_mass"] = env.sim.sensing.expanded("body_mass").copy()
    env.close()
    return out


@pytest.mark.parametrize("task", ["Go1WalkFlat", "G1WalkRough"])
def test_lanes_draw_their_own_parameters_reproducibly(task):
    a, b = drawn(task, 16, seed=3), drawn(task, 4, seed=3)
    shifted = drawn(task, 4, seed=3, lane_offset=8)
    for f in FIELDS:
        flat = a[f].reshape(16, -1)
        assert len({row.tobytes() for row in flat}) == 16, f"{f}: lanes share values"
        np.testing.assert_array_equal(a[f][:4], b[f], err_msg=f"{f}: not the same across num_envs")
        np.testing.assert_array_equal(a[f][8:12], shifted[f], err_msg=f"{f}: not the same for lane_offset")
    np.testing.assert_array_equal(a["sensing_mass"], a["body_mass"])  # the sensing model's masses follow
    assert 0 < a["delay"].sum() < 16  # some lanes act a step late
    c = drawn(task, 4, seed=4)
    assert not np.array_equal(c["body_mass"], b["body_mass"])


def test_ranges_are_respected():
    env = MotrixVectorEnv("Go1WalkFlat", 64, compile=False)
    env.reset(seed=0)
    r, m = env.task.randomization, env.sim.model
    feet = list(env.runtime.program.randomization.friction_geoms)
    friction = env.sim.batch.expanded("geom_friction")[:, feet, 0]
    assert friction.min() >= r.friction[0] and friction.max() <= r.friction[1]
    robot = list(env.runtime.program.robot_bodies)
    scale = env.sim.batch.expanded("body_mass")[:, robot] / m.body_mass[robot]
    assert np.allclose(scale, scale[:, :1])  # one factor per lane for every body of the robot
    assert scale.min() >= r.mass_scale[0] - 1e-9 and scale.max() <= r.mass_scale[1] + 1e-9
    kp = env.sim.batch.expanded("actuator_gainprm")[:, :, 0] / m.actuator_gainprm[:, 0]
    assert kp.min() >= r.gain_scale[0] - 1e-9 and kp.max() <= r.gain_scale[1] + 1e-9
    play = MotrixVectorEnv("Go1WalkFlat", 4, compile=False, mode="play")
    play.reset(seed=0)
    assert play.sim.batch.expanded("body_mass") is None and not play.runtime.action_delay.any()
    env.close()
    play.close()


def test_an_action_delay_of_up_to_k_steps_drives_each_lane_with_that_older_action(backend):
    """``max_delay=3``: each lane's servo targets come from its action 0-3 steps before (zeros
    before its episode's first), the lag drawn per lane at each episode's start; every lag
    occurs, on either backend's path (numpy on the host, torch on a device)."""
    from conftest import random_actions

    n, k = 16, 3
    env = MotrixVectorEnv("Go1WalkFlat", n, compile=False, backend=backend, overrides={"actions.max_delay": k})
    rt = env.runtime
    act = rt.program.action
    ids = act.actuator_ids.numpy()
    default, scale = rt.ctx.default_qpos[act.joints.qpos].cpu().numpy(), act.scale.numpy()
    env.reset(seed=1)
    recent = [np.zeros((n, 12), np.float32)] * (k + 1)  # each lane's actions this episode, newest last
    lags, seen, starts = rt.action_delay[:n].cpu().numpy().copy(), set(), 0
    for a in random_actions(60, n, 12, std=1.0, seed=2):
        recent = recent[1:] + [np.clip(a, -act.clip, act.clip)]
        _, _, term, trunc, _ = env.step(a)
        ended = np.asarray(term | trunc)
        ctrl = env.sim.arrays["ctrl"]
        ctrl = (ctrl.cpu().numpy() if hasattr(ctrl, "cpu") else np.asarray(ctrl))[:, ids]
        want = default + scale * np.stack([recent[-1 - lags[i]][i] for i in range(n)])
        np.testing.assert_allclose(ctrl[~ended], want[~ended], atol=1e-6)  # ended lanes were reset since
        seen |= set(lags.tolist())
        now = rt.action_delay[:n].cpu().numpy().copy()
        np.testing.assert_array_equal(now[~ended], lags[~ended])  # one lag per episode
        lags, starts = now, starts + int(ended.sum())
        recent = [np.where(ended[:, None], 0.0, r) for r in recent]
    assert seen == set(range(k + 1)) and starts > 0
    env.close()


@pytest.mark.parametrize("max_delay", [-1, 1.0, True])
def test_an_action_delay_that_is_not_a_count_is_refused(max_delay):
    from motrix_gym.envs import task_config
    from motrix_gym.manager.resolver import TaskConfigError

    cfg = task_config("Go1WalkFlat")
    cfg = dataclasses.replace(cfg, actions=dataclasses.replace(cfg.actions, max_delay=max_delay))
    with pytest.raises(TaskConfigError, match=rf"max_delay must be an int >= 0 \(control steps\), got {max_delay!r}"):
        MotrixVectorEnv(cfg, 2, compile=False)


@pytest.mark.parametrize("make, message", [
    (lambda R: R(mass_scale=(1.0, float("inf"))), "randomization: mass_scale must be (lo, hi), finite, with 0 < lo "
                                                  "<= hi, got (1.0, inf)"),
    (lambda R: R(gain_scale=(float("nan"), 1.0)), "randomization: gain_scale must be (lo, hi), finite"),
    (lambda R: R(com_offset=float("nan")), "randomization: com_offset must be a finite number >= 0, got nan"),
    (lambda R: R(com_offset=-0.01), "randomization: com_offset must be a finite number >= 0, got -0.01"),
])
def test_a_range_that_draws_nan_or_inf_is_refused_naming_it(make, message):
    import re

    from motrix_gym.manager.config import Randomization

    with pytest.raises(ValueError, match=re.escape(message)):
        make(Randomization)

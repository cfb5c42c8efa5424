"""Go1 on a ball: the start is a real stance (all four feet on the ball, nothing else touching),
zero actions keep it up for a while, every termination fires for its own reason."""

import math

import mujoco
import numpy as np
import pytest

from motrix_gym.vector_env import MotrixVectorEnv

FEET = ("FL_foot_collision", "FR_foot_collision", "RL_foot_collision", "RR_foot_collision")


def robot_contacts(env: MotrixVectorEnv, lane: int) -> set[tuple[str, str]]:
    """Every contact of the robot in ``lane`` by the physics model: (robot geom, other body)."""
    m = env.sim.model
    data = env.sim.batch.get_data(lane)
    mujoco.mj_forward(env.sim.batch.get_model(lane), data)
    robot = set(env.runtime.program.robot_bodies)
    out = set()
    for c in data.contact[:data.ncon]:
        b1, b2 = m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]
        for g, b, other in ((c.geom1, b1, b2), (c.geom2, b2, b1)):
            if b in robot and other not in robot:
                out.add((m.geom(g).name, m.body(other).name))
    return out


def test_every_lane_starts_with_four_feet_on_the_ball_and_nothing_else_touching():
    env = MotrixVectorEnv("Go1BallBalance", 64, compile=False)
    want = {(f, "ball") for f in FEET}
    for seed in (0, 1, 2):
        env.reset(seed=seed)
        radii = env.sim.batch.expanded("geom_size")[:, env.sim.model.geom("ball").id, 0]
        assert radii.min() < 0.31 and radii.max() > 0.34  # lanes on balls of different sizes
        for lane in range(64):
            assert robot_contacts(env, lane) == want, f"seed {seed} lane {lane}"
    env.close()


def test_zero_actions_stay_up_for_half_a_second_in_most_lanes():
    n = 64
    env = MotrixVectorEnv("Go1BallBalance", n, compile=False)
    env.reset(seed=0)
    steps = math.ceil(0.5 / env.task.step_dt)
    up = np.ones(n, bool)
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(np.zeros((n, 12), np.float32))
        up &= ~(term | trunc)
    print(f"lanes still up after 0.5 s with zero actions: {up.mean():.2f}")
    assert up.mean() >= 0.9
    env.close()


def ended_by(env: MotrixVectorEnv, qpos: np.ndarray, qvel: np.ndarray | None = None) -> dict[str, bool]:
    """Write lane 0's state, step once with zero actions, return which terminations fired."""
    ids = np.array([0], np.int32)
    env.sim.reset(ids, qpos[None], np.zeros((1, env.sim.model.nv)) if qvel is None else qvel[None], full=False)
    env.runtime.read_lanes(ids)
    _, _, term, _, info = env.step(np.zeros((1, 12), np.float32))
    assert term[0]
    return {k: bool(v[0]) for k, v in info["final_info"]["termination_terms"].items()}


@pytest.mark.parametrize("case", ["ball_away", "tilted", "on_floor"])
def test_each_termination_fires_for_its_reason(case):
    env = MotrixVectorEnv("Go1BallBalance", 1, compile=False)
    env.reset(seed=0)
    rt = env.runtime
    ball = rt.program.balls[0].joint
    q = env.sim.qpos.numpy()[0].copy()
    if case == "ball_away":  # the ball rolled 0.4 m away, the robot still in the air above where it was
        q[ball.qpos] += 0.4
    elif case == "tilted":  # the base rolled 60 degrees on top of the ball
        q[3:7] = math.cos(math.pi / 6), math.sin(math.pi / 6), 0.0, 0.0
    else:  # the robot on the floor beside the ball
        q[0], q[2] = 1.5, 0.27  # its feet on the floor
    fired = ended_by(env, q)
    assert fired[case], fired
    if case != "on_floor":
        assert not fired["on_floor"]
    env.close()


@pytest.mark.parametrize("field, bad, message", [
    ("radius", 0.0, "radius must be a finite number > 0, got 0.0"),
    ("mass", float("nan"), "mass must be a finite number > 0, got nan"),
    ("softness", -0.01, "softness must be a finite number > 0, got -0.01"),
    ("damping", -1.0, "damping must be a finite number >= 0, got -1.0"),
])
def test_a_ball_with_a_bad_size_or_contact_is_refused_naming_the_field(field, bad, message):
    from motrix_gym.manager.config import Ball

    with pytest.raises(ValueError, match=f"^ball 'ball': {message}$"):
        Ball(**{field: bad})
    Ball(damping=0.0)  # an undamped ball is allowed

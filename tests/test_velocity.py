"""The velocity-tracking family: every task steps with random actions and stays finite; play mode
turns noise, pushes, randomisation and delay off; the quadruped's terms read real physics."""

import dataclasses
import re

import numpy as np
import pytest
import torch

from motrix_gym.envs import TASKS, task_config
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.vector_env import MotrixVectorEnv

WALK = tuple(name for name, entry in TASKS.items() if "velocity tracking" in entry.family)


@pytest.mark.parametrize("task", WALK)
def test_300_random_steps_stay_finite(task):
    env = MotrixVectorEnv(task, 8, compile=False, obs_groups=("policy", "critic"))
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(300):
        obs, rew, term, trunc, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        assert all(np.isfinite(o).all() for o in obs.values()) and np.isfinite(rew).all()
        ended += int((term | trunc).sum())
    assert ended > 0 and env.log["Physics/diverged_lanes"] == 0
    env.close()


def test_play_mode_is_quiet():
    for task in ("G1WalkStairs", "Go1WalkFlat"):
        train, play = task_config(task), task_config(task, mode="play")
        assert train.randomization is not None and play.randomization is None
        assert train.actions.max_delay == 1 and play.actions.max_delay == 0
        assert train.events and not play.events
        assert any(t.noise for t in train.observations["policy"])
        assert not any(t.noise for t in play.observations["policy"])
    with pytest.raises(ValueError, match="mode must be one of"):
        task_config("Go1WalkFlat", mode="fast")


@pytest.mark.parametrize("command, standing", [((0.5, -0.25, 0.75), False), ((0, 0, 0), True)])
def test_a_fixed_command_holds_through_resamples_and_resets(command, standing):
    import torch

    env = MotrixVectorEnv("Go1WalkRough", 4, compile=False, command=command)
    env.reset(seed=0)
    c = env.runtime.ctx.commands["base_velocity"]
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(550):  # past the 10 s resampling, and through resets (random actions fall)
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        ended += int((term | trunc).sum())
        assert torch.equal(c.value[:4], torch.tensor([command] * 4, dtype=torch.float32))
        assert c.standing[:4].tolist() == [standing] * 4
    assert ended > 0
    env.close()


@pytest.mark.parametrize("compile", [False, True])
def test_hold_is_a_fixed_command_given_later(compile):
    """A command held after the reset runs the lanes as the same command given at make does, bit
    for bit (the RNG streams advance alike); the next hold replaces it, zero makes lanes stand."""
    import torch

    command = (0.5, -0.25, 0.75)
    held = MotrixVectorEnv("Go1WalkFlat", 4, compile=compile, progress=False)
    made = MotrixVectorEnv("Go1WalkFlat", 4, compile=compile, progress=False, command=command)
    held.reset(seed=3)
    made.reset(seed=3)
    c = held.runtime.ctx.commands["base_velocity"]
    c.hold(command)
    rng = np.random.default_rng(0)
    ended = 0
    for i in range(550):  # past the 10 s resampling, and through resets (random actions fall)
        if i == 540:
            c.hold((0, 0, 0))
        a = rng.uniform(-1, 1, held.action_space.shape).astype(np.float32)
        out_h, out_m = held.step(a), made.step(a)
        if i < 540:
            for x, y in zip(out_h[:4], out_m[:4]):
                np.testing.assert_array_equal(x, y)
        ended += int((out_h[2] | out_h[3]).sum())
        want, standing = ((0.0, 0.0, 0.0), True) if i >= 540 else (command, False)
        assert torch.equal(c.value[:4], torch.tensor([want] * 4))
        assert c.standing[:4].tolist() == [standing] * 4
    assert ended > 0
    assert c.ranges == ((-1.0, 1.0),) * 3  # the task's, for a person steering within them
    for bad in ((1, 2), (0, 0, float("inf")), "1,0,0"):
        with pytest.raises(ValueError, match="hold's value must be"):
            c.hold(bad)
    assert torch.equal(c.value[:4], torch.zeros(4, 3))
    held.close()
    made.close()
    env = MotrixVectorEnv("Go1WalkFlat", 2, compile=False, heading_command=True)
    with pytest.raises(ValueError, match="draws headings"):
        env.runtime.ctx.commands["base_velocity"].hold(command)
    env.close()


@pytest.mark.parametrize("bad", [(1.0, 0.0), "1,0,0", 1.0, (True, 0, 0), (float("nan"), 0, 0), (1, 0, None)])
def test_a_bad_command_is_refused(bad):
    with pytest.raises(ValueError, match=r"Go1WalkFlat: command must be \(vx, vy, yaw_rate\)"):
        task_config("Go1WalkFlat", command=bad)


def test_vector_kernels_where_terms_do_much_per_lane():
    """Inductor's vector code pays for its compile time on a height scan's points and on motion
    tracking's bodies, nowhere else (docs/performance.md): in the graphs that observe a group
    with a scan, and in every graph of a tracking task."""
    from motrix_gym.mdp.terrain import height_scan

    for task in WALK:
        cfg = task_config(task)
        scans = {g for g, terms in cfg.observations.items() if any(t.func is height_scan for t in terms)}
        assert set(cfg.vector_kernels) == scans, task
        for groups in [(), ("policy",), ("critic",), ("policy", "critic")]:
            assert cfg.vector_graph(groups) == bool(scans & set(groups)), (task, groups)
    assert task_config("G1WalkRough").vector_kernels == ()  # neither its policy nor its critic observes a scan
    assert task_config("G1WalkStairs").vector_kernels == ("policy", "critic")
    assert all(task_config(t).vector_kernels == ("tracking" in TASKS[t].family) for t in TASKS if t not in WALK)


def test_each_graph_is_compiled_with_vector_code_only_where_it_observes_a_scan():
    from motrix_gym.manager.terms import ObservationTerm
    from motrix_gym.mdp.terrain import height_scan
    from motrix_gym.vector_env import build_runtime

    cfg = task_config("G1WalkRough")  # with a scan its critic alone observes
    critic = (*cfg.observations["critic"], ObservationTerm("height_scan", height_scan))
    cfg = dataclasses.replace(cfg, observations={**cfg.observations, "critic": critic}, vector_kernels=("critic",))
    rt = build_runtime(cfg, 2, compile=True)  # graphs set up, none compiled yet
    simd = {g.name: "cpp.simdlen" not in g._options for g in rt.graphs(("policy", "critic"))}
    simd["step[policy]"] = "cpp.simdlen" not in rt.step_graph(("policy",))._options
    assert simd == {"step[policy,critic]": True, "step[policy]": False, "reset": False, "observe[policy]": False,
                    "observe[critic]": True}
    rt.sim.close()


def test_quadruped_terms_see_torques_accelerations_and_slip():
    env = MotrixVectorEnv("Go1WalkFlat", 4, compile=False)
    env.reset(seed=0)
    rt = env.runtime
    rng = np.random.default_rng(1)
    for _ in range(30):
        env.step(rng.uniform(-1, 1, (4, 12)).astype(np.float32))
    names = list(rt.reward_names)
    terms = rt.reward_terms[:4]
    for name in ("joint_torques", "joint_acc", "lin_vel_z"):
        assert (terms[:, names.index(name)] < 0).all(), name  # penalties from the physics' real values
    np.testing.assert_allclose(rt.ctx.actuator_force[:4].numpy(), env.sim.batch.bind("actuator_force"), rtol=1e-6)
    feet = rt.ctx.commands["feet"]
    assert feet.contact[:4].any() and np.isfinite(feet.vel[:4].numpy()).all()
    env.close()


def test_the_command_curriculum_widens_a_lane_s_commands_after_it_tracked_to_its_time_out():
    import torch

    n = 16
    env = MotrixVectorEnv("Go1WalkFlat", n, compile=False, command_curriculum=True, autoreset_mode="Disabled")
    env.reset(seed=0)
    ctx = env.runtime.ctx
    c = ctx.commands["base_velocity"]
    first = c.value[:n].clone()
    assert c.level[:n].tolist() == [0] * n and first.abs().max() <= 0.25
    assert env.log["Curriculum/command_scale"] == 0.25
    # The planar velocity error is summed over the episode, step by step.
    errors = torch.zeros(n)
    for _ in range(5):
        env.step(np.zeros(env.action_space.shape, np.float32))
        errors += c.metrics(ctx)["lin_vel_error"][:n]
    torch.testing.assert_close(c.error_sum[:n], errors)

    def end_episodes(timed_out: torch.Tensor, mean_error: torch.Tensor) -> None:
        ctx.episode_step[:n] = 1000
        ctx.truncated[:n] = timed_out
        c.error_sum[:n] = mean_error * 1000
        env.reset(options={"reset_mask": np.ones(n, bool)})

    lanes = torch.arange(n)
    tracked, timed_out = lanes < 8, lanes < 12  # 8-11 ran to the time-out, tracking badly; 12-15 fell
    end_episodes(timed_out, torch.where(tracked, 0.1, 0.4))
    assert c.level[:n].tolist() == [1] * 8 + [0] * 8
    assert c.value[:8].abs().max() <= 0.5 and c.value[:8].abs().max() > 0.25 and c.value[8:n].abs().max() <= 0.25
    assert env.log["Curriculum/command_scale"] == pytest.approx((8 * 0.5 + 8 * 0.25) / n)
    end_episodes(timed_out, torch.full((n,), 0.1))
    assert c.level[:n].tolist() == [2] * 8 + [1] * 4 + [0] * 4
    end_episodes(torch.zeros(n, dtype=torch.bool), torch.full((n,), 0.1))  # every lane fell
    assert c.level[:n].tolist() == [1] * 8 + [0] * 8
    env.reset(seed=0)  # a seeded reset replays the run: every lane starts again at the first level
    assert c.level[:n].tolist() == [0] * n and torch.equal(c.value[:n], first)
    env.close()


def ended_lanes(env: MotrixVectorEnv, seed: int = 1) -> np.ndarray:
    """Step with large random actions until lanes end (and are reset, SAME_STEP); those lanes."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        _, _, terminated, truncated, _ = env.step((rng.standard_normal(env.action_space.shape) * 3).astype(np.float32))
        if (terminated | truncated).any():
            return np.flatnonzero(terminated | truncated)
    raise AssertionError("no lane ended in 300 steps")


def test_a_lane_reset_again_before_its_next_step_is_not_judged_again():
    """A fall is judged once, at the reset that ends its episode: an explicit ``reset()`` right
    after that (the lane's new episode has run no step) moves neither curriculum."""
    env = MotrixVectorEnv("Go1WalkStairs", 16, compile=False, command_curriculum=True)
    env.reset(seed=0)
    ended = ended_lanes(env)
    cmds = env.runtime.ctx.commands
    terrain, velocity = cmds["terrain"], cmds["base_velocity"]
    terrain.level[:] = 3  # room to move either way
    velocity.level[:] = 1
    velocity.value[:] = torch.tensor([1.0, 0.0, 0.0])  # 20 m asked: judged, a lane at its spawn would move down
    env.reset()
    assert (terrain.level[ended] == 3).all() and (velocity.level[ended] == 1).all()
    others = np.setdiff1d(np.arange(16), ended)
    assert (terrain.level[others] == 2).all() and (velocity.level[others] == 0).all()  # episodes cut short
    env.close()


def test_with_the_command_curriculum_a_lane_runs_the_same_beside_any_number_of_lanes():
    """Zero actions: the Go1 stands through its 20 s episodes while the commands it does not follow
    are small, so lanes move up at their time-outs; lanes 0-3 of 4 and of 8 stay bit-identical."""
    runs = {}
    for n in (4, 8):
        env = MotrixVectorEnv("Go1WalkFlat", n, compile=False, command_curriculum=True)
        obs, _ = env.reset(seed=3)
        seen = [obs[:4].copy()]
        for _ in range(1010):
            seen.append(env.step(np.zeros(env.action_space.shape, np.float32))[0][:4].copy())
        runs[n] = (np.stack(seen), env.runtime.ctx.commands["base_velocity"].level[:4].tolist())
        env.close()
    np.testing.assert_array_equal(runs[4][0], runs[8][0])
    assert runs[4][1] == runs[8][1] and max(runs[4][1]) == 1, runs[4][1]


def heading_rate(env: MotrixVectorEnv) -> np.ndarray:
    """The yaw rate a heading command asks of each lane, from the base's yaw now (numpy)."""
    rt, n = env.runtime, env.num_envs
    c = rt.ctx.commands["base_velocity"]
    w, x, y, z = rt.ctx.root_quat()[:n].double().numpy().T
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    error = np.remainder(c.target[:n].double().numpy() - yaw + np.pi, 2 * np.pi) - np.pi
    return np.where(c.standing[:n].numpy(), 0.0, np.clip(0.5 * error, -1.0, 1.0))


def test_a_heading_command_asks_the_yaw_rate_that_turns_the_base_towards_its_heading():
    """From the reset pose on (the first observation of every episode included) and at every step,
    compiled as eager: the command's yaw rate is the heading controller's on the base's yaw."""
    n = 16
    envs = [MotrixVectorEnv("Go1WalkFlat", n, compile=c, progress=False, heading_command=True) for c in (False, True)]
    cols = envs[0].runtime.observation_columns("policy")["command"]
    obs = [e.reset(seed=4)[0] for e in envs]
    c = envs[0].runtime.ctx.commands["base_velocity"]
    targets = c.target[:n].numpy()
    assert (np.abs(targets) <= np.pi).all() and np.ptp(targets) > 2.0  # headings drawn all round
    started = 0
    for t in range(80):
        for e, o in zip(envs, obs):
            np.testing.assert_allclose(o[:, cols][:, 2], heading_rate(e), atol=2e-6)
        steer = ~c.standing[:n].numpy()
        assert steer.any() and np.abs(obs[0][steer, cols][:, 2]).max() > 0.1
        np.testing.assert_allclose(obs[1], obs[0], rtol=1e-5, atol=1e-5)
        actions = np.random.default_rng(t).uniform(-1.5, 1.5, (n, 12)).astype(np.float32)
        steps = [e.step(actions) for e in envs]
        obs = [s[0] for s in steps]
        started += int((steps[0][2] | steps[0][3]).sum())  # reset: their heading control from the new pose
    assert started > 0
    for e in envs:
        e.close()


@pytest.mark.parametrize("options, message", [
    ({"command_curriculum": 1}, "command_curriculum must be True or False"),
    ({"command_curriculum": True, "mode": "play"}, "does not go with mode=play"),
    ({"command_curriculum": True, "command": (0.5, 0, 0)}, "does not go with a fixed command"),
    ({"heading_command": "yes"}, "heading_command must be True or False"),
    ({"heading_command": True, "command": (0.5, 0, 0)}, "a fixed command gives its own yaw rate"),
])
def test_a_command_option_that_cannot_apply_is_refused(options, message):
    with pytest.raises(ValueError, match=f"Go1WalkFlat: .*{message}"):
        task_config("Go1WalkFlat", **options)


@pytest.mark.parametrize("path, value, message", [
    ("commands.base_velocity.params.ranges.0", (1.0, -1.0), "velocity command: ranges must be three (lo, hi) pairs "
     "of finite numbers with lo <= hi (vx, vy, yaw rate), got ((1.0, -1.0), (-1.0, 1.0), (-1.0, 1.0))"),
    ("commands.base_velocity.params.standing_fraction", 1.5, "parameter 'standing_fraction' must be a finite number "
                                                             ">= 0 and <= 1, got 1.5"),
    ("commands.base_velocity.params.heading_gain", 0.0, "parameter 'heading_gain' must be a finite number > 0, "
                                                        "got 0.0"),
    # a default of None takes any value through overrides: the annotation (a tuple of two numbers)
    # and the command's own check judge it
    ("commands.base_velocity.params.heading", 5.0, "parameter 'heading' must be a tuple of 2 numbers, got 5.0"),
    ("commands.base_velocity.params.heading", (0.0, "x"), "parameter 'heading' item 1 must be a finite number, got "
                                                          "'x' (in (0.0, 'x'))"),
    ("commands.base_velocity.params.heading", (1.0, -1.0), "velocity command: heading must be (lo, hi) with lo <= hi, "
                                                           "got (1.0, -1.0)"),
])
def test_a_velocity_command_with_bad_parameters_is_refused_naming_the_term(path, value, message):
    with pytest.raises(TaskConfigError, match="^command term 'base_velocity': " + re.escape(message)):
        MotrixVectorEnv("Go1WalkFlat", 2, compile=False, overrides={path: value})


def test_what_a_term_raises_at_its_first_call_names_the_term():
    """``command`` reads any command's value; one without a value fails when the env is made."""
    with pytest.raises(TaskConfigError, match=re.escape("observation[policy] term 'command': AttributeError: "
                                                        "'FeetState' object has no attribute 'value'")):
        MotrixVectorEnv("Go1WalkFlat", 2, compile=False, overrides={"observations.policy.command.params.name": "feet"})


def test_a_negative_first_terrain_level_is_refused():
    """It would index the tile grid from its end: lanes starting on the hardest rows."""
    with pytest.raises(TaskConfigError, match=re.escape("command term 'terrain': parameter 'max_init_level' must be "
                                                        "int >= 0, got int -1")):
        MotrixVectorEnv("G1WalkRough", 2, compile=False, overrides={"commands.terrain.params.max_init_level": -1})


@pytest.mark.parametrize("task, path, message", [
    ("G1WalkFlat", "commands.base_velocity.params.resample_s", "command term 'base_velocity': parameter 'resample_s' "
                                                               "must be a finite number > 0, got 0.0"),
    ("G1WalkFlat", "commands.gait.params.period", "command term 'gait': parameter 'period' must be a finite number "
                                                  "> 0, got 0.0"),
])
def test_a_period_of_zero_seconds_is_refused(task, path, message):
    with pytest.raises(TaskConfigError, match=re.escape(message)):
        MotrixVectorEnv(task, 2, compile=False, overrides={path: 0.0})


@pytest.mark.parametrize("task, path, value, message", [
    ("G1WalkRough", "resets.default_pose.params.origins", "base_velocity",
     "reset term 'default_pose': parameter 'origins': command 'base_velocity' is a VelocityCommand, the term reads "
     "a TerrainCurriculum"),
    ("G1WalkFlat", "rewards.feet_air_time.params.feet", "gait",
     "reward term 'feet_air_time': parameter 'feet': command 'gait' is a GaitClock, the term reads a FeetState"),
    ("G1WalkFlat", "commands.gait.params.command", "feet",
     "command term 'gait': parameter 'command': command 'feet' is a FeetState, the term reads a VelocityCommand"),
    ("G1WalkFlat", "observations.policy.gait_phase.params.name", "base_velocity",
     "observation[policy] term 'gait_phase': parameter 'name': command 'base_velocity' is a VelocityCommand, the "
     "term reads a GaitClock"),
])
def test_a_term_that_names_a_command_of_another_class_is_refused_naming_both(task, path, value, message):
    with pytest.raises(TaskConfigError, match="^" + re.escape(message) + "$"):
        MotrixVectorEnv(task, 2, compile=False, overrides={path: value})


@pytest.mark.parametrize("task, path, term", [
    ("G1WalkFlat", "rewards.track_lin_vel.params.command", "reward term 'track_lin_vel'"),
    ("G1WalkFlat", "rewards.feet_air_time.params.feet", "reward term 'feet_air_time'"),
    ("G1WalkFlat", "rewards.feet_phase.params.clock", "reward term 'feet_phase'"),
    ("G1WalkFlat", "commands.gait.params.command", "command term 'gait'"),
    ("G1WalkRough", "commands.terrain.params.command", "command term 'terrain'"),
    ("G1WalkRough", "resets.default_pose.params.origins", "reset term 'default_pose'"),
    ("G1WbtDance", "observations.policy.command.params.command", "observation[policy] term 'command'"),
    ("G1WbtDance", "resets.motion_start.params.command", "reset term 'motion_start'"),
    ("G1WbtDance", "terminations.anchor_height.params.command", "termination term 'anchor_height'"),
])
def test_a_term_that_names_a_command_the_task_lacks_is_refused_naming_both(task, path, term):
    param = path.rsplit(".", 1)[1]
    with pytest.raises(TaskConfigError, match=re.escape(
            f"{term}: parameter {param!r}: no command 'nope' (the task's commands: [")):
        MotrixVectorEnv(task, 2, compile=False, overrides={path: "nope"})

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.wrappers.vector import DictInfoToList, RecordEpisodeStatistics

from conftest import ENV_ID, make, random_actions


def test_make_vec_is_native_vector_env():
    env = gym.make_vec(ENV_ID, num_envs=16, compile=False)
    try:
        assert isinstance(env.unwrapped, VectorEnv)
        assert not isinstance(env.unwrapped, (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv))
        assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        assert env.observation_space.shape == (16, env.single_observation_space.shape[0])
        assert env.action_space.shape == (16, 29)
    finally:
        env.close()


def test_thousand_steps_with_autoreset_and_final_obs():
    env = gym.make_vec(ENV_ID, num_envs=16, compile=False)
    obs, _ = env.reset(seed=3)
    acts = random_actions(1000, 16, 29, std=1.0)
    ended = 0
    for a in acts:
        obs, rew, term, trunc, info = env.step(a)
        assert obs.dtype == np.float32 and np.isfinite(obs).all()
        assert rew.dtype == np.float32 and np.isfinite(rew).all()
        assert term.dtype == np.bool_ and trunc.dtype == np.bool_
        done = term | trunc
        if done.any():
            ended += done.sum()
            np.testing.assert_array_equal(info["_final_obs"], done)
            for i in range(16):
                if done[i]:
                    assert info["final_obs"][i].shape == obs.shape[1:]
                    assert np.isfinite(info["final_obs"][i]).all()
                    assert not np.array_equal(info["final_obs"][i], obs[i])  # obs is already reset
                else:
                    assert info["final_obs"][i] is None
            dense = env.unwrapped.final_obs["policy"]
            assert dense.shape == obs.shape
            np.testing.assert_array_equal(dense.numpy()[done], np.stack(list(info["final_obs"][done])))
            fi = info["final_info"]
            np.testing.assert_array_equal(fi["_episode"], done)
            assert (fi["episode"]["l"][done] >= 1).all()
            assert set(fi["reward_terms"]) == set(env.unwrapped.runtime.reward_names)
            assert "episode" not in info
        else:
            assert "final_obs" not in info
    assert ended > 16  # random actions end episodes well within 1000 steps
    assert "Episode_Reward/track_lin_vel" in env.unwrapped.log
    env.close()


def test_final_episode_return_equals_sum_of_rewards():
    env = make(4)
    env.reset(seed=1)
    running = np.zeros(4)
    checked = 0
    for a in random_actions(200, 4, 29):
        _, rew, term, trunc, info = env.step(a)
        running += rew
        done = term | trunc
        if done.any():
            ep = info["final_info"]["episode"]
            np.testing.assert_allclose(ep["r"][done], running[done], rtol=1e-4, atol=1e-5)
            terms = info["final_info"]["reward_terms"]
            total = sum(terms[k] for k in terms)
            np.testing.assert_allclose(total[done], running[done], rtol=1e-4, atol=1e-5)
            running[done] = 0
            checked += done.sum()
    assert checked > 0
    env.close()


def test_wrappers_step():
    env = DictInfoToList(RecordEpisodeStatistics(gym.make_vec(ENV_ID, num_envs=8, compile=False)))
    env.reset(seed=0)
    saw_episode = False
    for a in random_actions(150, 8, 29):
        _, _, term, trunc, infos = env.step(a)
        assert isinstance(infos, list) and len(infos) == 8
        for i in np.flatnonzero(term | trunc):
            assert "episode" in infos[i] and "final_obs" in infos[i]
            saw_episode = True
    assert saw_episode
    env.close()


def test_torch_output_and_obs_groups():
    env = make(4, output="torch", obs_groups=("policy", "critic"))
    obs, _ = env.reset(seed=0)
    assert isinstance(env.single_observation_space, gym.spaces.Dict)
    assert set(obs) == {"policy", "critic"}
    assert obs["critic"].shape[1] == obs["policy"].shape[1] + 3
    obs2, rew, term, trunc, _ = env.step(torch.zeros(4, 29))
    assert all(isinstance(x, torch.Tensor) for x in (obs2["policy"], rew, term, trunc))
    assert obs2["policy"].dtype == torch.float32 and term.dtype == torch.bool
    env.close()


def test_copy_semantics():
    env = make(4, copy=True)
    obs, _ = env.reset(seed=0)
    kept = obs.copy()
    for _ in range(3):
        env.step(np.zeros((4, 29)))
    np.testing.assert_array_equal(obs, kept)  # never written again
    env.close()
    env = make(4, copy=False)
    a, _ = env.reset(seed=0)
    b, *_ = env.step(np.zeros((4, 29)))
    a_val = a.copy()
    c, *_ = env.step(np.zeros((4, 29)))
    assert np.shares_memory(a, c)  # double buffer: the view is reused two calls later
    assert not np.array_equal(a_val, c)
    env.close()


def test_close_idempotent_and_calls_after_close_raise():
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    env = make(2)
    env.reset(seed=0)
    assert not env.closed
    wrapped = RecordEpisodeStatistics(env)
    env.close()
    assert env.closed and wrapped.closed  # Gymnasium's flag, as wrappers read it
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros((2, 29)))
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_step_before_reset_raises():
    env = make(2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((2, 29)))
    env.close()


def test_single_env_checker():
    from gymnasium.utils.env_checker import check_env

    env = gym.make(ENV_ID)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_single_env_refuses_reset_options_it_does_not_take():
    env = gym.make(ENV_ID).unwrapped
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['reset_mask'\]"):
        env.reset(options={"reset_mask": np.ones(1, bool)})  # one lane, no autoreset: a plain reset() does it
    with pytest.raises(TypeError, match="options must be a dict or None, got list"):
        env.reset(options=["reset_mask"])
    env.close()


def test_current_kinematics_option():
    """By default body frames describe the new state; without it, the start of the last substep."""
    import mujoco

    for current in (True, False):
        env = make(2, current_kinematics=current)
        env.reset(seed=0)
        env.step(np.zeros((2, 29), np.float32))
        data = mujoco.MjData(env.sim.model)
        data.qpos[:] = env.sim.qpos[0].numpy()
        mujoco.mj_kinematics(env.sim.model, data)
        gap = np.abs(data.xpos - env.sim.views["xpos"][0].numpy()).max()
        assert (gap < 1e-9) if current else (gap > 1e-6), gap
        env.close()


def test_runtime_threads_leave_the_callers_setting():
    """The runtime runs with its own torch thread count; the caller's comes back after each call,
    also when a term raises inside it."""
    old = torch.get_num_threads()
    env = make(4, torch_threads=1)
    try:
        torch.set_num_threads(2)
        env.reset(seed=0)
        env.step(np.zeros((4, 29), np.float32))
        assert torch.get_num_threads() == 2
        seen = []
        env.runtime.apply_action = lambda a: (seen.append(torch.get_num_threads()), 1 / 0)
        with pytest.raises(ZeroDivisionError):
            env.step(np.zeros((4, 29), np.float32))
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(old)
        env.close()


def test_markers_are_computed_with_the_runtimes_threads():
    """``render`` computes the markers (batched torch ops, as a step's) with the env's torch
    threads, and gives the caller's back: torch's OpenMP workers spinning beside the window's own
    thread slowed a window on a height-scan task to about half its control rate."""
    old = torch.get_num_threads()
    env = make(2, torch_threads=1, render_mode="rgb_array")
    try:
        torch.set_num_threads(2)
        env.reset(seed=0)
        command, seen = env.runtime.ctx.commands["base_velocity"], []
        markers = command.markers
        command.markers = lambda ctx: (seen.append(torch.get_num_threads()), markers(ctx))[1]
        env.render()
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(old)
        env.close()


@pytest.mark.parametrize("compile", [False, True])
def test_observation_term_scale_noise_clip_order(compile):
    """An observation term is ``clip(func * scale + noise)``, column for column beside the group's
    other terms: a constant 5 scaled by 2 with noise in [-1, 1) and clipped at 10.5 lies in
    [9, 10.5], reaches the bound on some lanes and stays under it on others."""
    import dataclasses

    from motrix_gym.envs import task_config
    from motrix_gym.manager.terms import ObservationTerm
    from motrix_gym.vector_env import MotrixVectorEnv

    def five(env):
        return torch.full_like(env.qpos[:, :3], 5.0)

    cfg = task_config("G1WalkFlat")
    policy = cfg.observations["policy"]
    term = ObservationTerm("five", five, scale=2.0, noise=(-1.0, 1.0), clip=(-10.5, 10.5))
    cfg = dataclasses.replace(cfg, observations={**cfg.observations, "policy": (*policy, term)})
    env = MotrixVectorEnv(cfg, 64, compile=compile, progress=False)
    obs, _ = env.reset(seed=3)
    cols = obs[:, -3:]
    assert (cols >= 9.0).all() and (cols <= 10.5).all()
    assert (cols == 10.5).any() and (cols < 10.5).any()
    # The group draws its noise in one call, column by column: a term added last leaves the first
    # observation of the others as it was.
    plain = MotrixVectorEnv("G1WalkFlat", 64, compile=compile, progress=False)
    np.testing.assert_array_equal(obs[:, :-3], plain.reset(seed=3)[0])
    plain.close()
    env.close()


def test_forces_applied_to_one_lane_move_its_robot_alone_until_replaced_or_reset(backend):
    """What a drag in the live window does (``SimBackend.apply_forces``): a lift of twice the
    robot's weight on lane 0's base raises it alone, at every step until the forces are replaced
    (the robot in the air then gains 1 g of upward speed); zeros let it go (it then loses 1 g), and
    a reset clears forces left on."""
    from motrix_gym.vector_env import MotrixVectorEnv

    env = MotrixVectorEnv("Go1WalkFlat", 2, backend=backend, compile=False, progress=False, mode="play",
                          command=(0.0, 0.0, 0.0))
    zero = np.zeros((2, 12), np.float32)
    lift = np.zeros((env.sim.model.nbody, 6))
    lift[env.runtime.program.root.body, 2] = 2 * 9.81 * env.sim.model.body_mass.sum()
    seconds = 5 * env.task.step_dt  # in the air, before the lifted robot tips over

    def after(steps: int) -> tuple[np.ndarray, float]:
        """Both lanes' base heights and lane 0's upward speed after ``steps`` steps."""
        for _ in range(steps):
            env.step(zero)
        return env.sim.qpos[:, 2].cpu().numpy().copy(), float(env.sim.qvel[0, 2])

    env.reset(seed=0)
    standing, _ = after(5)
    env.sim.apply_forces(0, lift)
    lifted, speed = after(5)
    assert lifted[0] > lifted[1] + 0.03 and lifted[1] < standing[1] + 1e-3  # lane 1 still settles
    assert after(5)[1] == pytest.approx(speed + 9.81 * seconds, rel=0.05)  # still on: 2 g up, 1 g down
    speed = after(0)[1]
    env.sim.apply_forces(0, np.zeros_like(lift))
    assert after(5)[1] == pytest.approx(speed - 9.81 * seconds, rel=0.05)  # let go: falling
    env.sim.apply_forces(0, lift)
    env.reset(seed=0)
    again, _ = after(5)
    np.testing.assert_allclose(again, standing, atol=1e-6)  # the reset let go: both lanes as at first
    env.close()


def test_the_lane_a_window_shows_is_a_lane_of_the_env():
    """``viewer_lane``: 0 unless set; anything but one of the env's lanes is refused, changing
    nothing."""
    env = make(4)
    assert env.viewer_lane == 0
    env.viewer_lane = 3
    for bad in (-1, 4, 1.5, True, "1", np.int64(2)):
        with pytest.raises(ValueError, match=r"viewer_lane must be an int in \[0, 3\] \(a lane of this env\), got"):
            env.viewer_lane = bad
    assert env.viewer_lane == 3
    env.close()

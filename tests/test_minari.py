"""Minari datasets: episodes recorded from every lane at once hold what a plain step loop sees,
lane by lane; they load back through Minari, with the task to evaluate on; the same seed records
the same dataset; a lane's episodes do not depend on the lanes beside it; bad input changes
nothing."""

import importlib.util
from pathlib import Path

import gymnasium as gym
import minari
import numpy as np
import pytest
import torch

from conftest import tiny
from motrix_gym.__main__ import main
from motrix_gym.integrations.minari import DatasetError, record_dataset, record_episodes
from motrix_gym.registry import env_id
from motrix_gym.sim.backend import MissingExtra
from motrix_gym.vector_env import MotrixVectorEnv

TASK = "Go1BallBalance"
SHORT = {"overrides": {"episode_length_s": 0.3}}  # 15-step time-outs, beside falls


def policy(obs: np.ndarray) -> np.ndarray:
    """Deterministic in the observation (so lane i acts alike beside any lanes), at times outside
    the action space [-5, 5]."""
    return 6.0 * np.sin(7.0 * obs[:, :12])


@pytest.fixture
def datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    return tmp_path / "datasets"


def by_hand(n: int, per_lane: list[int], seed: int) -> list[dict[str, list]]:
    """The first ``per_lane[i]`` episodes of lane i, lane by lane, from a step loop that looks at
    each lane of each step."""
    env = MotrixVectorEnv(TASK, n, compile=False, **SHORT)
    obs, _ = env.reset(seed=seed)
    current = [{"obs": [obs[i]], "act": [], "rew": [], "term": [], "trunc": []} for i in range(n)]
    done_eps: list[list[dict]] = [[] for _ in range(n)]
    while any(len(done_eps[i]) < per_lane[i] for i in range(n)):
        act = policy(obs)
        obs, rew, term, trunc, info = env.step(act)
        for i in range(n):
            ep = current[i]
            ep["act"].append(np.clip(act[i], -5.0, 5.0).astype(np.float32))
            ep["rew"].append(rew[i])
            ep["term"].append(term[i])
            ep["trunc"].append(trunc[i])
            if term[i] or trunc[i]:
                ep["obs"].append(info["final_obs"][i])
                done_eps[i].append(ep)
                current[i] = {"obs": [obs[i]], "act": [], "rew": [], "term": [], "trunc": []}
            else:
                ep["obs"].append(obs[i])
    env.close()
    return [ep for i in range(n) for ep in done_eps[i][: per_lane[i]]]


def test_recorded_episodes_are_a_step_loops_lane_by_lane():
    env = MotrixVectorEnv(TASK, 4, compile=False, **SHORT)
    buffers = record_episodes(env, policy, episodes=6, seed=2)
    expected = by_hand(4, [2, 2, 1, 1], seed=2)  # 6 episodes of 4 lanes: the first two lanes record two
    assert [b.id for b in buffers] == list(range(6))
    for b, e in zip(buffers, expected):
        np.testing.assert_array_equal(b.observations, np.stack(e["obs"]))
        np.testing.assert_array_equal(b.actions, np.stack(e["act"]))
        assert b.rewards == [float(r) for r in e["rew"]]
        assert b.terminations == e["term"] and b.truncations == e["trunc"]
        assert len(b.observations) == len(b.actions) + 1
        assert not any(b.terminations[:-1] + b.truncations[:-1])
        terms = b.infos["reward_terms"]
        assert set(terms) == set(env.runtime.reward_names)
        assert all(len(t) == len(b.observations) for t in terms.values())
        total = np.sum(list(terms.values()), axis=0)
        assert total[0] == 0.0
        np.testing.assert_allclose(total[1:], b.rewards, rtol=1e-5, atol=1e-6)  # the terms sum to the reward
    ends = {"fall" if b.terminations[-1] else "time-out" for b in buffers}
    assert ends == {"fall", "time-out"}  # both kinds of end are covered
    raw = np.concatenate([b.actions for b in buffers])
    assert np.abs(raw).max() == 5.0  # stored as applied: clipped to the action space
    env.close()


def test_a_dataset_loads_back_with_its_task(datasets):
    ds = record_dataset("motrix/ball/test-v0", env_id(TASK), policy, episodes=5, num_envs=3, seed=1,
                        task_options=SHORT, algorithm_name="a sine of the observation", author="tests",
                        description="test")
    loaded = minari.load_dataset("motrix/ball/test-v0")
    assert loaded.total_episodes == 5 and loaded.total_steps == ds.total_steps
    assert loaded.storage.metadata["algorithm_name"] == "a sine of the observation"
    single = gym.make(env_id(TASK), compile=False, **SHORT)
    assert loaded.observation_space == single.observation_space
    assert loaded.action_space == single.action_space
    single.close()
    env = loaded.recover_environment()  # the task as recorded, options included
    assert env.unwrapped.vec.task.episode_length_s == 0.3
    assert env.reset(seed=0)[0].shape == loaded.observation_space.shape
    env.close()
    expected = by_hand(3, [2, 2, 1], seed=1)
    for ep, e in zip(loaded.iterate_episodes(), expected):
        np.testing.assert_array_equal(ep.observations, np.stack(e["obs"]))
        np.testing.assert_array_equal(ep.rewards, np.array(e["rew"], np.float64))
        terms = ep.infos["reward_terms"]
        assert "ball_centred" in terms and terms["ball_centred"].shape == (len(ep.observations),)
        np.testing.assert_allclose(np.sum(list(terms.values()), axis=0)[1:], ep.rewards, rtol=1e-5, atol=1e-6)

    again = record_dataset("motrix/ball/test-v1", env_id(TASK), policy, episodes=5, num_envs=3, seed=1,
                           task_options=SHORT)
    other_seed = record_dataset("motrix/ball/test-v2", env_id(TASK), policy, episodes=5, num_envs=3, seed=2,
                                task_options=SHORT)
    for a, b, c in zip(ds.iterate_episodes(), again.iterate_episodes(), other_seed.iterate_episodes()):
        np.testing.assert_array_equal(a.observations, b.observations)
        np.testing.assert_array_equal(a.actions, b.actions)
        assert not np.array_equal(a.observations[0], c.observations[0])


def test_a_dataset_recovers_its_task_with_tuple_overrides(datasets):
    """Minari stores the task's options as JSON, where a tuple comes back as a list."""
    options = {"overrides": {"episode_length_s": 0.1, "events.push.interval_s": (2, 4)}}
    ds = record_dataset("motrix/go1/push-v0", env_id("Go1WalkFlat"), lambda obs: np.zeros((len(obs), 12)),
                        episodes=1, num_envs=1, task_options=options)
    env = ds.recover_environment()
    assert env.unwrapped.vec.task.events[0].interval_s == (2.0, 4.0)
    env.close()


def test_a_lanes_episodes_do_not_depend_on_the_lanes_beside_it(datasets):
    two = record_episodes(MotrixVectorEnv(TASK, 2, compile=False, **SHORT), policy, episodes=4, seed=5)
    eight = record_episodes(MotrixVectorEnv(TASK, 8, compile=False, **SHORT), policy, episodes=16, seed=5)
    # two lanes of two episodes each, and the first two lanes of eight
    for a, b in zip(two, eight[:4]):
        np.testing.assert_array_equal(a.observations, b.observations)
        np.testing.assert_array_equal(a.actions, b.actions)


def test_random_actions_are_each_lanes_own(datasets):
    """The random baseline draws lane i's actions from its own stream: its episodes are the same
    beside any number of lanes, as a policy's are."""
    from motrix_gym.learn.dataset import record

    two = record(env_id(TASK), "motrix/ball/random-v0", "random", episodes=2, lanes=2, seed=4, task_options=SHORT,
                 progress=False)
    four = record(env_id(TASK), "motrix/ball/random-v1", "random", episodes=4, lanes=4, seed=4, task_options=SHORT,
                  progress=False)
    for a, b in zip(two.iterate_episodes(), four.iterate_episodes()):  # the first two lanes' episodes
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.observations, b.observations)
    actions = np.concatenate([ep.actions for ep in four.iterate_episodes()])
    assert -5.0 <= actions.min() < -4.0 and 4.0 < actions.max() < 5.0  # uniform over the action space
    assert abs(actions.std() - 10 / np.sqrt(12)) < 0.2


def test_a_networks_lane_acts_alike_beside_any_number_of_lanes(datasets, tmp_path):
    """A feed-forward checkpoint's batched inference rounds a row otherwise at another batch size;
    the recorder's blocks of one size keep lane i's episodes the same beside 2, 8 or 70 lanes."""
    from motrix_gym.learn.dataset import checkpoint_policy
    from motrix_gym.learn.train import train

    res = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path / "logs", compile=False, eval_lanes=0,
                progress=False, config=tiny("Go1WalkFlat").with_(actor_hidden=(256, 128), critic_hidden=(8,)))
    recorded = {}
    for n in (2, 8, 70):
        act, starts = checkpoint_policy(res.checkpoint, env_id("Go1WalkFlat"), {})
        env = MotrixVectorEnv("Go1WalkFlat", n, compile=False, overrides={"episode_length_s": 1.0})
        recorded[n] = record_episodes(env, act, n, seed=0, episode_starts=starts)
        env.close()
    for n in (8, 70):
        for a, b in zip(recorded[2], recorded[n]):
            np.testing.assert_array_equal(a.actions, b.actions)
            np.testing.assert_array_equal(a.observations, b.observations)


def test_bad_input_is_refused_and_writes_nothing(datasets):
    record_dataset("motrix/ball/taken-v0", env_id(TASK), policy, episodes=1, num_envs=1, task_options=SHORT)
    before = sorted(p.relative_to(datasets) for p in datasets.rglob("*"))
    with pytest.raises(DatasetError, match="exists already"):
        record_dataset("motrix/ball/taken-v0", env_id(TASK), policy, episodes=1, num_envs=1)
    for bad in ("nameless", "motrix/ball/x-vfour", 7):
        with pytest.raises(DatasetError, match="NAMESPACE/NAME-vVERSION"):
            record_dataset(bad, env_id(TASK), policy, episodes=1, num_envs=1)
    with pytest.raises(ValueError, match="unknown task"):
        record_dataset("motrix/ball/new-v0", "Motrix/Nope-v0", policy, episodes=1)
    with pytest.raises(ValueError, match="task_options must be a mapping"):
        record_dataset("motrix/ball/new-v0", env_id(TASK), policy, episodes=1, task_options=[("mode", "play")])
    for episodes in (0, 2.0, None):
        with pytest.raises(ValueError, match="episodes must be an int >= 1"):
            record_dataset("motrix/ball/new-v0", env_id(TASK), policy, episodes=episodes, num_envs=1)
    with pytest.raises(DatasetError, match="data_format must be one of"):
        record_dataset("motrix/ball/new-v0", env_id(TASK), policy, episodes=1, num_envs=1, data_format="csv")
    if importlib.util.find_spec("pyarrow") is None:
        with pytest.raises(MissingExtra, match=r"arrow storage needs pyarrow: pip install \"minari\[arrow\]\""):
            record_dataset("motrix/ball/new-v0", env_id(TASK), policy, episodes=1, num_envs=1, data_format="arrow")
    assert sorted(p.relative_to(datasets) for p in datasets.rglob("*")) == before

    env = MotrixVectorEnv(TASK, 2, compile=False, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="SAME_STEP"):
        record_episodes(env, policy, 1)
    env.close()
    env = MotrixVectorEnv(TASK, 2, compile=False, obs_groups=("policy", "critic"))
    with pytest.raises(ValueError, match="one observation group"):
        record_episodes(env, policy, 1)
    env.close()
    with pytest.raises(TypeError, match="MotrixVectorEnv"):
        record_episodes(gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync"), policy, 1)
    env = MotrixVectorEnv(TASK, 2, compile=False)
    with pytest.raises(ValueError, match="shape"):  # the env's own check of the policy's actions
        record_episodes(env, lambda obs: np.zeros((2, 11)), 1)
    env.close()


def test_the_command_records_baselines_and_a_recurrent_checkpoint(datasets, tmp_path, capsys):
    """``dataset`` with zero actions, and with a recurrent policy, whose state a lane's new episode
    starts from zero: its dataset holds the actions of a loop over the rsl_rl adapter that zeroes it."""
    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn.dataset import checkpoint_policy
    from motrix_gym.learn.evaluate import start_episodes
    from motrix_gym.learn.play import load_policy
    from motrix_gym.learn.train import train

    short = ["--override", "episode_length_s=0.1"]  # 5-step episodes
    assert main(["dataset", TASK, "motrix/ball/zero-v0", "--checkpoint", "zero", "--episodes", "3", "--num-envs", "2",
                 *short]) == 0
    zero = minari.load_dataset("motrix/ball/zero-v0")
    assert zero.total_episodes == 3 and zero.storage.metadata["algorithm_name"] == "zero actions (the default pose)"
    assert all(not ep.actions.any() for ep in zero.iterate_episodes())
    assert "wrote motrix/ball/zero-v0: 3 episodes" in capsys.readouterr().out

    res = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path / "logs", compile=False, eval_lanes=0,
                progress=False, config=tiny("Go1WalkFlat").with_(rnn_type="gru", rnn_hidden_dim=8))
    assert main(["dataset", "Go1WalkFlat", "motrix/go1/gru-v0", "--checkpoint", str(res.run_dir), "--episodes", "4",
                 "--num-envs", "2", "--seed", "3", *short]) == 0
    recorded = [ep.actions for ep in minari.load_dataset("motrix/go1/gru-v0").iterate_episodes()]

    env = make_rsl_rl(env_id("Go1WalkFlat"), num_envs=2, seed=3, compile=False, progress=False,
                      overrides={"episode_length_s": 0.1})
    act, _ = load_policy(res.checkpoint, env)
    obs, steps = env.get_observations(), []
    start_episodes(act)
    for _ in range(10):  # two 5-step episodes per lane
        with torch.inference_mode():
            actions = act(obs)
            obs, _, dones, _ = env.step(actions)
            start_episodes(act, dones)
        steps.append(actions.numpy())
    env.close()
    by_loop = [np.stack(steps)[k * 5:(k + 1) * 5, lane] for lane in range(2) for k in range(2)]
    assert len(recorded) == 4
    for a, b in zip(recorded, by_loop):
        np.testing.assert_allclose(a, np.clip(b, -5, 5), rtol=0, atol=1e-6)

    # lanes whose episodes start mid-run (the lanes above all end together): theirs start from zero
    act, starts = checkpoint_policy(res.checkpoint, env_id("Go1WalkFlat"), {})
    obs = np.random.default_rng(0).standard_normal((3, 45)).astype(np.float32)
    starts(np.ones(3, bool))
    first = act(obs)
    starts(np.zeros(3, bool))
    second = act(obs)
    starts(np.array([True, False, True]))
    third = act(obs)
    np.testing.assert_array_equal(third[[0, 2]], first[[0, 2]])
    assert not np.allclose(third[1], first[1]) and not np.allclose(second, first)

    with pytest.raises(SystemExit):
        main(["dataset", TASK, "no-version"])
    assert "NAMESPACE/NAME-vVERSION" in capsys.readouterr().err


def test_the_behaviour_cloning_example_clones_a_datasets_actions(datasets, capsys, monkeypatch):
    """examples/behaviour_cloning.py on a dataset of one constant action far from the default pose:
    the clone learns it, and scores as that action does on the task, not as zero actions do."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from examples.behaviour_cloning import first_episode_returns
    from examples.behaviour_cloning import main as clone

    ds = record_dataset("motrix/go1/constant-v0", env_id("Go1WalkFlat"), lambda obs: np.full((len(obs), 12), 2.0),
                        episodes=6, num_envs=3, task_options=SHORT)
    out = clone(["motrix/go1/constant-v0", "--epochs", "100", "--batch-size", "16", "--learning-rate", "1e-2",
                 "--lanes", "3", "--no-compile"])
    assert out["action MSE"] < 1e-3
    assert out["dataset"] == pytest.approx(np.mean([ep.rewards.sum() for ep in ds.iterate_episodes()]))
    # on the same lanes, the clone scores as the recorded policy does, zero actions otherwise
    recorded = first_episode_returns(ds.spec.env_spec, lambda obs: np.full((len(obs), 12), 2.0), 3, 1, compile=False)
    assert abs(out["clone"] - recorded) < 0.25 * abs(out["zero actions"] - recorded)  # measured: 0.065, 0.705
    assert f"{ds.total_steps} transitions of 6 episodes" in capsys.readouterr().out

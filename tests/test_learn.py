"""train and play: every task trains for two tiny iterations and plays a few steps; resume,
ONNX export, starting from another task's checkpoint, and the refusal of checkpoints that carry
code."""

import copy
import json
import logging
import os
import signal
import subprocess
import sys
import time
import warnings

import imageio
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.modules.module import register_module_forward_hook
from torch.optim.optimizer import register_optimizer_step_post_hook

from conftest import needs_gl, tiny
from motrix_gym.learn import checkpoint
from motrix_gym.learn.evaluate import evaluate
from motrix_gym.learn.play import load_policy, play
from motrix_gym.learn.train import train
from motrix_gym.registry import BUILTIN, env_id


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize("task", BUILTIN)
def test_train_two_iterations_and_play(task, tmp_path):
    res = train(env_id(task), iterations=2, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                config=tiny(task))
    assert res.iterations == 2 and res.checkpoint.name == "model_1.pt"
    assert {"config.json", "progress.csv", "curve.png", "summary.json", "model_0.pt"} <= {
        p.name for p in res.run_dir.iterdir()}
    assert list(res.run_dir.glob("events.out.tfevents.*"))  # TensorBoard
    cfg = json.loads((res.run_dir / "config.json").read_text())
    assert (cfg["minutes"], cfg["iterations"]) == (None, 2)  # the budget, for the report's command column
    summary = json.loads((res.run_dir / "summary.json").read_text(), parse_constant=_not_json)
    assert (summary["final_train_mean_return"] is None) == (summary["episodes"] == 0)
    out = play(env_id(task), res.checkpoint, steps=3, progress=False)
    assert out.steps == 3 and set(out.reward_terms) and all(np.isfinite(v) for v in out.reward_terms.values())
    assert all(np.isfinite(v) for v in out.metrics.values())
    assert out.metrics or task == "Go1BallBalance"  # tracking and walking commands report their errors


def test_the_same_seed_trains_the_same_models_bit_for_bit(tmp_path):
    def models(seed: int, folder: str) -> dict:
        res = train(env_id("Go1WalkFlat"), iterations=3, seed=seed, log_dir=tmp_path / folder, compile=False,
                    eval_lanes=0, progress=False, config=tiny("Go1WalkFlat").with_(num_envs=8, num_steps_per_env=8))
        saved = torch.load(res.checkpoint, weights_only=True)
        return {f"{part}.{name}": t for part in ("actor_state_dict", "critic_state_dict")
                for name, t in saved[part].items()}

    first, again, other = models(3, "a"), models(3, "b"), models(4, "c")
    assert first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not torch.equal(first["actor_state_dict.mlp.0.weight"], other["actor_state_dict.mlp.0.weight"])


@needs_gl
def test_train_records_each_checkpoint_in_play_mode_without_changing_the_run(tmp_path):
    def run(folder: str, **video):
        return train(env_id("Go1WalkFlat"), iterations=2, seed=3, log_dir=tmp_path / folder, compile=False,
                     eval_lanes=0, progress=False, config=tiny("Go1WalkFlat").with_(num_envs=8, num_steps_per_env=8),
                     **video)

    plain, filmed = run("plain"), run("filmed", video=True, video_length=6)
    for it in (0, 1):
        a, b = (torch.load(r.run_dir / f"model_{it}.pt", weights_only=True) for r in (plain, filmed))
        for part in ("actor_state_dict", "critic_state_dict"):
            assert a[part].keys() == b[part].keys()
            assert all(torch.equal(a[part][k], b[part][k]) for k in a[part]), (it, part)
    assert not (plain.run_dir / "videos").exists()
    videos = sorted((filmed.run_dir / "videos").iterdir())
    assert [v.name for v in videos] == ["model_0.mp4", "model_1.mp4"]
    for v in videos:
        frames = imageio.mimread(v, memtest=False)
        assert len(frames) == 3 and frames[0].shape == (360, 480, 3) and frames[-1].std() > 0  # 6 steps, every 2nd


def test_resume_continues_iterations_and_optimizer(tmp_path):
    first = train(env_id("G1WalkFlat"), iterations=2, log_dir=tmp_path / "a", compile=False, eval_lanes=0,
                  progress=False, config=tiny("G1WalkFlat"))
    second = train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "b", resume=first.run_dir,
                   compile=False, eval_lanes=0, progress=False)  # a run's folder: its last checkpoint
    assert second.checkpoint.name == "model_2.pt"
    assert json.loads((second.run_dir / "config.json").read_text())["resumed_from"] == str(first.checkpoint)
    ckpt = checkpoint.load(second.checkpoint)
    steps = {int(s["step"]) for s in ckpt["optimizer_state_dict"]["state"].values()}
    assert steps == {3}  # Adam's step count carried on: 3 iterations of 1 epoch x 1 mini-batch
    with pytest.raises(ValueError, match="trained on Motrix/G1WalkFlat-v0"):
        train(env_id("G1WbtDance"), iterations=1, log_dir=tmp_path / "c", resume=first.checkpoint)
    for bad, why in ((tmp_path / "missing" / "a.gif", "does not exist"), (tmp_path / "a.png", "does not end in")):
        with pytest.raises(ValueError, match=why):  # before any frame is made
            play(env_id("G1WalkFlat"), first.checkpoint, out=bad, progress=False)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(ValueError, match="command must be \\(vx, vy, yaw_rate\\)"):  # the task checks play's command
        play(env_id("G1WalkFlat"), first.checkpoint, command=(1.0, 0.0), progress=False)
    # a checkpoint whose models cannot be loaded: its own error, the env closed and no folder left
    state = checkpoint.load(first.checkpoint)
    del state["actor_state_dict"]["mlp.0.bias"]
    broken = tmp_path / "broken" / "model_1.pt"
    broken.parent.mkdir()
    checkpoint.save(broken, {k: v for k, v in state.items() if k not in ("iter", "infos")},
                    {**state["infos"], "iteration": 1})
    with pytest.raises(RuntimeError, match='Missing key.*"mlp.0.bias"'):
        train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "d", resume=broken, compile=False, progress=False)
    assert not list((tmp_path / "d").rglob("config.json"))


def test_ppo_settings_change_by_name_and_a_resumed_run_keeps_its_models(tmp_path):
    first = train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "a", compile=False, eval_lanes=0,
                  progress=False, config=tiny("G1WalkFlat"), ppo={"learning_rate": 3e-4, "schedule": "fixed"})
    saved = json.loads((first.run_dir / "config.json").read_text())["ppo"]
    assert (saved["learning_rate"], saved["schedule"], saved["num_envs"]) == (3e-4, "fixed", 4)
    assert checkpoint.load(first.checkpoint)["optimizer_state_dict"]["param_groups"][0]["lr"] == 3e-4
    second = train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "b", compile=False, eval_lanes=0,
                   progress=False, resume=first.checkpoint, ppo={"learning_rate": 1e-4, "entropy_coef": 0.0})
    assert checkpoint.load(second.checkpoint)["optimizer_state_dict"]["param_groups"][0]["lr"] == 1e-4
    assert json.loads((second.run_dir / "config.json").read_text())["ppo"]["entropy_coef"] == 0.0
    for bad, why in (({"config": tiny("G1WalkFlat")}, "keeps its checkpoint's PPO settings"),
                     ({"ppo": {"actor_hidden": (8,)}}, r"keeps its checkpoint's models: \['actor_hidden'\]"),
                     ({"ppo": {"init_std": 0.5}}, r"\['init_std'\] cannot change"),
                     ({"ppo": {"lr": 1e-4}}, r"unknown setting\(s\) \['lr'\]"),
                     ({"ppo": {"gamma": 1.5}}, r"gamma must be a finite number in \(0, 1\]"),
                     ({"ppo": {"num_envs": 8}, "num_envs": 8}, "not both")):
        with pytest.raises(ValueError, match=why):
            train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "bad", resume=first.checkpoint, **bad)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("text, setting", [
    ("learning_rate=3e-4", ("learning_rate", 3e-4)), ("actor_hidden=512,256,128", ("actor_hidden", (512, 256, 128))),
    ("obs_normalization=false", ("obs_normalization", False)), ("activation=tanh", ("activation", "tanh")),
    ("num_envs=8", ("num_envs", 8)), ("lam=0", ("lam", 0.0)), ("rnn_type=gru", ("rnn_type", "gru")),
])
def test_a_ppo_setting_is_read_as_its_field_type(text, setting):
    from motrix_gym.learn.config import PpoConfig

    assert PpoConfig.parse_setting(text) == setting


@pytest.mark.parametrize("text, why", [
    ("lr=1e-3", "NAME one of"), ("learning_rate", "NAME one of"), ("num_envs=2.5", "num_envs takes an int"),
    ("num_envs=0", "num_envs must be an int >= 1"), ("gamma=0", r"gamma must be a finite number in \(0, 1\]"),
    ("learning_rate=nan", "learning_rate must be a finite number > 0"), ("entropy_coef=-1", ">= 0"),
    ("obs_normalization=1", "takes true or false"), ("actor_hidden=64,,32", "comma-separated ints"),
    ("critic_hidden=64,0", "non-empty tuple of ints >= 1"), ("activation=ELU", "activation must be one of"),
    ("schedule=cosine", "schedule must be one of"), ("rnn_type=transformer", "rnn_type must be one of"),
    ("rnn_hidden_dim=0", "rnn_hidden_dim must be an int >= 1"),
])
def test_a_bad_ppo_setting_is_refused_by_name(text, why):
    from motrix_gym.learn.config import PpoConfig

    with pytest.raises(ValueError, match=why):
        PpoConfig.parse_setting(text)


@settings(max_examples=60, deadline=None)
@given(num_envs=st.integers(1, 12), steps=st.integers(1, 6), mini_batches=st.integers(1, 80),
       rnn_type=st.sampled_from(["none", "gru"]))
def test_ppo_settings_are_refused_exactly_when_rsl_rl_would_train_on_empty_mini_batches(num_envs, steps, mini_batches,
                                                                                       rnn_type):
    from rsl_rl.storage import RolloutStorage
    from tensordict import TensorDict

    from motrix_gym.learn.config import PpoConfig, PpoConfigError

    storage = RolloutStorage("rl", num_envs, steps, TensorDict({"policy": torch.zeros(num_envs, 3)}, [num_envs]),
                             (2,))
    storage.dones[-1] = 1  # recurrent mini-batches cut trajectories at episode ends
    storage.distribution_params = (torch.zeros(steps, num_envs, 2), torch.ones(steps, num_envs, 2))
    batches = (storage.recurrent_mini_batch_generator if rnn_type == "gru" else storage.mini_batch_generator)(
        mini_batches, num_epochs=1)
    empty = any(batch.actions.numel() == 0 for batch in batches)
    ppo = dict(num_envs=num_envs, num_steps_per_env=steps, num_mini_batches=mini_batches, rnn_type=rnn_type)
    if empty:
        with pytest.raises(PpoConfigError, match=f"num_mini_batches {mini_batches} is more than the .* of a "
                                                 "rollout .*: every mini-batch would be empty$"):
            PpoConfig(**ppo)
    else:
        PpoConfig(**ppo)


def test_start_from_another_task_keeps_its_models_and_starts_blind_to_new_terms(tmp_path):
    from tensordict import TensorDict

    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn.model_init import check_init_from, init_from
    from motrix_gym.learn.train import make_algorithm

    rough = train(env_id("Go1WalkRough"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0,
                  progress=False, config=tiny("Go1WalkRough"))
    cfg = tiny("Go1WalkStairs")
    stairs = make_rsl_rl(env_id("Go1WalkStairs"), num_envs=4, compile=False, progress=False)
    alg = make_algorithm(stairs, cfg)
    init_from(alg, stairs, cfg, check_init_from(env_id("Go1WalkStairs"), cfg, rough.checkpoint))
    source = make_rsl_rl(env_id("Go1WalkRough"), num_envs=4, compile=False, progress=False)
    old = make_algorithm(source, tiny("Go1WalkRough"))
    old.load(checkpoint.load(rough.checkpoint), None, strict=True)
    obs = stairs.get_observations()
    for model, group in (("actor", "policy"), ("critic", "critic")):
        scan = stairs.env.runtime.observation_columns(group)["height_scan"]
        assert scan == slice(obs[group].shape[1] - 187, obs[group].shape[1])  # the new term
        seen = TensorDict({group: obs[group][:, :scan.start]}, batch_size=[4])
        other = obs.clone()
        other[group][:, scan] += torch.linspace(-1, 1, 187)
        with torch.no_grad():
            assert torch.allclose(getattr(alg, model)(obs), getattr(old, model)(seen), atol=1e-6)
            assert torch.equal(getattr(alg, model)(obs), getattr(alg, model)(other))  # blind to the scan
        assert int(getattr(alg, model).obs_normalizer.count) == 0  # its statistics follow the new task
    for env in (stairs, source):
        env.close()
    res = train(env_id("Go1WalkStairs"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0,
                progress=False, config=cfg, start_from=rough.checkpoint)
    assert json.loads((res.run_dir / "config.json").read_text())["started_from"] == str(rough.checkpoint)
    for task, start, why in (("Go1WalkRough", res.checkpoint, r"its actor observed \['height_scan'\]"),
                             ("G1WalkFlat", rough.checkpoint, "trained on Motrix/Go1WalkRough-v0 .*has a Unitree G1")):
        with pytest.raises(ValueError, match=why):
            train(env_id(task), iterations=1, log_dir=tmp_path / "bad", compile=False, progress=False,
                  config=tiny(task), start_from=start)
    with pytest.raises(ValueError, match="at most one of resume and start_from"):
        train(env_id("Go1WalkRough"), iterations=1, log_dir=tmp_path / "bad", resume=rough.checkpoint,
              start_from=rough.checkpoint)
    assert not (tmp_path / "bad").exists()


def test_a_policy_plays_another_task_of_its_robot_blind_to_the_terms_it_never_observed(tmp_path):
    """A policy of rough ground plays flat ground (the same observations) and stairs (and a height
    scan): each term it read reaches it at its columns there, the scan at zero weight."""
    from tensordict import TensorDict

    from motrix_gym.integrations.rsl_rl import make_rsl_rl

    rough = train(env_id("Go1WalkRough"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0,
                  progress=False, config=tiny("Go1WalkRough"))
    source = make_rsl_rl(env_id("Go1WalkRough"), num_envs=4, compile=False, progress=False)
    stairs = make_rsl_rl(env_id("Go1WalkStairs"), num_envs=4, compile=False, progress=False)
    own, _ = load_policy(rough.checkpoint, source)
    blind, _ = load_policy(rough.checkpoint, stairs)
    obs = stairs.get_observations()
    scan = stairs.env.runtime.observation_columns("policy")["height_scan"]
    seen = TensorDict({"policy": torch.cat([obs["policy"][:, :scan.start], obs["policy"][:, scan.stop:]], -1)},
                      batch_size=[4])
    other = obs.clone()
    other["policy"][:, scan] += torch.linspace(-1, 1, scan.stop - scan.start)
    with torch.no_grad():
        assert torch.allclose(blind(obs), own(seen), atol=1e-6)
        assert torch.equal(blind(obs), blind(other))
    for env in (source, stairs):
        env.close()
    from motrix_gym.learn.evaluate import evaluate_checkpoint

    figures = evaluate_checkpoint(env_id("Go1WalkStairs"), rough.checkpoint, lanes=2, progress=False)["eval"]
    assert set(figures) == {"policy", "random", "zero"} and "height_scan" not in figures["policy"]["reward_terms"]
    for task in ("Go1WalkFlat", "Go1WalkStairs"):
        res = play(env_id(task), rough.checkpoint, steps=5, lanes=2, progress=False)
        assert res.steps == 5 and "track_lin_vel" in res.reward_terms and res.trained_on == env_id("Go1WalkRough")


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_a_recurrent_policy_trains_plays_evaluates_exports_and_starts_another_task(rnn_type, tmp_path):
    """rsl_rl's recurrent models: a lane's state is zeroed when its episode ends (in play, in the
    final comparison, which then runs on another number of lanes); the ONNX file carries the state
    in and out; --start-from maps the recurrent layer's input columns term by term."""
    from onnx.reference import ReferenceEvaluator
    from tensordict import TensorDict

    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn.evaluate import evaluate_checkpoint, start_episodes
    from motrix_gym.learn.model_init import check_init_from, init_from
    from motrix_gym.learn.train import make_algorithm

    cfg = tiny("Go1WalkRough").with_(rnn_type=rnn_type, rnn_hidden_dim=8)
    res = train(env_id("Go1WalkRough"), iterations=2, log_dir=tmp_path, compile=False, eval_lanes=3, seed=4,
                progress=False, config=cfg)
    weights = checkpoint.load(res.checkpoint)["actor_state_dict"]["rnn.rnn.weight_ih_l0"]
    assert weights.shape == ({"lstm": 4, "gru": 3}[rnn_type] * 8, 45)
    again = evaluate_checkpoint(env_id("Go1WalkRough"), res.checkpoint, lanes=3, seed=5, progress=False)
    assert again["eval"] == res.summary["eval"]  # each starts from a zero state on its own 3 lanes

    # play: 5-step episodes, so that lanes start new ones; the figures are those of a loop that zeroes
    # an ended lane's state, and not those of one that keeps it
    short = {"overrides": {"episode_length_s": 0.1}}
    played = play(env_id("Go1WalkRough"), res.checkpoint, lanes=2, steps=12, progress=False, task_options=short)
    assert played.episodes_ended == 4

    def rewards(reset: bool) -> dict[str, float]:
        env = make_rsl_rl(env_id("Go1WalkRough"), num_envs=2, compile=False, progress=False, mode="play", **short)
        policy, _ = load_policy(res.checkpoint, env)
        total, obs = 0.0, env.get_observations()
        for _ in range(12):
            with torch.inference_mode():
                obs, _, dones, _ = env.step(policy(obs))
                if reset:
                    start_episodes(policy, dones)
            total = total + env.env.runtime.reward_terms[:2].sum(0).double()
        env.close()
        return {n: float(r) / 24 for n, r in zip(env.env.runtime.reward_names, total)}

    assert played.reward_terms == rewards(reset=True) != rewards(reset=False)

    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = play(env_id("Go1WalkRough"), res.checkpoint, steps=1, export="onnx", progress=False)
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []
    assert registration.level == logging.NOTSET  # the exporter's logger as it was
    from_file = play(env_id("Go1WalkRough"), out.onnx, lanes=2, steps=12, progress=False, task_options=short)
    assert from_file.episodes_ended == 4  # onnxruntime's state, zeroed where episodes start, as the checkpoint's
    assert from_file.reward_terms == pytest.approx(played.reward_terms, rel=1e-4, abs=1e-8)
    onnx_policy = ReferenceEvaluator(str(out.onnx))
    import onnx

    assert {p.key: p.value for p in onnx.load(out.onnx).metadata_props}["recurrent"] == rnn_type
    env = make_rsl_rl(env_id("Go1WalkRough"), num_envs=1, compile=False, progress=False, mode="play")
    policy, _ = load_policy(res.checkpoint, env)
    state = {name: np.zeros((1, 1, 8), np.float32) for name in ({"lstm": ("h_in", "c_in"), "gru": ("h_in",)}[rnn_type])}
    jit = torch.jit.load(play(env_id("Go1WalkRough"), res.checkpoint, steps=1, export="jit", progress=False).jit)
    obs, outputs = env.get_observations(), []
    start = obs["policy"].clone()
    for _ in range(5):
        got = onnx_policy.run(None, {"obs": obs["policy"].numpy(), **state})
        with torch.inference_mode():
            want = policy(obs)
            outputs.append(jit(obs["policy"]))  # the TorchScript module keeps its own state
        assert np.allclose(got[0], want.numpy(), atol=1e-5) and torch.allclose(outputs[-1], want, atol=1e-6)
        state = dict(zip(state, got[1:]))
        obs = env.step(want)[0]
    env.close()
    with torch.inference_mode():
        assert not torch.equal(jit(start), outputs[0])  # from the state of five steps
        jit.reset()  # an episode starts
        assert torch.equal(jit(start), outputs[0])

    # start from the rough-ground models on stairs: the same outputs without the scan, blind to it
    stairs_cfg = tiny("Go1WalkStairs").with_(rnn_type=rnn_type, rnn_hidden_dim=8)
    stairs = make_rsl_rl(env_id("Go1WalkStairs"), num_envs=4, compile=False, progress=False)
    alg = make_algorithm(stairs, stairs_cfg)
    init_from(alg, stairs, stairs_cfg, check_init_from(env_id("Go1WalkStairs"), stairs_cfg, res.checkpoint))
    source = make_rsl_rl(env_id("Go1WalkRough"), num_envs=4, compile=False, progress=False)
    old = make_algorithm(source, cfg)
    old.load(checkpoint.load(res.checkpoint), None, strict=True)
    obs = stairs.get_observations()
    for model, group in (("actor", "policy"), ("critic", "critic")):
        scan = stairs.env.runtime.observation_columns(group)["height_scan"]
        seen = TensorDict({group: obs[group][:, :scan.start]}, batch_size=[4])
        other = obs.clone()
        other[group][:, scan] += torch.linspace(-1, 1, 187)

        def first(module, o):  # from a zero state
            module.reset()
            return module(o)

        with torch.no_grad():
            new, was = getattr(alg, model), getattr(old, model)
            assert torch.allclose(first(new, obs), first(was, seen), atol=1e-6)
            assert torch.equal(first(new, obs), first(new, other))
    for env in (stairs, source):
        env.close()
    with pytest.raises(ValueError, match=f"its rnn_type is '{rnn_type}', Motrix/Go1WalkStairs-v0 trains with 'none'"):
        check_init_from(env_id("Go1WalkStairs"), tiny("Go1WalkStairs"), res.checkpoint)


@given(st.integers(0, 2**64 - 1), st.integers(1, 16), st.integers(1, 16))
def test_the_random_baseline_gives_each_lane_actions_of_its_own_stream(seed, lanes, more):
    """Lane i acts alike beside any number of lanes, within the action space, on streams that are
    not the env's own lane streams of the same seed."""
    from gymnasium.spaces import Box
    from tensordict import TensorDict

    from motrix_gym.learn.evaluate import baselines
    from motrix_gym.runtime.rng import LaneRng

    def actions(n: int) -> list[torch.Tensor]:
        random = baselines(Box(-5.0, 5.0, (3,), np.float32), seed)["random"]
        return [random(TensorDict({}, batch_size=[n])) for _ in range(4)]

    few, many = actions(lanes), actions(lanes + more)
    for a, b in zip(few, many):
        assert torch.equal(a, b[:lanes]) and a.shape == (lanes, 3) and (a.abs() <= 5.0).all()
    env = LaneRng(lanes)
    env.seed(seed, torch.arange(lanes))
    assert not torch.equal(env.range(-5.0, 5.0, (3,)), few[0])


def test_evaluate_of_a_checkpoint_is_the_run_s_final_comparison(tmp_path, capsys):
    """The checkpoint of a run's end, evaluated on the run's lanes with its seed + 1 and the
    overrides of its comparison, gives that comparison's figures exactly; on the command line it
    prints them and writes them as JSON."""
    from motrix_gym.__main__ import main
    from motrix_gym.learn.evaluate import evaluate_checkpoint

    overrides = {"rewards.alive.weight": 0.25}  # half of the task's
    res = train(env_id("Go1WalkFlat"), iterations=2, log_dir=tmp_path, compile=False, eval_lanes=3, seed=4,
                progress=False, config=tiny("Go1WalkFlat"), task_options={"overrides": overrides})
    again = evaluate_checkpoint(env_id("Go1WalkFlat"), res.run_dir, lanes=3, seed=5, progress=False,
                                task_options={"overrides": overrides})
    assert again["eval"] == res.summary["eval"] and again["checkpoint"] == str(res.checkpoint)
    plain = evaluate_checkpoint(env_id("Go1WalkFlat"), res.checkpoint, lanes=3, seed=5, progress=False)
    assert plain["eval"]["zero"]["reward_terms"]["alive"] == 2 * again["eval"]["zero"]["reward_terms"]["alive"]
    capsys.readouterr()
    out = tmp_path / "figures.json"
    assert main(["evaluate", "Go1WalkFlat", "--log-dir", str(tmp_path), "--lanes", "3", "--seed", "5",
                 "--override", "rewards.alive.weight=0.25", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"checkpoint: {res.checkpoint}" in printed and "first episode of 3 lanes (seed 5)" in printed
    assert json.loads(out.read_text())["eval"] == json.loads(json.dumps(res.summary["eval"]))
    tiny_ppo = [f"--ppo={k}={v}" for k, v in (("num_steps_per_env", 4), ("actor_hidden", 16), ("critic_hidden", 16),
                                              ("num_learning_epochs", 1), ("num_mini_batches", 1))]
    assert main(["train", "Go1WalkFlat", "--iterations", "1", "--num-envs", "4", "--no-compile", "--eval-lanes", "2",
                 "--log-dir", str(tmp_path / "cli"), "--override", "rewards.alive.weight=0.25", *tiny_ppo]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("first episode of 2 lanes (task with its 1 override(s)):   mean return   mean length")
    assert [line.split()[0] for line in lines[at + 1:at + 4]] == ["policy", "random", "zero"]
    for bad, message in ((["--lanes", "0"], "argument --lanes"), (["--task-option", "mode=fly"], "mode must be"),
                         (["--json", str(tmp_path / "x.txt")], "does not end in")):
        with pytest.raises(SystemExit) as exit:
            main(["evaluate", "Go1WalkFlat", "--log-dir", str(tmp_path), *bad])
        assert exit.value.code == 2 and message in capsys.readouterr().err, bad
    for bad, message in (({"lanes": 0}, "lanes must be an int >= 1"), ({"seed": -1}, "seed"),
                         ({"task_options": [("mode", "play")]}, "must be a mapping")):
        with pytest.raises(ValueError, match=message):
            evaluate_checkpoint(env_id("Go1WalkFlat"), res.checkpoint, progress=False, **bad)


def test_onnx_export_reproduces_the_policy_and_says_how_to_drive_the_joints(tmp_path):
    import importlib

    import onnx
    from onnx.reference import ReferenceEvaluator

    from motrix_gym.integrations.rsl_rl import make_rsl_rl

    res = train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                config=tiny("G1WalkFlat").with_(actor_hidden=(32, 16)))
    out = play(env_id("G1WalkFlat"), res.checkpoint, steps=1, export="onnx", progress=False)
    alone = tmp_path / "deployed" / "policy.onnx"  # the file on its own, as it is copied to a robot
    alone.parent.mkdir()
    alone.write_bytes(out.onnx.read_bytes())
    assert sorted(p.name for p in out.onnx.parent.glob("policy.onnx*")) == ["policy.onnx"]
    meta = {p.key: p.value for p in onnx.load(alone).metadata_props}
    assert (meta["task"], meta["checkpoint"], meta["robot"]) == (env_id("G1WalkFlat"), res.checkpoint.name, "g1")

    # play mode: no action delay or randomised gains, so that a step's targets and gains are the metadata's
    env = make_rsl_rl(env_id("G1WalkFlat"), num_envs=4, compile=False, progress=False, mode="play")
    base = env.env
    model = base.sim.model
    names = meta["joint_names"].split(",")
    actuators = [model.actuator(n).id for n in names]  # the scene names each actuator after its joint
    assert [model.joint(int(model.actuator_trnid[a, 0])).name for a in actuators] == names
    assert len(names) == base.single_action_space.shape[0] == 29

    def floats(key: str) -> np.ndarray:
        return np.array([float(v) for v in meta[key].split(",")])

    np.testing.assert_allclose(floats("joint_stiffness"), model.actuator_gainprm[actuators, 0], rtol=1e-6)
    np.testing.assert_allclose(floats("joint_damping"), -model.actuator_biasprm[actuators, 2], rtol=1e-6)
    np.testing.assert_allclose(floats("joint_effort_limit"), model.actuator_forcerange[actuators, 1], rtol=1e-6)
    assert float(meta["control_dt"]) == pytest.approx(0.02)
    terms = meta["observation_names"].split(",")
    dims = [int(d) for d in meta["observation_dims"].split(",")]
    assert terms[0] == "base_ang_vel" and "joint_pos" in terms and len(terms) == len(dims)
    assert sum(dims) == base.single_observation_space["policy"].shape[0]
    assert len(meta["observation_scales"].split(",")) == len(meta["observation_clips"].split(",")) == len(terms)
    assert meta["observation_history"] == ",".join(["1"] * len(terms))
    for ref in meta["observation_functions"].split(","):
        module, name = ref.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name))

    policy, _ = load_policy(res.checkpoint, env)
    obs = env.get_observations()
    for _ in range(5):
        got = ReferenceEvaluator(str(alone)).run(None, {"obs": obs["policy"].numpy()})[0]
        with torch.inference_mode():
            want = policy(obs)
        assert np.allclose(got, want.numpy(), atol=1e-5)
        obs = env.step(want)[0]
        # the targets the env gave its servos, from the exported policy's outputs and the metadata
        clip = float(meta["action_clip"])
        target = floats("default_joint_pos") + floats("action_scale") * np.clip(got, -clip, clip)
        np.testing.assert_allclose(np.asarray(base.sim.arrays["ctrl"])[:, actuators], target, atol=1e-5)
    env.close()


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_torchscript_export_reproduces_the_policy_with_the_onnx_file_s_metadata(tmp_path, capsys):
    import onnx

    from motrix_gym.__main__ import main
    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn.checkpoint import CheckpointError

    go1 = env_id("Go1WalkFlat")
    res = train(go1, iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                config=tiny("Go1WalkFlat"))
    onnx_file = play(go1, res.checkpoint, steps=1, export="onnx", progress=False).onnx
    assert main(["play", "Go1WalkFlat", "--log-dir", str(tmp_path), "--steps", "1", "--export", "jit"]) == 0
    jit_file = res.checkpoint.with_name("policy.pt")
    assert f"exported {jit_file}" in capsys.readouterr().out
    extra = {"metadata.json": ""}
    module = torch.jit.load(str(jit_file), _extra_files=extra)
    assert json.loads(extra["metadata.json"]) == {p.key: p.value for p in onnx.load(onnx_file).metadata_props}
    env = make_rsl_rl(go1, num_envs=4, compile=False, progress=False, mode="play")
    policy, _ = load_policy(res.checkpoint, env)
    obs = env.get_observations()
    for _ in range(5):  # a batch of robots at once
        with torch.inference_mode():
            want = policy(obs)
            assert torch.allclose(module(obs["policy"]), want, atol=1e-6)
        obs = env.step(want)[0]
    env.close()
    with pytest.raises(CheckpointError, match="is a TorchScript module .* not a checkpoint: give its model_<it>.pt"):
        play(go1, jit_file, steps=1, progress=False)


def test_an_exported_policy_file_plays_and_evaluates_as_its_checkpoint(tmp_path, monkeypatch, capsys):
    """play and evaluate run a policy.onnx with onnxruntime, one robot per call, on any task whose
    joints and observations its metadata describe, and refuse one that differs, naming what."""
    from motrix_gym.__main__ import main
    from motrix_gym.learn.evaluate import evaluate_checkpoint

    go1 = env_id("Go1WalkFlat")
    res = train(go1, iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                config=tiny("Go1WalkFlat"))
    exported = play(go1, res.checkpoint, steps=1, export="onnx", progress=False).onnx
    for task in ("Go1WalkFlat", "Go1WalkRough"):  # rough ground: the same joints and observation terms
        want = play(env_id(task), res.checkpoint, lanes=2, steps=20, progress=False)
        got = play(env_id(task), exported, lanes=2, steps=20, progress=False)
        assert got.trained_on == go1 and got.reward_terms == pytest.approx(want.reward_terms, rel=1e-4, abs=1e-8)
        assert got.metrics == pytest.approx(want.metrics, rel=1e-4)
    want = evaluate_checkpoint(go1, res.checkpoint, lanes=2, progress=False)["eval"]
    got = evaluate_checkpoint(go1, exported, lanes=2, progress=False)["eval"]
    assert got["policy"]["mean_episode_length"] == want["policy"]["mean_episode_length"]
    assert got["policy"]["mean_return"] == pytest.approx(want["policy"]["mean_return"], rel=1e-4)
    assert (got["random"], got["zero"]) == (want["random"], want["zero"])

    linear = torch.nn.Linear(45, 12)  # an ONNX model without the metadata
    foreign = tmp_path / "foreign.onnx"
    torch.onnx.export(linear, (torch.zeros(1, 45),), foreign, input_names=["obs"], output_names=["actions"],
                      external_data=False)
    text = tmp_path / "text.onnx"
    text.write_text("not a model")
    for task, path, options, message in (
            ("G1WalkFlat", exported, None, "has joint_names 'FR_hip_joint,"),
            ("Go1WalkStairs", exported, None, "has observation_names 'base_ang_vel,.*height_scan'"),
            ("Go1WalkFlat", exported, {"overrides": {"observations.policy.joint_pos.history": 2}},
             "has observation_dims '3,3,3,12,12,12', Motrix/Go1WalkFlat-v0 has '3,3,3,24,12,12'"),
            ("Go1WalkFlat", foreign, None, "not a policy exported by motrix_gym: its metadata lack"),
            ("Go1WalkFlat", text, None, "not an ONNX model onnxruntime can run")):
        with pytest.raises(checkpoint.CheckpointError, match=message):
            play(env_id(task), path, steps=1, progress=False, task_options=options)
    with pytest.raises(checkpoint.CheckpointError, match="is an exported policy already: export takes a checkpoint"):
        play(go1, exported, export="onnx", progress=False)
    capsys.readouterr()
    assert main(["play", "Go1WalkFlat", "--checkpoint", str(exported), "--steps", "3"]) == 0
    assert f"checkpoint: {exported}" in capsys.readouterr().out
    for argv, message in ((["play", "G1WalkFlat", "--checkpoint", str(exported)], "has joint_names"),
                          (["evaluate", "Go1WalkFlat", "--checkpoint", str(exported), "--run-overrides"],
                           "records no run's overrides: give them with --override")):
        assert main(argv) == 2 and message in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install -e \"\.\[onnx\]\""):
        play(go1, exported, steps=1, progress=False)


class Payload:
    """Anything a pickle can rebuild: on an unsafe load it would run code of the file's choosing."""


def test_checkpoint_with_pickled_object_is_refused(tmp_path):
    bad = tmp_path / "model_0.pt"
    torch.save({"actor_state_dict": {}, "iter": 0, "infos": {"format": checkpoint.FORMAT, "x": Payload()}}, bad)
    with pytest.raises(checkpoint.CheckpointError, match="objects other than tensors"):
        checkpoint.load(bad)
    run = subprocess.run([sys.executable, "-m", "motrix_gym", "play", "Motrix/G1WalkFlat-v0", "--checkpoint",
                          str(bad)], capture_output=True, text=True)
    assert run.returncode == 2 and "objects other than tensors" in run.stderr and "Traceback" not in run.stderr
    refused = f"Unsupported global: GLOBAL {Payload.__module__}.Payload was not an allowed global by default."
    assert refused in run.stderr
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(2)}, plain)
    with pytest.raises(checkpoint.CheckpointError, match="not written by"):
        checkpoint.load(plain)


@pytest.mark.parametrize("content", [b"", b"print('hello')\n", b"PK\x03\x04 cut short"])
def test_a_file_torch_did_not_write_is_refused_as_such(content, tmp_path):
    path = tmp_path / "model_0.pt"
    path.write_bytes(content)
    with pytest.raises(checkpoint.CheckpointError, match=r"model_0.pt' is not the zip archive that torch.save writes$"):
        checkpoint.load(path)


class CtrlCWhileWritten:
    def __reduce__(self):
        raise KeyboardInterrupt


def test_a_save_cut_short_leaves_the_previous_checkpoint_whole(tmp_path):
    path = tmp_path / "model_5.pt"
    checkpoint.save(path, {"actor_state_dict": {"w": torch.ones(1000)}}, {"iteration": 5})
    with pytest.raises(KeyboardInterrupt):  # after the weights, before the file is complete
        checkpoint.save(path, {"actor_state_dict": {"w": torch.zeros(1000)}, "z": CtrlCWhileWritten()},
                        {"iteration": 6})
    ckpt = checkpoint.load(path)
    assert ckpt["iter"] == 5 and torch.equal(ckpt["actor_state_dict"]["w"], torch.ones(1000))
    assert [p.name for p in tmp_path.iterdir()] == ["model_5.pt"]


def test_evaluate_compares_with_random_and_zero_actions():
    out = evaluate(env_id("G1WalkFlat"), None, lanes=4, seed=0, progress=False)
    assert set(out) == {"random", "zero"}
    for e in out.values():
        assert e["unfinished_lanes"] == 0 and e["mean_episode_length"] > 0
        assert np.isclose(sum(e["reward_terms"].values()) * e["mean_episode_length"], e["mean_return"], rtol=1e-3)
    assert out["random"]["mean_return"] < out["zero"]["mean_return"]


@pytest.mark.parametrize("cmd", ["train", "play"])
def test_without_the_train_extra_train_and_play_name_it(tmp_path, cmd):
    shadow = tmp_path / "no_rsl_rl" / "rsl_rl"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no rsl_rl (simulated)')\n")
    r = subprocess.run([sys.executable, "-m", "motrix_gym", cmd, "G1WalkFlat", "--log-dir", str(tmp_path / "logs")],
                       env={**os.environ, "PYTHONPATH": str(shadow.parent)}, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "train and play need ['rsl_rl']: pip install -e \".[train]\"" in r.stderr
    assert not (tmp_path / "logs").exists()


def test_cli_train_then_play_writes_a_gif(tmp_path):
    cli = [sys.executable, "-m", "motrix_gym"]
    run = subprocess.run([*cli, "train", "Motrix/G1WalkFlat-v0", "--num-envs", "4", "--iterations", "2",
                          "--no-compile", "--eval-lanes", "2", "--log-dir", str(tmp_path),
                          "--task-option", "command=0.5,0,0"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "random" in run.stdout and "zero" in run.stdout
    ckpt = next(tmp_path.glob("G1WalkFlat/*/model_1.pt"))
    assert checkpoint.load(ckpt)["infos"]["task_options"] == {"command": (0.5, 0.0, 0.0)}
    gif = tmp_path / "walk.gif"
    run = subprocess.run([*cli, "play", "Motrix/G1WalkFlat-v0", "--log-dir", str(tmp_path), "--out", str(gif),
                          "--steps", "6", "--lanes", "2", "--command=-0.5,0,0.25"], capture_output=True, text=True)
    assert run.returncode == 0 and gif.stat().st_size > 1000, run.stderr[-2000:]
    assert f"checkpoint: {ckpt}" in run.stdout  # the newest run's last checkpoint
    run = subprocess.run([*cli, "play", "G1WalkFlat", "--log-dir", str(tmp_path), "--steps", "2",
                          "--task-option", "heading_command=true"], capture_output=True, text=True)
    assert run.returncode == 0 and "base_velocity/yaw_rate_error" in run.stdout, run.stderr[-2000:]


@pytest.mark.parametrize("argv, message", [
    (["play", "Motrix/Go1WalkFlat-v0", "--checkpoint", "CKPT"],
     "trained on Motrix/G1WalkFlat-v0 (Unitree G1 29-DoF), Motrix/Go1WalkFlat-v0 has a Unitree Go1"),
    (["play", "Motrix/G1WbtDance-v0", "--checkpoint", "CKPT"],
     "its actor observed ['gait_phase', 'last_action', 'projected_gravity'], which Motrix/G1WbtDance-v0's 'policy' "
     "observations lack"),
    (["evaluate", "Motrix/Go1WalkFlat-v0", "--checkpoint", "CKPT"],
     "trained on Motrix/G1WalkFlat-v0 (Unitree G1 29-DoF), Motrix/Go1WalkFlat-v0 has a Unitree Go1"),
    (["dataset", "Motrix/Go1WalkFlat-v0", "motrix/go1/x-v0", "--checkpoint", "CKPT"],
     "trained on Motrix/G1WalkFlat-v0 (Unitree G1 29-DoF), Motrix/Go1WalkFlat-v0 has a Unitree Go1"),
    (["play", "Motrix/G1WalkRough-v0", "--checkpoint", "CKPT", "--export", "onnx"],
     "export describes the task a policy was trained on: play Motrix/G1WalkFlat-v0 to export"),
    (["train", "Motrix/G1WalkFlat-v0", "--resume", "CKPT", "--ppo", "actor_hidden=8"],
     "a resumed run keeps its checkpoint's models: ['actor_hidden'] cannot change"),
    (["train", "Motrix/Go1WalkFlat-v0", "--start-from", "CKPT"],
     "trained on Motrix/G1WalkFlat-v0 (Unitree G1 29-DoF), Motrix/Go1WalkFlat-v0 has a Unitree Go1"),
])
def test_a_checkpoint_that_does_not_fit_is_a_one_line_cli_error(argv, message, tmp_path, capsys):
    from motrix_gym.__main__ import main

    res = train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "a", compile=False, eval_lanes=0,
                progress=False, config=tiny("G1WalkFlat"))
    capsys.readouterr()
    argv = [str(res.checkpoint) if a == "CKPT" else a for a in argv]
    assert main([*argv, "--no-compile", "--log-dir", str(tmp_path / "bad")] if argv[0] == "train" else argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    purpose = {"dataset": "record", "train": "start from"}.get(argv[0], argv[0])
    if message.startswith("trained on"):
        assert err.startswith(f"error: {purpose} "), err  # what the policy was for
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("flag", ["--checkpoint", "--resume", "--start-from"])
def test_a_missing_checkpoint_is_a_one_line_cli_error(flag, tmp_path, capsys):
    """Said before anything else is printed, run or written."""
    from motrix_gym.__main__ import main

    missing = tmp_path / "missing.pt"
    argv = ["play", "Motrix/Go1WalkFlat-v0"] if flag == "--checkpoint" else \
        ["train", "Motrix/Go1WalkFlat-v0", "--no-compile", "--log-dir", str(tmp_path / "logs")]
    assert main([*argv, flag, str(missing)]) == 2
    out = capsys.readouterr()
    assert out.err == f"error: checkpoint {str(missing)!r} does not exist\n" and out.out == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["play", "Motrix/G1WbtDance-v0", "--command", "1,0,0"],
     "argument --command: Motrix/G1WbtDance-v0 got an unexpected keyword argument 'command'"),
    (["play", "Motrix/Go1WalkFlat-v0", "--command", "1,0"], "argument --command: expected VX,VY,WZ"),
    (["play", "Motrix/Go1WalkFlat-v0", "--command", "1,inf,0"], "argument --command: expected VX,VY,WZ"),
    (["play", "Motrix/Go1WalkFlat-v0", "--viewer", "--out", "go1.gif"],
     "argument --viewer: shows a lane in a window; it takes no --out"),
])
def test_a_command_play_cannot_give_is_an_argument_error(argv, message, tmp_path, capsys):
    from motrix_gym.__main__ import main

    with pytest.raises(SystemExit) as exit:
        main([*argv, "--log-dir", str(tmp_path)])  # no run there: refused before looking for one
    assert exit.value.code == 2 and message in capsys.readouterr().err


def assert_same_models(a: dict, b: dict) -> None:
    """The actor's and critic's weights of two checkpoints are equal bit for bit."""
    for key in ("actor_state_dict", "critic_state_dict"):
        assert a[key].keys() == b[key].keys()
        assert all(torch.equal(a[key][k], b[key][k]) for k in a[key]), key


def test_ctrl_c_ends_a_run_with_its_last_complete_iteration_saved(tmp_path):
    tiny_cli = [f"--ppo={k}={v}" for k, v in (("num_steps_per_env", 4), ("save_interval", 1), ("actor_hidden", 16),
                                               ("critic_hidden", 16), ("num_learning_epochs", 1),
                                               ("num_mini_batches", 1))]
    run = subprocess.Popen([sys.executable, "-m", "motrix_gym", "train", "Motrix/G1WalkFlat-v0", "--iterations",
                            "100000", "--num-envs", "4", "--no-compile", "--log-dir", str(tmp_path), *tiny_cli],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           # as in a terminal: a shell without job control starts its background
                           # commands (and so this test and its child) with SIGINT ignored
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("G1WalkFlat/*/model_2.pt")):
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read()[-2000:]
        time.sleep(0.1)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 130, err[-2000:]
    run_dir = next(tmp_path.glob("G1WalkFlat/*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    done = summary["iterations"]
    assert summary["interrupted"] and summary["eval"] is None and done >= 3
    assert f"checkpoint: {run_dir / f'model_{done - 1}.pt'}" in out
    assert checkpoint.load(run_dir / f"model_{done - 1}.pt")["iter"] == done - 1
    assert len((run_dir / "progress.csv").read_text().splitlines()) == done + 1  # a header and a row each


def test_ctrl_c_during_an_update_keeps_the_models_of_the_last_complete_iteration(tmp_path):
    # Ctrl-C raises KeyboardInterrupt wherever the main thread is; here right after the third
    # iteration's optimizer step (one per iteration) has changed the weights
    kwargs = {"log_dir": tmp_path, "compile": False, "eval_lanes": 0, "progress": False,
              "config": tiny("G1WalkFlat").with_(save_interval=50)}
    two = train("Motrix/G1WalkFlat-v0", iterations=2, **kwargs)
    steps = []

    def ctrl_c(optimizer, args, kw):
        steps.append(optimizer)
        if len(steps) == 3:
            raise KeyboardInterrupt

    hook = register_optimizer_step_post_hook(ctrl_c)
    try:
        cut = train("Motrix/G1WalkFlat-v0", iterations=5, **kwargs)
    finally:
        hook.remove()
    assert cut.summary["interrupted"] and cut.iterations == 2 and cut.checkpoint.name == "model_1.pt"
    a, b = checkpoint.load(two.checkpoint), checkpoint.load(cut.checkpoint)
    assert_same_models(a, b)
    adam_a, adam_b = a["optimizer_state_dict"]["state"], b["optimizer_state_dict"]["state"]
    assert adam_a and adam_a.keys() == adam_b.keys()
    assert all(torch.equal(adam_a[i][m], adam_b[i][m]) for i in adam_a for m in ("exp_avg", "exp_avg_sq"))
    assert len((cut.run_dir / "progress.csv").read_text().splitlines()) == 3


def test_ctrl_c_while_an_iteration_is_reported_keeps_that_iteration(tmp_path, monkeypatch):
    from torch.utils.tensorboard import SummaryWriter

    kwargs = {"log_dir": tmp_path, "compile": False, "eval_lanes": 0, "progress": False,
              "config": tiny("G1WalkFlat").with_(save_interval=50)}
    three = train("Motrix/G1WalkFlat-v0", iterations=3, **kwargs)
    add_scalar = SummaryWriter.add_scalar

    def ctrl_c(self, tag, value, step=None, *args, **kw):
        if tag == "Perf/total_fps" and step == 2:  # iteration 2 is updated, partly reported, not saved
            raise KeyboardInterrupt
        return add_scalar(self, tag, value, step, *args, **kw)

    monkeypatch.setattr(SummaryWriter, "add_scalar", ctrl_c)
    cut = train("Motrix/G1WalkFlat-v0", iterations=5, **kwargs)
    assert cut.summary["interrupted"] and cut.iterations == 3 and cut.checkpoint.name == "model_2.pt"
    assert len((cut.run_dir / "progress.csv").read_text().splitlines()) == 4
    a, b = checkpoint.load(three.checkpoint), checkpoint.load(cut.checkpoint)
    assert_same_models(a, b)


def test_ctrl_c_during_the_final_comparison_ends_only_the_comparison(tmp_path):
    def ctrl_c(module, args, out):  # the first forward pass of a model in eval mode: the comparison's
        if not module.training:
            raise KeyboardInterrupt

    hook = register_module_forward_hook(ctrl_c)
    try:
        res = train("Motrix/G1WalkFlat-v0", iterations=2, log_dir=tmp_path, compile=False, eval_lanes=4,
                    progress=False, config=tiny("G1WalkFlat"))
    finally:
        hook.remove()
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert summary["interrupted"] and summary["eval"] is None and summary["iterations"] == 2
    assert res.checkpoint.name == "model_1.pt" and checkpoint.load(res.checkpoint)["iter"] == 1


@needs_gl
def test_ctrl_c_while_a_checkpoint_is_recorded_keeps_the_run_and_no_half_written_video(tmp_path, monkeypatch):
    import motrix_gym.learn.play as play_module

    write_video, videos = play_module.write_video, []

    def ctrl_c_at_the_last(frames, out, fps):
        videos.pop()
        if videos:
            return write_video(frames, out, fps)
        out.write_bytes(b"half a video")
        raise KeyboardInterrupt

    monkeypatch.setattr(play_module, "write_video", ctrl_c_at_the_last)
    kwargs = {"compile": False, "eval_lanes": 4, "progress": False, "video": True, "video_length": 4}
    videos[:] = [1, 0]  # Ctrl-C during iteration 1's video, in the loop (a checkpoint every iteration)
    cut = train("Motrix/G1WalkFlat-v0", iterations=5, log_dir=tmp_path / "a", config=tiny("G1WalkFlat"), **kwargs)
    assert cut.summary["interrupted"] and cut.summary["eval"] is None
    assert cut.iterations == 2 and cut.checkpoint.name == "model_1.pt"
    assert sorted(p.name for p in (cut.run_dir / "videos").iterdir()) == ["model_0.mp4"]
    videos[:] = [1]  # during the video of the run's last checkpoint, after the loop
    end = train("Motrix/G1WalkFlat-v0", iterations=2, log_dir=tmp_path / "b",
                config=tiny("G1WalkFlat").with_(save_interval=50), **kwargs)
    assert end.summary["interrupted"] and end.summary["eval"] is None and end.iterations == 2
    assert end.checkpoint.name == "model_1.pt" and not list((end.run_dir / "videos").iterdir())


def test_latest_checkpoint_is_the_last_of_the_newest_run_that_saved_one(tmp_path):
    def touch(*names):
        for name in names:
            (tmp_path / "G1WalkFlat" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "G1WalkFlat" / name).touch()

    with pytest.raises(checkpoint.CheckpointError, match="no run of Motrix/G1WalkFlat-v0"):
        checkpoint.latest(tmp_path, "Motrix/G1WalkFlat-v0")
    touch("2026-01-01_00-00-00/model_9.pt", "2026-01-01_00-00-00/model_10.pt", "2026-01-01_00-00-00/curve.png")
    assert checkpoint.latest(tmp_path, "Motrix/G1WalkFlat-v0").name == "model_10.pt"  # by number, not by name
    touch("2026-01-01_00-00-00_2/model_3.pt", "2026-01-01_00-00-00_10/model_1.pt", "2026-01-02_00-00-00/config.json",
          "notes/model_99.pt")
    assert checkpoint.latest(tmp_path, "Motrix/G1WalkFlat-v0") == (
        tmp_path / "G1WalkFlat" / "2026-01-01_00-00-00_10" / "model_1.pt")  # the newest run with a checkpoint
    run = tmp_path / "G1WalkFlat" / "2026-01-01_00-00-00"
    assert checkpoint.resolve(run) == run / "model_10.pt"
    assert checkpoint.resolve(run / "model_9.pt") == run / "model_9.pt"
    with pytest.raises(checkpoint.CheckpointError, match="a folder without a model_<it>.pt"):
        checkpoint.resolve(tmp_path / "G1WalkFlat" / "2026-01-02_00-00-00")
    with pytest.raises(checkpoint.CheckpointError, match=r"holds 4 of train's runs \(newest 2026-01-02_00-00-00\)"):
        checkpoint.resolve(tmp_path / "G1WalkFlat")  # a task's folder: the runs are named


@pytest.mark.parametrize("bad, message", [
    ({"seed": -1}, "seed must be an int"), ({"seed": True}, "seed must be an int"),
    ({"eval_lanes": -1}, "eval_lanes must be an int >= 0"), ({"eval_lanes": True}, "eval_lanes must be an int >= 0"),
    ({"iterations": True}, "iterations must be an int >= 1"), ({"iterations": 0}, "iterations must be an int >= 1"),
    ({"iterations": None, "minutes": float("nan")}, "minutes must be > 0"),
    ({"device": "tpu"}, "device must be a torch device"),
    ({"video": 1}, "video must be True or False"), ({"video": True, "video_length": 0}, "video_length must be None"),
    ({"video": True, "video_length": 2.5}, "video_length must be None"),
    ({"video_length": 50}, "video_length 50: the length of the videos, which only video=True records"),
    ({"run_name": "a/b"}, "a run name is 1-64 letters"), ({"run_name": "7up"}, "starting with a letter"),
    ({"run_name": ""}, "a run name is"), ({"run_name": "x" * 65}, "a run name is"),
    ({"env_id": "G1WalkFlat"}, r"unknown task 'G1WalkFlat'; registered: G1WbtDance, .*, each as Motrix/<name>-v0$"),
    ({"env_id": "Motrix/G1WalkFlat-v1"}, "unknown task 'Motrix/G1WalkFlat-v1'"),
])
def test_bad_train_arguments_are_refused_before_anything_is_written(bad, message, tmp_path):
    kwargs = {"env_id": "Motrix/G1WalkFlat-v0", "iterations": 1, "compile": False, "progress": False,
              "eval_lanes": 0, "log_dir": tmp_path, **bad}
    with pytest.raises(ValueError, match=message):
        train(**kwargs)
    assert not list(tmp_path.iterdir())


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint.time, "strftime", lambda fmt: "2026-01-01_00-00-00")
    made = [checkpoint.new_run(checkpoint.task_folder(tmp_path, "Motrix/G1WalkFlat-v0")) for _ in range(3)]
    assert [p.name for p in made] == ["2026-01-01_00-00-00", "2026-01-01_00-00-00_1", "2026-01-01_00-00-00_2"]
    assert all(p.is_dir() for p in made)
    for i, run in enumerate(made[:2]):
        (run / f"model_{i}.pt").touch()
    assert checkpoint.latest(tmp_path, "Motrix/G1WalkFlat-v0") == made[1] / "model_1.pt"  # newest that saved one


def test_a_log_dir_that_cannot_hold_runs_is_refused_before_the_env_starts(tmp_path):
    blocker = tmp_path / "logs"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=f"cannot write runs in '{blocker}/G1WalkFlat': '{blocker}' is a file"):
        train(env_id("G1WalkFlat"), iterations=1, log_dir=blocker, compile=False, progress=False)
    run = subprocess.run([sys.executable, "-m", "motrix_gym", "train", "G1WalkFlat", "--log-dir",
                          str(blocker / "sub")], capture_output=True, text=True)
    assert run.returncode == 2 and "argument --log-dir: cannot write runs in" in run.stderr, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]


def test_a_named_run_is_found_as_the_newest_by_its_time(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint.time, "strftime", lambda fmt: "2026-01-01_00-00-00")
    folder = checkpoint.task_folder(tmp_path, "Motrix/G1WalkFlat-v0")
    made = [checkpoint.new_run(folder, name) for name in ("lr3e-4", None, "lr3e-4", "x_1.b")]
    assert [p.name for p in made] == ["2026-01-01_00-00-00_lr3e-4", "2026-01-01_00-00-00_1",  # numbered in turn
                                      "2026-01-01_00-00-00_2_lr3e-4", "2026-01-01_00-00-00_3_x_1.b"]
    for i, run in enumerate(made):
        (run / f"model_{i}.pt").touch()
    assert checkpoint.latest(tmp_path, "Motrix/G1WalkFlat-v0") == made[3] / "model_3.pt"
    res = train(env_id("G1WalkFlat"), iterations=1, log_dir=tmp_path / "cli", compile=False, eval_lanes=0,
                progress=False, config=tiny("G1WalkFlat"), run_name="tiny")
    assert res.run_dir.name.endswith("_tiny") and checkpoint.latest(tmp_path / "cli", env_id("G1WalkFlat")) == (
        res.checkpoint)


@pytest.mark.parametrize("bad, message", [
    ({"lanes": True}, "lanes must be an int >= 1"), ({"lanes": 0}, "lanes must be an int >= 1"),
    ({"every": 0, "out": "go1.gif"}, "every must be None"), ({"steps": 0}, "steps must be None"),
    ({"steps": -5}, "steps must be None"), ({"export": "tflite"}, "export must be one of"),
    ({"markers": "no"}, "markers must be None"), ({"viewer": 1}, "viewer must be True or False"),
    ({"width": 640}, "width: shape the video, which only out writes"),
    ({"every": 3, "height": 200, "viewer": True}, "every, height: shape the video, which only out writes"),
    ({"markers": False}, "markers are drawn in the video or the window: give them with out or viewer"),
    ({"viewer": True, "out": "go1.gif"}, "viewer shows a lane in a window: it takes no out"),
    ({"env_id": "Go1WalkFlat"}, "unknown task 'Go1WalkFlat'; registered: "),
])
def test_bad_play_arguments_are_refused_before_the_checkpoint_is_read(bad, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        play(**{"env_id": "Motrix/G1WalkFlat-v0", "checkpoint_path": tmp_path / "missing.pt", **bad})


def test_task_options_train_with_the_run_and_stay_with_it_when_resumed(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    options = {"command_curriculum": True}
    first = train(env_id("Go1WalkFlat"), iterations=2, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                  config=tiny("Go1WalkFlat"), task_options=options)
    assert json.loads((first.run_dir / "config.json").read_text())["task_options"] == options
    assert checkpoint.load(first.checkpoint)["infos"]["task_options"] == options
    events = EventAccumulator(str(first.run_dir)).Reload()
    assert [e.value for e in events.Scalars("Curriculum/command_scale")] == [0.25, 0.25]  # every lane starts low
    again = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                  resume=first.checkpoint)
    assert checkpoint.load(again.checkpoint)["infos"]["task_options"] == options
    with pytest.raises(checkpoint.CheckpointError, match="keeps its checkpoint's task options"):
        train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path / "no", resume=first.checkpoint, task_options={})
    with pytest.raises(TypeError, match="unexpected keyword argument 'command_curriculum'"):
        train(env_id("G1WbtDance"), iterations=1, log_dir=tmp_path / "no", task_options=options)
    assert not (tmp_path / "no").exists()
    run = subprocess.run([sys.executable, "-m", "motrix_gym", "train", "G1WbtDance", "--command-curriculum"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "argument --command-curriculum: Motrix/G1WbtDance-v0 got an unexpected" in (
        run.stderr)


def test_play_takes_task_options_and_refuses_those_its_policy_cannot_read(tmp_path):
    res = train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                config=tiny("Go1WalkFlat"))

    def played(**kwargs) -> dict[str, float]:
        return play(env_id("Go1WalkFlat"), res.checkpoint, steps=30, lanes=2, progress=False, **kwargs).reward_terms

    ends = {"episode_length_s": 0.2}, {"terminations.base_too_low.params.min_height": 5.0}  # 10 steps; every one
    for overrides, ended, terminated in zip(ends, (6, 60), (0, 60)):
        out = play(env_id("Go1WalkFlat"), res.checkpoint, steps=30, lanes=2, progress=False,
                   task_options={"overrides": overrides})
        assert (out.episodes_ended, out.terminated) == (ended, terminated), overrides
    plain, heading = played(), played(task_options={"heading_command": True})
    assert heading["track_ang_vel"] != plain["track_ang_vel"]  # the lanes steer to a heading instead
    assert played(command=(0.5, 0.0, 0.0)) == played(task_options={"command": (0.5, 0.0, 0.0)}) != plain
    for bad, message in (({"task_options": {"mode": "train"}}, "other than mode"),
                         ({"task_options": [("heading_command", True)]}, "must be a mapping"),
                         ({"task_options": {"command": (0.5, 0, 0)}, "command": (0.5, 0, 0)}, "give the command once"),
                         ({"task_options": {"gait": 1}}, "unexpected keyword argument 'gait'")):
        with pytest.raises((TypeError, ValueError), match=message):
            played(**bad)
    saved = torch.load(res.checkpoint, weights_only=True)
    assert saved["infos"]["task"]["widths"]["policy"] == {"base_ang_vel": 3, "projected_gravity": 3, "command": 3,
                                                          "joint_pos": 12, "joint_vel": 12, "last_action": 12}
    wider = copy.deepcopy(saved)
    wider["infos"]["task"]["widths"]["policy"]["command"] = 4  # a term of that name that read something else
    torch.save(wider, tmp_path / "model_6.pt")
    with pytest.raises(checkpoint.CheckpointError, match="play Motrix/Go1WalkFlat-v0: its actor read 'command' 4 "
                                                         "columns wide, 3 here"):
        play(env_id("Go1WalkFlat"), tmp_path / "model_6.pt", steps=1, progress=False)
    saved["infos"]["task"]["observations"]["policy"].append("height_scan")  # as if it had observed one
    torch.save(saved, other := tmp_path / "model_5.pt")
    with pytest.raises(checkpoint.CheckpointError, match=r"its actor observed \['height_scan'\], which "
                                                         r"Motrix/Go1WalkFlat-v0's 'policy' observations lack$"):
        play(env_id("Go1WalkFlat"), other, steps=1, progress=False)


@pytest.mark.parametrize("argv, message", [
    (["--task-option", "mode=train"], "argument --task-option: mode: play runs the task's play mode"),
    (["--task-option", "command=1,0,0", "--command", "1,0,0"], "argument --task-option: ['command'] given twice"),
    (["--task-option", "gait=1"], "argument --task-option: Motrix/Go1WalkFlat-v0 got an unexpected keyword argument"),
    (["--task-option", "heading_command=maybe"], "argument --task-option: Go1WalkFlat: heading_command must be"),
])
def test_a_task_option_play_cannot_take_is_an_argument_error(argv, message, tmp_path, capsys):
    from motrix_gym.__main__ import main

    with pytest.raises(SystemExit) as exit:
        main(["play", "Motrix/Go1WalkFlat-v0", *argv, "--log-dir", str(tmp_path)])
    assert exit.value.code == 2 and message in capsys.readouterr().err


def test_play_runs_random_or_zero_actions_without_a_checkpoint(capsys):
    """A look at a task before training: zero actions hold the Go1's default pose, standing for the
    whole run; random ones make it fall; the same seed plays the same. Neither comes from a run:
    nothing to export, no run's overrides."""
    from motrix_gym.__main__ import main

    zero = play(env_id("Go1WalkFlat"), "zero", lanes=4, steps=100, progress=False)
    assert (zero.steps, zero.episodes_ended, zero.trained_on) == (100, 0, env_id("Go1WalkFlat"))
    random = play(env_id("Go1WalkFlat"), "random", lanes=4, steps=100, progress=False, seed=3)
    assert random.terminated > 0
    assert play(env_id("Go1WalkFlat"), "random", lanes=4, steps=100, progress=False, seed=3) == random
    with pytest.raises(checkpoint.CheckpointError, match="export writes a trained policy: it takes a checkpoint, "
                                                         "not 'zero' actions"):
        play(env_id("Go1WalkFlat"), "zero", export="onnx")
    assert main(["play", "Go1WalkFlat", "--checkpoint", "zero", "--run-overrides"]) == 2
    assert capsys.readouterr().err == "error: --run-overrides: zero actions come from no run\n"


@needs_gl
def test_cli_play_writes_a_video_of_zero_actions(tmp_path, capsys):
    from motrix_gym.__main__ import main

    out = tmp_path / "zero.gif"
    assert main(["play", "Go1WalkFlat", "--checkpoint", "zero", "--steps", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("actions: zero\n") and "0 episodes ended" in printed
    assert len(imageio.mimread(out)) == 2  # every second step

"""Command line: ``python -m motrix_gym {list,describe,run,render,train,play,evaluate,dataset,bench} ...``."""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import motrix_gym
from motrix_gym.arguments import (
    MARKERS_HELP,
    SEED,
    TASK_HELP,
    add_task_arguments,
    amount,
    count,
    dataset_id,
    device_name,
    import_tasks,
    out_path,
    task_id,
    velocity_command,
)
from motrix_gym.envs import task_config, task_name
from motrix_gym.sim.backend import BACKENDS, MissingExtra
from motrix_gym.video import VIDEO_SUFFIXES

T = TypeVar("T")


def cmd_list(args: argparse.Namespace) -> None:
    """Registered ids with robot, family and observation/action sizes (from a one-lane env), then
    the tasks' make-time options."""
    from motrix_gym.envs import TASKS, robot_label, task_options
    from motrix_gym.registry import env_id
    from motrix_gym.vector_env import MotrixVectorEnv

    print(f"{'id':<24} {'robot':<18} {'obs policy/critic':>17} {'actions':>7}  family")
    for name, entry in list(TASKS.items()):
        cfg = task_config(name)
        groups = tuple(cfg.observations)
        env = MotrixVectorEnv(cfg, 1, compile=False, obs_groups=groups, progress=False)
        space = env.single_observation_space
        dims = "/".join(str(space[g].shape[0] if len(groups) > 1 else space.shape[0]) for g in groups)
        print(f"{env_id(name):<24} {robot_label(name, cfg):<18} {dims:>17} {env.single_action_space.shape[0]:>7}  "
              f"{entry.family}")
        env.close()
    takers: dict[tuple[str, ...] | None, list[str]] = {}
    for name in TASKS:
        takers.setdefault(task_options(name), []).append(name)
    print("\nmake-time options (keywords of gym.make_vec, --task-option NAME=VALUE); every task also takes "
          "overrides={PATH: VALUE} (--override PATH=VALUE, e.g. rewards.alive.weight=0; `describe` lists the terms):")
    for options, names in takers.items():
        print(f"  {'any keyword' if options is None else ', '.join(options) or 'none'}: {', '.join(names)}")


def cmd_describe(args: argparse.Namespace) -> None:
    """Print the tables of terms of a task made with the given options (one lane, eager), then the
    PPO settings ``train`` starts from for it."""
    import textwrap

    import gymnasium as gym

    import motrix_gym  # noqa: F401
    from motrix_gym.describe import describe
    from motrix_gym.envs import ppo_config, task_name

    env = gym.make_vec(args.env_id, num_envs=1, compile=False, progress=False, **args.task_options)
    try:
        print(describe(env))
    finally:
        env.close()
    settings = "  ".join(ppo_config(task_name(args.env_id)).settings())
    print("\ntrain's PPO settings (--ppo NAME=VALUE changes one)")
    print(textwrap.fill(settings, width=110, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False))


def cmd_run(args: argparse.Namespace) -> None:
    """Step an env with random actions; print throughput and the mean of each reward term."""
    import gymnasium as gym
    import numpy as np
    import torch
    from tqdm import tqdm

    import motrix_gym  # noqa: F401

    t0 = time.perf_counter()
    env = gym.make_vec(args.env_id, num_envs=args.num_envs, compile=args.compile, backend=args.backend,
                       device=args.device, **args.task_options)
    env.reset(seed=args.seed)
    u = env.unwrapped
    gen = torch.Generator().manual_seed(args.seed)  # the policy's randomness, not the env's
    shape = (args.num_envs, env.single_action_space.shape[0])
    sums = np.zeros(len(u.runtime.reward_names))
    start = None
    for i in tqdm(range(args.steps), desc=f"{args.env_id} x{args.num_envs}", unit="step"):
        if i == 1:
            start = time.perf_counter()  # the first step includes compilation
        actions = torch.randn(shape, generator=gen).numpy() * args.action_std
        env.step(actions)
        sums += u.runtime.reward_terms[: args.num_envs].sum(0).cpu().numpy()
    elapsed = time.perf_counter() - (start or t0)
    steps = max(args.steps - 1, 1)
    print(f"\nmake + first step: {(start or time.perf_counter()) - t0:.1f} s")
    print(f"env-steps/s: {steps * args.num_envs / elapsed:,.0f}  ({1e3 * elapsed / steps:.2f} ms per batch step)")
    print("mean reward per env step, by term (weight * dt included):")
    for name, s in zip(u.runtime.reward_names, sums):
        print(f"  {name:<20} {s / (args.steps * args.num_envs):+.5f}")
    env.close()


def cmd_render(args: argparse.Namespace) -> None:
    """Roll out lanes with zero or random actions and write the frames as a GIF or an MP4."""
    import gymnasium as gym
    import numpy as np
    from tqdm import tqdm

    import motrix_gym  # noqa: F401
    from motrix_gym.sim.render import tile
    from motrix_gym.video import check_writer, write_video

    check_writer(Path(args.out).suffix)

    env = gym.make_vec(args.env_id, num_envs=args.lanes, compile=False, render_mode="rgb_array",
                       render_markers=args.markers, progress=False, **args.task_options)
    env.reset(seed=args.seed)
    rng = np.random.default_rng(args.seed)
    frames = []
    try:
        for i in tqdm(range(args.steps), desc=f"render {args.env_id}", unit="step"):
            a = rng.standard_normal(env.action_space.shape).astype(np.float32) * args.action_std
            env.step(a)
            if i % args.every == 0:  # a frame costs far more than a step: draw only those kept
                frames.append(tile(env.render()))
    finally:  # frees the renderer's GL context while its display is still up
        env.close()
    write_video(frames, Path(args.out), fps=1.0 / (env.unwrapped.task.step_dt * args.every))
    print(f"wrote {len(frames)} frames to {args.out}")


def _ppo_setting(text: str) -> tuple[str, object]:
    from motrix_gym.learn.config import PpoConfig

    try:
        return PpoConfig.parse_setting(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _run_name(text: str) -> str:
    from motrix_gym.learn.checkpoint import check_run_name

    try:
        return check_run_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _as_argument_error(parser: argparse.ArgumentParser, flag: str, check: Callable[[], T]) -> T:
    """``check()``; a TypeError or ValueError it raises (a task option the task does not take,
    a path or task that cannot serve) becomes ``parser``'s one-line error about ``flag``."""
    try:
        return check()
    except (TypeError, ValueError) as e:
        parser.error(f"argument {flag}: {e}")


def _refuse_twice(parser: argparse.ArgumentParser, flag: str, settings: list[tuple[str, object]], hint: str) -> None:
    """``parser``'s one-line error about ``flag`` if a name among ``settings`` comes more than
    once (which one would win is not for the command line to guess); ``hint`` names the other
    flag that sets one of them."""
    names = [name for name, _ in settings]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        parser.error(f"argument {flag}: {twice} given twice" + (f" ({hint})" if hint else ""))


def _task_options(parser: argparse.ArgumentParser, args: argparse.Namespace, implied: list[tuple[str, object]],
                  implied_by: str, **fixed: object) -> None:
    """``args.task_options``: the ``--task-option`` settings and those ``implied`` by the flag
    ``implied_by``, each name once, checked by building the task's config (with ``fixed`` options
    too); a problem is ``parser``'s one-line error."""
    options = args.task_option + implied
    if "overrides" in dict(options):
        parser.error("argument --task-option: overrides: give each as --override PATH=VALUE")
    _refuse_twice(parser, "--task-option", options, f"{implied_by} sets {implied[0][0]}" if implied else "")
    args.task_options = dict(options)
    flag = "--task-option" if args.task_option else implied_by
    if not (args.task_options or args.override):
        return
    base = _as_argument_error(parser, flag, lambda: task_config(task_name(args.env_id), **fixed, **args.task_options))
    if args.override:
        from motrix_gym.manager.overrides import apply, read

        _refuse_twice(parser, "--override", args.override, "")
        typed = _as_argument_error(parser, "--override", lambda: {path: read(base, path, raw)
                                                                 for path, raw in args.override})
        _as_argument_error(parser, "--override", lambda: apply(base, typed))
        args.task_options["overrides"] = typed


def _require_train_extra() -> None:
    import importlib

    missing = []
    for module in ("rsl_rl", "matplotlib"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise MissingExtra(f"train and play need {missing}: pip install -e \".[train]\"")


def cmd_train(args: argparse.Namespace) -> int:
    """Train with rsl_rl's PPO; print where the run went and how it compares with baselines.
    Ctrl-C ends a one-process run after its last complete iteration, saved, and exits with 130."""
    _require_train_extra()
    from motrix_gym.learn.train import last_episodes, train

    budget = {"iterations": args.iterations} if args.iterations is not None else {"minutes": args.minutes or 20.0}
    device = args.device
    if args.distributed:
        import torch.distributed as dist

        if device == "cuda":  # each rank of a machine on its own GPU
            device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
        # the env's own collectives use CPU tensors: gloo for them, NCCL for CUDA tensors
        dist.init_process_group("cpu:gloo,cuda:nccl" if device.startswith("cuda") else "gloo")
    try:
        res = train(args.env_id, num_envs=args.num_envs, seed=args.seed, log_dir=args.log_dir, run_name=args.run_name,
                    task_options=args.task_options or None,
                    resume=args.resume, start_from=args.start_from, compile=args.compile, eval_lanes=args.eval_lanes,
                    ppo=dict(args.ppo), device=device, video=args.video, video_length=args.video_length,
                    distributed=args.distributed, logger=args.logger, wandb_project=args.wandb_project, **budget)
    finally:  # a gloo rank that exits with its group alive can abort in the group's teardown
        if args.distributed:
            dist.destroy_process_group()
    if args.distributed:
        print(f"rank {os.environ['RANK']}: {res.episodes} episodes ended in this rank's lanes")
    if res.run_dir is None:  # a rank other than 0: rank 0 reports the whole run
        return 0
    s = res.summary
    ranks = f" over {s['ranks']} ranks ({s['episodes']} episodes)" if args.distributed else ""
    print(f"\n{res.iterations} iterations, {res.env_steps:,} env steps{ranks} in {res.seconds / 60:.1f} min; "
          f"run directory {res.run_dir}")
    print(f"training: {last_episodes(s)}")
    if s.get("eval"):
        made = f" (task with its {len(s['eval_overrides'])} override(s))" if s["eval_overrides"] else ""
        _print_comparison(s["eval"], f"first episode of {args.eval_lanes} lanes{made}")
    print(f"checkpoint: {res.checkpoint}")
    if s["interrupted"]:
        print("interrupted: stopped after the last complete iteration, without the final comparison")
        return 130
    return 0


def cmd_play(args: argparse.Namespace) -> None:
    """Run a checkpoint's policy in play mode; write a video; print reward terms and errors."""
    _require_train_extra()
    from motrix_gym.learn.checkpoint import CheckpointError, latest, resolve
    from motrix_gym.learn.evaluate import BASELINES
    from motrix_gym.learn.play import play

    if args.checkpoint in BASELINES:
        if args.run_overrides:
            raise CheckpointError(f"--run-overrides: {args.checkpoint} actions come from no run")
        path = args.checkpoint
        print(f"actions: {path}")
    else:
        path = resolve(args.checkpoint) if args.checkpoint else latest(args.log_dir, args.env_id)
        print(f"checkpoint: {path}")
        _add_run_overrides(args, path, "play")
    res = play(args.env_id, path, out=args.out, lanes=args.lanes, steps=args.steps, every=args.every,
               export=args.export, seed=args.seed, width=args.width, height=args.height, markers=args.markers,
               task_options=args.task_options, viewer=args.viewer)
    other = "" if res.trained_on == args.env_id else f" of a policy trained on {res.trained_on}"
    print(f"\n{res.steps} steps x {args.lanes} lanes{other}, {res.episodes_ended} episodes ended "
          f"({res.terminated} by a termination, the others by their time limit)")
    print("mean reward per env step, by term (weight * dt included):")
    for name, v in res.reward_terms.items():
        print(f"  {name:<20} {v:+.5f}")
    if res.metrics:
        print("tracking errors (mean over steps and lanes):")
        for name, v in res.metrics.items():
            print(f"  {name:<36} {v:.4f}")
    if res.video:
        print(f"wrote {res.video}")
    if res.onnx or res.jit:
        print(f"exported {res.onnx or res.jit}")


def _add_run_overrides(args: argparse.Namespace, path: Path, mode: str) -> None:
    """With ``--run-overrides``, the overrides checkpoint ``path``'s run trained with that the task
    in ``mode`` has a place for, under the ``--override`` ones (which win where both set a path)."""
    if not args.run_overrides:
        return
    from motrix_gym.learn.play import run_overrides

    given = args.task_options.get("overrides", {})
    kept = {p: v for p, v in run_overrides(path, args.env_id, mode).items() if p not in given}
    print(f"the run's overrides: {kept or 'none'}")
    if kept:
        args.task_options["overrides"] = {**kept, **given}


def _print_comparison(figures: dict[str, dict[str, float]], title: str) -> None:
    """``evaluate``'s figures: mean return and length of each policy."""
    print(f"{title}:   mean return   mean length")
    for name, e in figures.items():
        print(f"  {name:<{len(title) - 2}} {e['mean_return']:>14.3f} {e['mean_episode_length']:>13.1f}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """A checkpoint's policy against random and zero actions, as ``train``'s final comparison."""
    _require_train_extra()
    import json

    from motrix_gym.learn.checkpoint import latest, resolve
    from motrix_gym.learn.evaluate import evaluate_checkpoint

    path = resolve(args.checkpoint) if args.checkpoint else latest(args.log_dir, args.env_id)
    print(f"checkpoint: {path}")
    _add_run_overrides(args, path, "train")
    res = evaluate_checkpoint(args.env_id, path, lanes=args.lanes, seed=args.seed, task_options=args.task_options,
                              device=args.device)
    figures = res["eval"]
    print()
    _print_comparison(figures, f"first episode of {args.lanes} lanes (seed {args.seed})")
    print("mean reward per env step x1e3, by term (weight * dt included):")
    print(f"  {'':<20}" + "".join(f"{name:>10}" for name in figures))
    for term in figures["policy"]["reward_terms"]:
        print(f"  {term:<20}" + "".join(f"{1e3 * e['reward_terms'][term]:>10.3f}" for e in figures.values()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {args.json}")


def cmd_dataset(args: argparse.Namespace) -> None:
    """A policy's episodes as a Minari dataset."""
    try:
        import minari  # noqa: F401
    except ImportError:
        raise MissingExtra("dataset writes Minari datasets: pip install -e \".[minari]\"") from None
    import numpy as np

    from motrix_gym.learn.dataset import BASELINES, record

    policy = args.checkpoint
    if policy not in BASELINES:
        _require_train_extra()
    if policy is None:
        from motrix_gym.learn.checkpoint import latest

        policy = latest(args.log_dir, args.env_id)
    print(f"policy: {policy}")
    metadata = {k: v for k, v in (("author", args.author), ("author_email", args.author_email),
                                  ("code_permalink", args.code_permalink), ("description", args.description))
                if v is not None}
    ds = record(args.env_id, args.dataset_id, policy, args.episodes, lanes=args.num_envs, seed=args.seed,
                task_options=args.task_options, data_format=args.data_format, **metadata)
    returns = [float(np.sum(ep.rewards)) for ep in ds.iterate_episodes()]
    print(f"wrote {args.dataset_id}: {ds.total_episodes} episodes, {ds.total_steps} steps, mean return "
          f"{np.mean(returns):.3f}, at {ds.spec.data_path}")


def cmd_bench(args: argparse.Namespace) -> None:
    from motrix_gym import bench

    bench.main(args)


def _user_errors() -> tuple[type[Exception], ...]:
    """Errors that say what the user must change (printed without a traceback): those of the
    modules loaded so far (each is imported only by the commands that need it)."""
    found = []
    for module, name in (("motrix_gym.sim.render", "RenderingUnavailable"),
                         ("motrix_gym.sim.viewer", "DisplayUnavailable"),
                         ("motrix_gym.learn.checkpoint", "CheckpointError"),
                         ("motrix_gym.integrations.minari", "DatasetError"),
                         ("motrix_gym.learn.config", "PpoConfigError"),
                         ("motrix_gym.learn.run_log", "LoggerError"),
                         ("motrix_gym.sim.backend", "MissingExtra"),
                         ("motrix_gym.runtime.cpu_probe", "CompilerUnavailable"),
                         ("motrix_gym.manager.resolver", "TaskConfigError"),  # a custom task's or an override's
                         ("motrix_gym.manager.overrides", "OverrideError")):
        if module in sys.modules:
            found.append(getattr(sys.modules[module], name))
    return tuple(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m motrix_gym")
    parser.add_argument("--version", action="version", version=f"motrix-gym {motrix_gym.__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="registered task ids")
    ls.add_argument("modules", nargs="*", type=import_tasks, metavar="MODULE",
                    help="first import these modules, which register tasks of their own")
    ls.set_defaults(func=cmd_list)
    ds = sub.add_parser("describe", help="a task's tables of terms: observations (with their columns), rewards, "
                                         "terminations, commands, events, resets, actions, randomisation")
    ds.add_argument("env_id", type=task_id, help=TASK_HELP)
    add_task_arguments(ds)
    ds.set_defaults(func=cmd_describe)
    run = sub.add_parser("run", help="step a task with random actions")
    run.add_argument("env_id", type=task_id, help=TASK_HELP)
    run.add_argument("--num-envs", type=count(1), default=64)
    run.add_argument("--steps", type=count(1), default=200)
    run.add_argument("--seed", type=SEED, default=0)
    run.add_argument("--action-std", type=amount(positive=False), default=0.5)
    run.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                     help="torch.compile the runtime (default) or run it eagerly")
    run.add_argument("--backend", choices=BACKENDS, default=None,
                     help="simulation backend (default: warp on a CUDA device, else mujoco; warp needs "
                          "pip install -e \".[warp]\")")
    run.add_argument("--device", type=device_name, default="cpu",
                     help="cpu, or cuda / cuda:N (backend warp: everything on the GPU)")
    add_task_arguments(run)
    run.set_defaults(func=cmd_run)
    render = sub.add_parser("render", help="write a GIF of a rollout")
    render.add_argument("env_id", type=task_id, help=TASK_HELP)
    render.add_argument("--out", type=out_path(VIDEO_SUFFIXES), required=True, help="video.gif or video.mp4")
    render.add_argument("--steps", type=count(1), default=100)
    render.add_argument("--every", type=count(1), default=2, help="keep every n-th frame")
    render.add_argument("--lanes", type=count(1), default=1, help="tile the first k lanes")
    render.add_argument("--seed", type=SEED, default=0)
    render.add_argument("--action-std", type=amount(positive=False), default=0.0, help="0: hold the default pose")
    render.add_argument("--markers", action=argparse.BooleanOptionalAction, default=True, help=MARKERS_HELP)
    add_task_arguments(render)
    render.set_defaults(func=cmd_render)
    tr = sub.add_parser("train", help="train a policy with rsl_rl's PPO (the task family's defaults)")
    tr.add_argument("env_id", type=task_id, help=TASK_HELP)
    tr.add_argument("--num-envs", type=count(1), default=None, help="default: the task family's")
    budget = tr.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=amount(positive=True), default=None, help="wall-clock budget (default 20)")
    budget.add_argument("--iterations", type=count(1), default=None, help="PPO iterations")
    tr.add_argument("--seed", type=SEED, default=0)
    tr.add_argument("--log-dir", default="logs")
    tr.add_argument("--run-name", type=_run_name, default=None, metavar="NAME",
                    help="ends the run folder's name: <log-dir>/<task>/<date>_NAME")
    tr.add_argument("--command-curriculum", action="store_true",
                    help="velocity tasks: each lane's commands start small and widen as it tracks them "
                         "(--task-option command_curriculum=true)")
    add_task_arguments(tr, "a make-time option of the task for training (repeatable; the final comparison and "
                           "the videos run the task without it, but with the --override ones): sampling=uniform, "
                           "command=0.5,0,0, ... VALUE: true or false, a number, comma-separated numbers, else text")
    start = tr.add_mutually_exclusive_group()
    start.add_argument("--resume", default=None, metavar="CHECKPOINT",
                       help="continue from a model_<it>.pt (a run's folder: its last)")
    start.add_argument("--start-from", default=None, metavar="CHECKPOINT",
                       help="start from the models of another task's model_<it>.pt or run folder (e.g. rough "
                            "ground for stairs)")
    tr.add_argument("--eval-lanes", type=count(0), default=64,
                    help="lanes of the final comparison with random and zero actions (0: none)")
    tr.add_argument("--ppo", type=_ppo_setting, action="append", default=[], metavar="NAME=VALUE",
                    help="change one of the run's PPO settings (repeatable): learning_rate=3e-4, "
                         "actor_hidden=512,256,128, entropy_coef=0.005, ...")
    tr.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    tr.add_argument("--device", type=device_name, default="cpu",
                    help="cpu, or cuda / cuda:N (simulation, runtime and policy on the GPU)")
    tr.add_argument("--distributed", action="store_true",
                    help="this process is one rank of a torchrun launch: every rank runs --num-envs lanes of one "
                         "batch and PPO averages the gradients; rank 0 writes the run")
    tr.add_argument("--video", action="store_true",
                    help="record each checkpoint's policy in play mode: videos/model_<it>.mp4 in the run's folder")
    tr.add_argument("--video-length", type=count(1), default=None,
                    help="with --video: env steps of each video (default 200)")
    tr.add_argument("--logger", choices=("tensorboard", "wandb"), default="tensorboard",
                    help="tensorboard: events in the run's folder; wandb: those and a Weights & Biases run with "
                         "the same figures, the videos and the final comparison (pip install -e \".[wandb]\"; "
                         "WANDB_MODE=offline keeps it on disk)")
    tr.add_argument("--wandb-project", default=None, metavar="NAME",
                    help="the W&B project (default: WANDB_PROJECT, else motrix_gym)")
    tr.set_defaults(func=cmd_train)
    pl = sub.add_parser("play", help="watch a trained policy (play mode, rendered off-screen or in a window)")
    pl.add_argument("env_id", type=task_id, help=TASK_HELP)
    pl.add_argument("--checkpoint", default=None,
                    help="a model_<it>.pt or a run's folder (its last), or a policy.onnx that --export wrote (run "
                         "by onnxruntime), or random or zero: uniform random or zero actions (the task untrained); "
                         "default: the last one of the newest run in --log-dir")
    pl.add_argument("--log-dir", default="logs", help="where train wrote the runs")
    pl.add_argument("--out", type=out_path(VIDEO_SUFFIXES), default=None, help="video.gif or video.mp4")
    pl.add_argument("--lanes", type=count(1), default=1,
                    help="lanes run: tiled in the video, or shown in the window one at a time")
    pl.add_argument("--steps", type=count(1), default=None,
                    help="default: one episode, at most 10 s; with --viewer, until the window is closed")
    pl.add_argument("--viewer", action="store_true",
                    help="show a lane live in a window (MuJoCo's viewer, real time) instead of writing a video; "
                         "the keys steer a velocity task's command and choose the lane of --lanes shown (listed "
                         "when it starts)")
    pl.add_argument("--every", type=count(1), default=None, help="with --out: keep every n-th frame (default 2)")
    pl.add_argument("--width", type=count(1, 8192), default=None,
                    help="with --out: pixels of one lane's frame (default 480)")
    pl.add_argument("--height", type=count(1, 8192), default=None, help="with --out (default 360)")
    pl.add_argument("--export", choices=("onnx", "jit"), default=None,
                    help="write the policy beside the checkpoint for a robot's controller: policy.onnx, or policy.pt "
                         "(TorchScript, for torch.jit.load and libtorch), with the metadata it needs")
    pl.add_argument("--seed", type=SEED, default=0)
    pl.add_argument("--markers", action=argparse.BooleanOptionalAction, default=None,
                    help=f"with --out or --viewer: {MARKERS_HELP}")
    pl.add_argument("--command", type=velocity_command, default=None, metavar="VX,VY,WZ",
                    help="velocity tasks: give every lane this command, m/s and rad/s (a negative first "
                         "value: --command=-0.5,0,0)")
    add_task_arguments(pl, "a make-time option of the task to play it with (repeatable), such as the ones the "
                           "policy was trained with: heading_command=true, ...")
    pl.add_argument("--run-overrides", action="store_true",
                    help="also the overrides the checkpoint's run trained with, those play mode has a place for")
    pl.set_defaults(func=cmd_play)
    ev = sub.add_parser("evaluate", help="a trained policy against random and zero actions, as train's final "
                                         "comparison")
    ev.add_argument("env_id", type=task_id, help=TASK_HELP)
    ev.add_argument("--checkpoint", default=None,
                    help="a model_<it>.pt or a run's folder (its last), of this task or of another of its robot "
                         "whose observations this one's include, or a policy.onnx that play --export wrote; "
                         "default: the last one of the newest run in --log-dir")
    ev.add_argument("--log-dir", default="logs", help="where train wrote the runs")
    ev.add_argument("--lanes", type=count(1), default=64, help="lanes, each run to the end of its first episode")
    ev.add_argument("--seed", type=SEED, default=1, help="the lanes' seed (train compares with its --seed + 1)")
    ev.add_argument("--device", type=device_name, default="cpu",
                    help="cpu, or cuda / cuda:N (simulation, runtime and policy on the GPU)")
    ev.add_argument("--json", type=out_path((".json",)), default=None, help="also write the figures to this .json file")
    add_task_arguments(ev, "a make-time option of the task to evaluate it with (repeatable; train's comparison "
                           "uses none but the --override ones): heading_command=true, ...")
    ev.add_argument("--run-overrides", action="store_true",
                    help="also the overrides the checkpoint's run trained with (as its final comparison)")
    ev.set_defaults(func=cmd_evaluate)
    dset = sub.add_parser("dataset", help="a policy's episodes as a Minari dataset (offline RL, imitation)")
    dset.add_argument("env_id", type=task_id, help=TASK_HELP)
    dset.add_argument("dataset_id", type=dataset_id, help="the Minari id to write: NAMESPACE/NAME-vVERSION, "
                      "in MINARI_DATASETS_PATH (default ~/.minari/datasets)")
    dset.add_argument("--checkpoint", default=None,
                      help="the policy, as play takes it: a model_<it>.pt or a run's folder (its last), or a "
                           "policy.onnx, or random (uniform over the action space) or zero (the default pose); "
                           "default: the last checkpoint of the newest run in --log-dir")
    dset.add_argument("--log-dir", default="logs", help="where train wrote the runs")
    dset.add_argument("--episodes", type=count(1), default=100)
    dset.add_argument("--num-envs", type=count(1), default=64,
                      help="lanes recorded together; each records the same number of episodes, give or take one")
    dset.add_argument("--seed", type=SEED, default=0)
    dset.add_argument("--data-format", choices=("hdf5", "arrow", "parquet"), default="hdf5",
                      help="Minari's storage (arrow and parquet need pyarrow)")
    for flag in ("--author", "--author-email", "--code-permalink", "--description"):
        dset.add_argument(flag, default=None, help="the dataset's metadata" if flag == "--author" else None)
    add_task_arguments(dset, "a make-time option of the task to record (repeatable): mode=play (no noise, pushes "
                             "or randomisation), command=0.5,0,0, ...")
    dset.set_defaults(func=cmd_dataset)
    bench = sub.add_parser("bench", help="env-steps/s vs raw physics, runtime cost, memory per lane")
    from motrix_gym.bench import add_arguments

    add_arguments(bench)
    bench.set_defaults(func=cmd_bench)
    args = parser.parse_args(argv)
    if args.cmd == "bench" and (args.env_id is None) == (not args.all):
        bench.error("give a task id or --all, not both" if args.all else "give a task id or --all")
    if args.cmd == "bench" and (args.task_option or args.override):
        if args.all or args.startup:
            bench.error("give --task-option and --override with one task, without --startup (fresh processes "
                        "start the registered task)" if args.startup else "--task-option and --override name one "
                        "task's options: give a task id, not --all")
    if args.cmd == "bench":
        _task_options(bench, args, [], "")
    if args.cmd == "bench" and args.startup_repeats is not None and not args.startup:
        bench.error("argument --startup-repeats: rounds of the start-up timings, which only --startup measures")
    if args.cmd == "bench" and args.startup and args.env_id is not None:
        from motrix_gym.bench import check_startup_task

        _as_argument_error(bench, "--startup", lambda: check_startup_task(args.env_id))
    if args.cmd == "train":
        _task_options(tr, args, [("command_curriculum", True)] if args.command_curriculum else [],
                      "--command-curriculum")
    if args.cmd in ("describe", "run", "render", "evaluate", "dataset"):
        _task_options({"describe": ds, "run": run, "render": render, "evaluate": ev, "dataset": dset}[args.cmd],
                      args, [], "")
    if args.cmd == "train":
        from motrix_gym.learn.checkpoint import check_log_dir, task_folder

        _as_argument_error(tr, "--log-dir", lambda: check_log_dir(task_folder(args.log_dir, args.env_id)))
    if args.cmd == "train" and args.distributed:
        if "RANK" not in os.environ:
            tr.error("argument --distributed: start the ranks with torchrun, which sets RANK, WORLD_SIZE and "
                     "MASTER_ADDR (torchrun --nproc_per_node=2 -m motrix_gym train ...)")
        if args.device.startswith("cuda:"):
            tr.error(f"argument --device: {args.device} with --distributed: give cuda (each rank uses "
                     "cuda:LOCAL_RANK)")
    if args.cmd == "train" and args.video_length is not None and not args.video:
        tr.error("argument --video-length: the length of the videos, which only --video records")
    if args.cmd == "train":
        from motrix_gym.learn.run_log import check_logger

        _as_argument_error(tr, "--wandb-project" if args.wandb_project is not None else "--logger",
                           lambda: check_logger(args.logger, args.wandb_project))
        _refuse_twice(tr, "--ppo", args.ppo + ([("num_envs", args.num_envs)] if args.num_envs is not None else []),
                      "--num-envs sets num_envs")
    if args.cmd == "play":
        if any(name == "mode" for name, _ in args.task_option):
            pl.error("argument --task-option: mode: play runs the task's play mode")
        if args.viewer and args.out is not None:
            pl.error("argument --viewer: shows a lane in a window; it takes no --out")
        for flag in ("every", "width", "height"):
            if args.out is None and getattr(args, flag) is not None:
                pl.error(f"argument --{flag}: shapes the video, which only --out writes")
        if args.markers is not None and args.out is None and not args.viewer:
            pl.error("argument --markers/--no-markers: markers are drawn in the video or the window: give it with "
                     "--out or --viewer")
        _task_options(pl, args, [("command", args.command)] if args.command is not None else [], "--command",
                      mode="play")
    try:
        code = args.func(args) or 0
        sys.stdout.flush()  # output that a closed pipe refuses is found here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        return 1
    except Exception as e:
        if not isinstance(e, _user_errors()):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


def _stdout_closed() -> bool:
    """Whether the reader of stdout has gone (``list | head``). If so, what is left to print goes
    nowhere, so that the exit neither fails nor prints a second traceback, as other Unix tools stop."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's capture, a closed stream)
        return False
    try:
        sys.stdout.flush()
        if not hasattr(select, "poll"):  # Windows
            return False
        watch = select.poll()  # unbuffered output has nothing left to flush: ask the pipe itself
        watch.register(fd, select.POLLOUT)
        if not any(events & select.POLLERR for _, events in watch.poll(0)):
            return False
    except BrokenPipeError:
        pass
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    return True


if __name__ == "__main__":
    sys.exit(main())

"""``python -m motrix_gym train``: rsl_rl's PPO on a task with the task family's defaults.

The algorithm (models, storage, optimizer) is built as rsl_rl's ``OnPolicyRunner`` builds it;
this module drives its iterations itself because a run here has a time budget
(``minutes``) as well as an iteration count, and shows one progress line instead of a page per
iteration. Each iteration is the runner's: ``num_steps_per_env`` steps of ``alg.act`` /
``env.step`` / ``alg.process_env_step``, then ``alg.compute_returns`` and ``alg.update``.

A run directory holds TensorBoard events, ``model_<it>.pt`` checkpoints (data only, see
``checkpoint.py``), ``progress.csv``, ``curve.png`` and, after the final evaluation,
``summary.json``: the final policy (its mean action) against uniform random and zero actions,
each over the first episode of the same lanes. With ``video``, ``videos/model_<it>.mp4`` beside
each checkpoint shows its policy in the task's play mode (``play.py``). With ``logger="wandb"`` the
same figures, videos and comparison also go to a Weights & Biases run (``run_log.py``), whose
files are under ``wandb/``.

Both run the task as its overrides made it (they may change what the policy reads and what its
actions do) but without its make-time options, which choose how to train (a curriculum, heading
commands, a motion sampling), so that runs with different options compare on one task.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import shutil
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from motrix_gym.arguments import is_int
from motrix_gym.learn import checkpoint
from motrix_gym.learn.checkpoint import CheckpointError
from motrix_gym.learn.config import MODEL_FIELDS, PpoConfig
from motrix_gym.learn.evaluate import evaluate
from motrix_gym.learn.model_init import check_init_from, init_from, layout_change, observation_widths, task_facts
from motrix_gym.learn.play import placed_overrides, play
from motrix_gym.learn.run_log import RunLog, check_logger, require
from motrix_gym.registry import check_id
from motrix_gym.runtime.distributed import Ranks
from motrix_gym.runtime.rng import check_seed


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path | None  # None on the ranks other than 0
    checkpoint: Path | None
    iterations: int
    env_steps: int
    seconds: float
    summary: dict[str, Any]
    episodes: int  # episodes this rank's lanes ended (the summary counts every rank's)


def default_config(env_id: str) -> PpoConfig:
    from motrix_gym.envs import ppo_config, task_name

    return ppo_config(task_name(env_id))


def make_algorithm(env: Any, cfg: PpoConfig, device: str = "cpu", rank: int = 0, world: int = 1) -> Any:
    """rsl_rl's PPO over ``env`` with ``cfg``, built as its ``OnPolicyRunner`` builds it. With
    ``world`` > 1, this process is rank ``rank`` of rsl_rl's multi-process configuration: gradients
    averaged and the learning rate kept equal over the ranks with torch.distributed's collectives,
    on any backend. Built here rather than by the runner, which accepts several processes only on
    CUDA devices and takes any process of a torchrun launch for one of them, even where a rank
    loads a policy to watch it alone."""
    import contextlib
    import io
    import os

    from rsl_rl.algorithms import PPO

    train_cfg = cfg.to_rsl_rl()
    train_cfg["multi_gpu"] = None if world == 1 else {
        "global_rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", rank)), "world_size": world}
    with contextlib.redirect_stdout(io.StringIO()):  # it prints both models at construction
        alg = PPO.construct_algorithm(env.get_observations(), env, train_cfg, device)
    if world > 1:
        alg.broadcast_parameters()  # every rank starts from rank 0's weights
    return alg


def train(env_id: str, num_envs: int | None = None, minutes: float | None = None, iterations: int | None = None,
          seed: int = 0, log_dir: str | Path = "logs", resume: str | Path | None = None,
          start_from: str | Path | None = None, compile: bool = True,
          eval_lanes: int = 64, progress: bool = True, config: PpoConfig | None = None,
          ppo: dict[str, Any] | None = None, distributed: bool = False, device: str = "cpu",
          video: bool = False, video_length: int | None = None, run_name: str | None = None,
          task_options: dict[str, Any] | None = None, logger: str = "tensorboard",
          wandb_project: str | None = None) -> TrainResult:
    """Train ``env_id`` for ``minutes`` of wall time or ``iterations`` PPO iterations (exactly one of
    them), continuing ``resume`` (a checkpoint of this task), from the models of ``start_from`` (a
    checkpoint of another task of the same robot whose observations this task's include:
    ``learn/model_init.py``) or from scratch. A run's folder in place of a checkpoint stands for
    its last checkpoint.

    PPO settings: ``config`` (default: the task family's), or a resumed checkpoint's; ``ppo``
    (``{"learning_rate": 3e-4}``) and ``num_envs`` change some of them. A run that starts from a
    checkpoint's models keeps the settings that shape them (``config.MODEL_FIELDS``).

    Ctrl-C (a KeyboardInterrupt) ends a run that is not distributed as its budget would, at its
    last complete iteration, saved; its summary says ``interrupted`` and has no final comparison
    (Ctrl-C during the comparison ends only the comparison).

    ``distributed``: this process is one rank of torch.distributed's default process group (the
    caller initialised it); every rank runs ``num_envs`` lanes of one environment
    (``distributed=True``) and PPO averages its gradients over the ranks. Rank 0 decides when the
    budget is spent, and alone writes the run directory, with every rank's episodes in its figures;
    the other ranks return a result without one.

    ``device``: where the env's torch outputs and the policy live; ``"cuda"`` also runs the
    simulation and the runtime there (MuJoCo Warp).

    ``video``: each checkpoint's policy is also recorded as ``videos/model_<it>.mp4``,
    ``video_length`` (default 200) env steps of one lane in the task's play mode, rendered
    off-screen on the CPU (its time counts in the budget; the training itself, its random streams
    included, is the same as without videos).

    ``run_name`` ends the name of the run's folder, after its start time:
    ``<log_dir>/<task>/<date>_<run_name>``.

    ``logger``: ``"tensorboard"`` (events in the run's folder) or ``"wandb"`` (those events and a
    Weights & Biases run with the same figures, the videos and the final comparison, in
    ``wandb_project``: ``learn/run_log.py``).

    ``task_options``: make-time options of the task for training
    (``{"command_curriculum": True}``), recorded in the checkpoints; a resumed run keeps its
    checkpoint's; ``task_options["overrides"]`` changes the task's config
    (``manager/overrides.py``). The final comparison and the videos run the task with the
    overrides but without the other options; the videos, in play mode, leave out the overrides of
    parts that play mode does not have (pushes, randomisation)."""
    from tqdm import tqdm

    from motrix_gym.integrations.rsl_rl import make_rsl_rl

    check_id(env_id)
    if (minutes is None) == (iterations is None):
        raise ValueError("give exactly one of minutes and iterations")
    if minutes is not None and not (isinstance(minutes, int | float) and minutes > 0):
        raise ValueError(f"minutes must be > 0, got {minutes!r}")
    if iterations is not None and not (is_int(iterations) and iterations >= 1):
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    check_seed(seed)
    check_logger(logger, wandb_project)
    require(logger)
    if run_name is not None:
        checkpoint.check_run_name(run_name)
    if not (task_options is None or isinstance(task_options, dict)):
        raise ValueError(f"task_options must be a dict or None, got {task_options!r}")
    options = dict(task_options or {})
    checkpoint.check_log_dir(checkpoint.task_folder(log_dir, env_id))
    if resume is not None and start_from is not None:
        raise ValueError("give at most one of resume and start_from")
    resume, start_from = (None if p is None else checkpoint.resolve(p) for p in (resume, start_from))
    if not (is_int(eval_lanes) and eval_lanes >= 0):
        raise ValueError(f"eval_lanes must be an int >= 0 (0: no final comparison), got {eval_lanes!r}")
    if not isinstance(video, bool):
        raise ValueError(f"video must be True or False, got {video!r}")
    if video_length is not None and not video:
        raise ValueError(f"video_length {video_length!r}: the length of the videos, which only video=True records")
    if video_length is None:
        video_length = 200
    if not (is_int(video_length) and video_length >= 1):
        raise ValueError(f"video_length must be None (200) or an int >= 1, got {video_length!r}")
    ranks = Ranks.default_group() if distributed else Ranks()
    rank, world = ranks.rank, ranks.world
    lead = rank == 0
    if video and lead:  # a machine that cannot render or write videos says so before the run
        from motrix_gym.sim.render import backend
        from motrix_gym.video import check_writer

        backend()
        check_writer(".mp4")
    start_it, state = 0, None
    changes = dict(ppo or {})
    if num_envs is not None:
        if "num_envs" in changes:
            raise ValueError("give num_envs or ppo['num_envs'], not both")
        changes["num_envs"] = num_envs
    if resume is not None:
        if config is not None:
            raise CheckpointError("a resumed run keeps its checkpoint's PPO settings: give ppo={name: value} to "
                                  "change some of them, not config")
        kept = sorted(set(changes) & set(MODEL_FIELDS))
        if kept:
            raise CheckpointError(f"a resumed run keeps its checkpoint's models: {kept} cannot change")
        ckpt = checkpoint.load(resume)
        meta = ckpt["infos"]
        if meta["env_id"] != env_id:
            raise CheckpointError(f"checkpoint {str(resume)!r} was trained on {meta['env_id']}, not {env_id}")
        config = PpoConfig.from_dict(meta["ppo"])
        kept_options = meta.get("task_options", {})
        if task_options is not None and options != kept_options:
            raise CheckpointError(f"a resumed run keeps its checkpoint's task options {kept_options}, not {options}")
        options = kept_options
        start_it, state = int(ckpt["iter"]) + 1, ckpt
    cfg = (config or default_config(env_id)).with_(**changes)
    facts = task_facts(env_id, **options)  # the options checked before anything starts
    overrides = dict(options.get("overrides") or {})
    shown = _shown_tasks(env_id, facts, overrides, eval_lanes > 0, video) if lead else {}
    start = check_init_from(env_id, cfg, start_from, options) if start_from is not None else None

    torch.manual_seed(seed + rank)
    env = make_rsl_rl(env_id, num_envs=cfg.num_envs, seed=seed, compile=compile, progress=progress and lead,
                      distributed=distributed, device=device, **options)
    run_dir = log = None
    try:  # a run that cannot start closes its env and leaves no folder
        device = str(env.device)
        if cfg.symmetric:
            env.env.runtime.mirror()  # a task without one is refused before training starts
        alg = make_algorithm(env, cfg, device, rank, world)
        if start is not None:
            init_from(alg, env, cfg, start)
        if state is not None:
            alg.load(state, None, strict=True)
            if "learning_rate" in changes:  # else the rate goes on from the optimizer's saved state
                alg.learning_rate = cfg.learning_rate
                for group in alg.optimizer.param_groups:
                    group["lr"] = cfg.learning_rate
        if lead:
            run_dir = checkpoint.new_run(checkpoint.task_folder(log_dir, env_id), run_name)
            run_config = {"env_id": env_id, "seed": seed, "ranks": world, "minutes": minutes, "iterations": iterations,
                          "ppo": cfg.as_dict(), "task_options": options,
                          "resumed_from": str(resume) if resume else None,
                          "started_from": str(start_from) if start_from else None}
            (run_dir / "config.json").write_text(json.dumps(run_config, indent=1))
            log = RunLog(run_dir, logger, run_config, wandb_project)
    except BaseException:
        env.close()
        if run_dir is not None and log is None:  # W&B could not start the run
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    facts["widths"] = observation_widths(env)  # recorded where the env is at hand
    action_space = env.env.single_action_space  # also the final comparison's: the policy acts there
    meta = {"env_id": env_id, "seed": seed, "ppo": cfg.as_dict(), "task_options": options, "task": facts}
    rows: list[dict[str, float]] = []
    returns: deque[float] = deque(maxlen=100)
    lengths: deque[float] = deque(maxlen=100)
    ret = torch.zeros(cfg.num_envs, device=device)
    length = torch.zeros(cfg.num_envs, device=device)
    steps_per_it = cfg.num_steps_per_env * cfg.num_envs * world

    def save(it: int) -> Path:
        path = run_dir / f"model_{it}.pt"
        checkpoint.save(path, alg.save(), {**meta, "iteration": it})
        return path

    def record(it: int, path: Path) -> None:
        if not video:
            return
        part, out = run_dir / "videos" / f"model_{it}.part.mp4", run_dir / "videos" / f"model_{it}.mp4"
        out.parent.mkdir(exist_ok=True)
        try:  # a run stopped while recording leaves no half-written video
            with torch.random.fork_rng(devices=[]):  # building the policy's models draws from torch's RNG
                play(env_id, path, out=part, steps=video_length, seed=seed, progress=False,
                     task_options={"overrides": shown} if shown else None)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        part.replace(out)
        log.video(out, it)

    obs = env.get_observations()
    alg.train_mode()
    t0 = time.perf_counter()
    budget = math.inf if minutes is None else 60.0 * minutes
    bar = tqdm(total=iterations, desc=f"train {env_id}", unit="it", disable=not (progress and lead),
               dynamic_ncols=True)
    it, last, mine, everyone = start_it - 1, None, 0, 0
    # the last complete iteration, the algorithm's state after it and the episodes counted by then:
    # what a run stopped by Ctrl-C keeps (an update cut short has changed some of the weights)
    good: tuple[int, dict[str, Any] | None, int, int] = (it, None, 0, 0)
    interrupted = False
    try:  # Ctrl-C ends the run as its budget would, after the last iteration that completed
        while _go_on(distributed, (iterations is None or it + 1 < start_it + iterations)
                     and time.perf_counter() - t0 < budget):
            it += 1
            t_it = time.perf_counter()
            ended_returns, ended_lengths = [], []
            with torch.inference_mode():
                for _ in range(cfg.num_steps_per_env):
                    actions = alg.act(obs)
                    obs, rewards, dones, extras = env.step(actions)
                    alg.process_env_step(obs, rewards, dones, extras)
                    ret += rewards
                    length += 1
                    ended = dones.nonzero().flatten()
                    if len(ended):
                        ended_returns += ret[ended].tolist()
                        ended_lengths += length[ended].tolist()
                        ret[ended] = 0.0
                        length[ended] = 0.0
                alg.compute_returns(obs)
            collect = time.perf_counter() - t_it
            losses = alg.update()
            seconds = time.perf_counter() - t_it
            mine += len(ended_returns)
            ended_returns, ended_lengths = _gather(distributed, ended_returns, ended_lengths)
            everyone += len(ended_returns)
            if not lead:
                continue
            returns.extend(ended_returns)
            lengths.extend(ended_lengths)
            row = {"iteration": it, "env_steps": (it - start_it + 1) * steps_per_it,
                   "seconds": time.perf_counter() - t0, "steps_per_s": steps_per_it / seconds,
                   "mean_return": _mean(returns), "mean_episode_length": _mean(lengths)}
            rows.append(row)
            if not distributed:  # the iteration is complete: what follows only reports and saves it
                good = (it, copy.deepcopy(alg.save()), mine, everyone)
            figures = {f"Loss/{key}": value for key, value in losses.items()}
            figures.update({"Loss/learning_rate": alg.learning_rate,
                            "Policy/mean_std": float(alg.get_policy().output_std.detach().mean()),
                            "Perf/total_fps": row["steps_per_s"], "Perf/collection_time": collect,
                            "Perf/learning_time": seconds - collect})
            if returns:
                figures["Train/mean_reward"] = row["mean_return"]
                figures["Train/mean_episode_length"] = row["mean_episode_length"]
            figures.update(extras.get("log", {}))  # summed over the ranks by the env
            log.scalars(figures, it)
            if (it - start_it + 1) % cfg.save_interval == 0:
                last = save(it)
                record(it, last)
            bar.update(1)
            episodes = (f"return {row['mean_return']:.2f}  length {row['mean_episode_length']:.0f}" if returns
                        else "no episode ended yet")
            bar.set_postfix_str(f"{episodes}  {row['steps_per_s']:,.0f} steps/s  {row['seconds'] / 60:.1f} min")
    except KeyboardInterrupt:
        if distributed:
            raise
        interrupted = True
        it, state, mine, everyone = good
        if state is not None:
            alg.load(state, None, strict=True)
        rows = rows[:it - start_it + 1]
    bar.close()
    seconds = time.perf_counter() - t0
    done = it - start_it + 1
    env.close()
    if done < 1:
        if log is not None:
            log.close(failed=True)
        if interrupted:
            raise KeyboardInterrupt
        raise RuntimeError("the time budget ended before the first iteration")
    if not lead:
        return TrainResult(None, None, done, done * steps_per_it, seconds, {}, mine)
    if last is None or last.name != f"model_{it}.pt":
        last = save(it)
        if not interrupted:
            try:
                record(it, last)
            except KeyboardInterrupt:  # the run stands, saved, without its last video and comparison
                interrupted = True
    _write_progress(run_dir, rows)

    # null, not NaN, while no episode has ended: NaN is not JSON
    summary = {"env_id": env_id, "ranks": world, "iterations": done, "env_steps": done * steps_per_it,
               "episodes": everyone, "train_seconds": seconds,
               **{f"final_train_{k}": None if math.isnan(rows[-1][k]) else rows[-1][k]
                  for k in ("mean_return", "mean_episode_length")},
               "interrupted": interrupted, "eval": None, "eval_overrides": overrides}
    if eval_lanes and not interrupted:
        alg.eval_mode()
        try:
            summary["eval"] = evaluate(env_id, alg.get_policy(), lanes=eval_lanes, seed=seed + 1,
                                       progress=progress, device=device, action_space=action_space,
                                       **({"overrides": overrides} if overrides else {}))
        except KeyboardInterrupt:  # the run stands, saved, without its comparison
            summary["interrupted"] = True
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    log.summary(summary)
    log.close()
    return TrainResult(run_dir, last, done, done * steps_per_it, seconds, summary, mine)


def _shown_tasks(env_id: str, facts: dict[str, Any], overrides: dict[str, Any], compare: bool,
                 video: bool) -> dict[str, Any]:
    """The overrides of the videos: the run's ``overrides`` that the task in play mode has a place
    for (it has no pushes or randomisation to change). Checks that the comparison's task (with
    ``overrides``, without the other options) and the videos' give the policy the observations it
    is trained on (``facts``), before the run starts."""
    def check(what: str, **options: Any) -> None:
        now = task_facts(env_id, **options)
        key = layout_change(facts, now)
        if key is not None:
            raise ValueError(f"{what}: {env_id} made with {options} has {key} {now[key]}, not the "
                             f"{facts[key]} the policy is trained on")

    if compare:
        check("the final comparison", **({"overrides": overrides} if overrides else {}))
    if not video:
        return {}
    shown = placed_overrides(env_id, overrides, "play")
    check("the videos", mode="play", **({"overrides": shown} if shown else {}))
    return shown


def _go_on(distributed: bool, here: bool) -> bool:
    """Rank 0's decision, the same on every rank (so every rank runs the same iterations)."""
    if not distributed:
        return here
    import torch.distributed as dist

    flag = torch.tensor([int(here)])
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def _gather(distributed: bool, returns: list[float], lengths: list[float]) -> tuple[list[float], list[float]]:
    """The episodes that ended on every rank this iteration (for rank 0's figures)."""
    if not distributed:
        return returns, lengths
    import torch.distributed as dist

    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, (returns, lengths))
    return [r for rs, _ in every for r in rs], [n for _, ns in every for n in ns]


def last_episodes(summary: dict[str, Any]) -> str:
    """The summary's training episodes in words: "last 100 episodes: mean return ..., mean length ..."."""
    if summary["final_train_mean_return"] is None:
        return "no episode ended"
    return (f"last 100 episodes: mean return {summary['final_train_mean_return']:.3f}, "
            f"mean length {summary['final_train_mean_episode_length']:.1f} steps")


def _mean(values: deque[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _write_progress(run_dir: Path, rows: list[dict[str, float]]) -> None:
    with open(run_dir / "progress.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot_curve(rows, run_dir / "curve.png", title=run_dir.parent.name)


def plot_curve(rows: list[dict[str, float]], out: Path, title: str) -> None:
    """Mean episodic return and episode length (last 100 episodes) against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["env_steps"] / 1e6 for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    a.plot(steps, [r["mean_return"] for r in rows])
    a.set(xlabel="env steps (M)", ylabel="mean episodic return", title=title)
    b.plot(steps, [r["mean_episode_length"] for r in rows], color="tab:orange")
    b.set(xlabel="env steps (M)", ylabel="mean episode length (steps)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)

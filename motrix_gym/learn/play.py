"""``python -m motrix_gym play``: a trained policy in the task's play mode (no observation noise,
pushes or randomisation), rendered off-screen, with per-term reward means and the commands'
tracking errors; optionally exported to ONNX or TorchScript, or run from an ONNX file
(``onnx_policy.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from motrix_gym.arguments import check_out_path, is_int
from motrix_gym.learn import checkpoint, steering
from motrix_gym.learn.checkpoint import CheckpointError
from motrix_gym.learn.config import PpoConfig
from motrix_gym.learn.evaluate import BASELINES, baselines, start_episodes
from motrix_gym.learn.export import deployment_metadata, export_jit, export_onnx
from motrix_gym.learn.model_init import check_models, init_from
from motrix_gym.learn.onnx_policy import OnnxPolicy, is_onnx
from motrix_gym.mdp.commands import velocity_triple
from motrix_gym.registry import check_id
from motrix_gym.sim.render import tile
from motrix_gym.video import VIDEO_SUFFIXES, check_writer, write_video


@dataclass(frozen=True)
class PlayResult:
    steps: int
    reward_terms: dict[str, float]  # mean per env step and lane (weight and step_dt included)
    metrics: dict[str, float]  # commands' errors, mean over steps and lanes
    episodes_ended: int
    terminated: int  # of those, the episodes a termination ended (a fall, ...), not a time-out
    video: Path | None
    onnx: Path | None  # export="onnx": the file written
    jit: Path | None  # export="jit": the file written
    trained_on: str  # the task of the policy's run


EXPORTS = (None, "onnx", "jit")
PLAIN_KEYS = ("space: pause, backspace: restart the episode, minus/equal: half/twice the speed (up to real time), "
              "comma/period: show the previous/next lane; close the window (or ctrl+q) to stop")
SLOWEST = 1 / 16  # of real time, after four presses of minus


class Keys:
    """What the keys pressed in ``play``'s window ask: pause, restart, the speed (a share of real
    time, halved or doubled by a press, within [``SLOWEST``, 1]), the lane shown (of ``lanes``,
    the one after the last wrapping round to the first), and the command of the one
    velocity command among ``commands`` (a task's command terms) that can be held (none: those
    keys do nothing: a task without one, or whose command draws headings), held at ``start``
    from the beginning."""

    def __init__(self, commands: Iterable[Any], start: Sequence[float], lanes: int = 1) -> None:
        held = [c for c in commands if getattr(c, "can_hold", False)]
        self.command = held[0] if len(held) == 1 else None
        self.paused = False
        self.speed = 1.0
        self.lanes, self.lane = lanes, 0
        self.value = tuple(start)
        if self.command is not None:
            self.command.hold(self.value)
        elif any(self.value):
            raise ValueError(f"command {self.value}: the task has no velocity command that can be held")

    @property
    def help(self) -> str:
        """What the keys do here: steering only where there is a command to steer."""
        return PLAIN_KEYS if self.command is None else f"{steering.HELP}, {PLAIN_KEYS}"

    def read(self, pressed: Sequence[str]) -> bool:
        """Apply ``pressed`` (key names, in order); True when the episode is to restart."""
        from tqdm import tqdm

        restart = False
        for key in pressed:
            if key == "space":
                self.paused = not self.paused
                tqdm.write("paused" if self.paused else "running")
            elif key == "backspace":
                restart = True
                tqdm.write("restart")
            elif key in ("minus", "equal"):
                self.speed = min(max(self.speed * (0.5 if key == "minus" else 2.0), SLOWEST), 1.0)
                tqdm.write(f"speed: {self.speed:g} of real time")
            elif key in ("comma", "period"):
                self.lane = (self.lane + (1 if key == "period" else -1)) % self.lanes
                tqdm.write(f"lane {self.lane} of {self.lanes}")
            elif self.command is not None and (value := steering.steer(self.value, key, self.command.ranges)):
                self.value = value
                self.command.hold(value)
                tqdm.write(steering.describe(self.command.value[0].tolist()))  # what the lanes are asked now
        return restart


def load_policy(ckpt: dict[str, Any] | str | Path, env: Any, purpose: str = "play") -> tuple[Callable, Any]:
    """The deterministic policy of checkpoint ``ckpt`` (loaded, or its path) for ``env`` (an
    rsl_rl adapter of its task, or of another task of its robot whose observations include the
    policy's: ``check_policy``), and the algorithm that holds it. Each observation term the policy
    read reaches it at its columns in ``env``; a term it never observed, at zero weight
    (``model_init.init_from``). ``purpose`` leads the errors (what the policy was for)."""
    from motrix_gym.learn.train import make_algorithm

    if not isinstance(ckpt, dict):
        ckpt = checkpoint.load(ckpt)
    cfg = PpoConfig.from_dict(ckpt["infos"]["ppo"])
    alg = make_algorithm(env, cfg, str(env.device))
    init_from(alg, env, cfg, ckpt, models=("actor",), purpose=purpose)
    alg.eval_mode()
    return alg.get_policy(), alg


def placed_overrides(env_id: str, overrides: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """Those of ``overrides`` that ``env_id`` made in ``mode`` has a place for (play mode has no
    pushes or randomisation; another task may lack a term)."""
    from motrix_gym.envs import task_config, task_name
    from motrix_gym.manager.overrides import found_in

    return found_in(task_config(task_name(env_id), mode=mode), overrides) if overrides else {}


def run_overrides(path: str | Path, env_id: str, mode: str = "train") -> dict[str, Any]:
    """The overrides the run of checkpoint ``path`` trained with that ``env_id`` made in ``mode``
    has a place for."""
    if is_onnx(path):
        raise CheckpointError(f"{str(path)!r} is an exported policy, which records no run's overrides: give them "
                              "with --override")
    trained = (checkpoint.load(path)["infos"].get("task_options") or {}).get("overrides") or {}
    return placed_overrides(env_id, trained, mode)


def open_policy(path: Path, env_id: str, options: Mapping[str, Any],
                purpose: str = "play") -> tuple[dict[str, Any] | OnnxPolicy, str]:
    """The policy at ``path`` (resolved): a checkpoint, loaded and checked for ``env_id`` made with
    ``options`` (``check_policy``), or an exported ``.onnx`` file (checked once the env is made:
    ``ready_policy``); and the task it was trained on. ``purpose`` leads the errors."""
    if is_onnx(path):
        exported = OnnxPolicy(path)
        return exported, exported.trained_on
    ckpt = checkpoint.load(path)
    check_policy(env_id, path, ckpt, options, purpose)
    return ckpt, ckpt["infos"]["env_id"]


def ready_policy(source: dict[str, Any] | OnnxPolicy, env: Any, env_id: str,
                 purpose: str = "play") -> tuple[Callable, Any]:
    """``open_policy``'s policy for ``env`` (an rsl_rl adapter of ``env_id``), and the algorithm
    that holds it (None for an exported file)."""
    if isinstance(source, OnnxPolicy):
        source.check(env, env_id)
        return source, None
    return load_policy(source, env, purpose)


def check_policy(env_id: str, path: str | Path, ckpt: dict[str, Any], options: Mapping[str, Any],
                 purpose: str = "play") -> None:
    """A CheckpointError, before anything is made, unless the policy of checkpoint ``ckpt``
    (loaded from ``path``) can play ``env_id`` made with ``options``: the robot it was trained
    on, and every observation term it read there with the same history
    (``model_init.check_models``); the error names the task options and overrides its run was
    trained with; ``purpose`` (``play``, ``evaluate``, ...) leads it."""
    meta = ckpt["infos"]
    try:
        check_models(env_id, PpoConfig.from_dict(meta["ppo"]), ckpt, path, options, models=("actor",),
                     purpose=purpose)
    except CheckpointError as e:
        trained = meta.get("task_options") or {}
        hint = f" (its run trained {meta['env_id']} with task options {trained})" if trained else ""
        raise CheckpointError(f"{e}{hint}") from None


def play(env_id: str, checkpoint_path: str | Path, out: str | Path | None = None, lanes: int = 1,
         steps: int | None = None, every: int | None = None, export: str | None = None, seed: int = 0,
         width: int | None = None, height: int | None = None, progress: bool = True,
         command: Sequence[float] | None = None, markers: bool | None = None,
         task_options: Mapping[str, Any] | None = None, viewer: bool = False) -> PlayResult:
    """Run the policy of ``checkpoint_path`` (a run's folder: its last checkpoint; or a
    ``policy.onnx`` that ``export="onnx"`` wrote, run by onnxruntime as a robot runs it; or
    ``"random"`` or ``"zero"``: uniform random or zero actions, a look at the task untrained) on ``env_id``,
    its task or another of its robot whose observations include the policy's (a policy of flat
    ground on rough ground or stairs, blind to the terms it never observed), for ``steps`` env
    steps (default: one episode, at most 10 s) on ``lanes`` lanes; write every ``every``-th frame
    (default 2) of ``width`` x ``height`` pixels a lane (default 480 x 360) to ``out`` (.gif or
    .mp4, lanes tiled); ``export="onnx"`` (on the task the policy was trained
    on) writes ``policy.onnx`` beside the checkpoint, with the metadata a robot's controller needs
    (``learn/export.py``); ``export="jit"`` the same as TorchScript, ``policy.pt``.
    ``command=(vx, vy, yaw_rate)`` gives every lane of a velocity-tracking task that command;
    ``markers`` draws what the commands ask in the video or the window (``render_markers``; default
    True). Those of ``every``, ``width``, ``height`` and ``markers`` that nothing would draw with
    are refused rather than ignored.
    ``task_options``: make-time options of the task (``heading_command=True``, ...; not ``mode``,
    which is play's), for example the ones the policy was trained with.
    ``viewer``: show one of the ``lanes`` in a window (MuJoCo's viewer, real time;
    ``render_mode="human"``), lane 0 first, instead of writing a video, for ``steps`` or until the
    window closes (``steps=None``), and read its keys (``Keys``, whose help it prints): they choose
    the lane shown, and a velocity task's command, every lane's, is steered from them, starting at
    ``command`` (default: standing still)."""
    from tqdm import tqdm

    from motrix_gym.integrations.rsl_rl import make_rsl_rl

    check_id(env_id)
    if export not in EXPORTS:
        raise ValueError(f"export must be one of {EXPORTS}, got {export!r}")
    if not (is_int(lanes) and lanes >= 1):
        raise ValueError(f"lanes must be an int >= 1, got {lanes!r}")
    if every is not None and not (is_int(every) and every >= 1):
        raise ValueError(f"every must be None (2) or an int >= 1, got {every!r}")
    if steps is not None and not (is_int(steps) and steps >= 1):
        raise ValueError(f"steps must be None (one episode, at most 10 s) or an int >= 1, got {steps!r}")
    if markers is not None and not isinstance(markers, bool):
        raise ValueError(f"markers must be None (True), True or False, got {markers!r}")
    if not isinstance(viewer, bool):
        raise ValueError(f"viewer must be True or False, got {viewer!r}")
    if viewer and out is not None:
        raise ValueError(f"viewer shows a lane in a window: it takes no out (a video), got out={out!r}")
    if out is None:
        if given := [name for name, value in (("every", every), ("width", width), ("height", height))
                     if value is not None]:
            raise ValueError(f"{', '.join(given)}: shape the video, which only out writes (got no out)")
        if markers is not None and not viewer:
            raise ValueError("markers are drawn in the video or the window: give them with out or viewer")
    if not (task_options is None or isinstance(task_options, Mapping)) or "mode" in (task_options or {}):
        raise ValueError("task_options must be a mapping of the task's make-time options other than mode "
                         f"(play runs the play mode), got {task_options!r}")
    options = dict(task_options or {})
    if command is not None:
        if "command" in options:
            raise ValueError("give the command once: as command or as task_options['command']")
        options["command"] = command
    if out is not None:
        out = check_out_path(out, VIDEO_SUFFIXES)
        check_writer(out.suffix)
    baseline = checkpoint_path if isinstance(checkpoint_path, str) and checkpoint_path in BASELINES else None
    if baseline is not None:
        if export is not None:
            raise CheckpointError(f"export writes a trained policy: it takes a checkpoint, not {baseline!r} actions")
        source, trained_on = None, env_id
    else:
        checkpoint_path = checkpoint.resolve(checkpoint_path)
        if export is not None and is_onnx(checkpoint_path):
            raise CheckpointError(f"{str(checkpoint_path)!r} is an exported policy already: export takes a "
                                  "checkpoint")
        source, trained_on = open_policy(checkpoint_path, env_id, {"mode": "play", **options})
    if export is not None and trained_on != env_id:
        raise CheckpointError(f"export describes the task a policy was trained on: play {trained_on} to export "
                              f"the policy of {str(checkpoint_path)!r}, not {env_id}")
    markers = True if markers is None else markers
    every = 2 if every is None else every
    render = {} if out is None else {"render_mode": "rgb_array", "width": 480 if width is None else width,
                                     "height": 360 if height is None else height, "render_markers": markers}
    start = None
    if viewer:  # the command is held once the env is made, within the task's ranges
        render = {"render_mode": "human", "render_markers": markers}
        start = velocity_triple(options.pop("command", (0.0, 0.0, 0.0)), "command")
    env = make_rsl_rl(env_id, num_envs=lanes, seed=seed, compile=False, progress=False, mode="play", **render,
                      **options)
    base = env.env
    try:
        if baseline is None:
            policy, alg = ready_policy(source, env, env_id)
        else:
            policy, alg = baselines(base.single_action_space, seed)[baseline], None
        rt = base.runtime
        keys = Keys(rt.ctx.commands.values(), start, lanes) if viewer else None
        if keys is not None:
            tqdm.write(f"keys in the window: {keys.help}")
        if steps is None and not viewer:
            steps = min(base.task.max_episode_steps, round(10.0 / base.task.step_dt))
        rewards = torch.zeros(len(rt.reward_names), dtype=torch.float64)
        metrics: dict[str, list[float]] = {}  # name -> [sum, count] over live lanes and steps
        frames, ended, terminated, ran = [], 0, 0, 0
        obs = env.get_observations()
        bar = tqdm(total=steps, desc=f"play {env_id}", unit="step", disable=not progress)
        while steps is None or ran < steps:
            if keys is not None:
                restart = keys.read(base.viewer.pressed())
                if not base.viewer.running:
                    break
                base.viewer.period = base.task.step_dt / keys.speed  # a frame per control step, paced
                base.viewer_lane = keys.lane
                if restart:
                    obs = env.reset()[0]
                    start_episodes(policy)
                if keys.paused:  # the same state again, one control step later
                    time.sleep(base.task.step_dt)
                    base.render()
                    continue
            with torch.inference_mode():
                obs, _, dones, extras = env.step(policy(obs))
                start_episodes(policy, dones)
            rewards += rt.reward_terms[:lanes].sum(0).double()
            ended += int(dones.sum())
            terminated += int((dones & ~extras["time_outs"]).sum())
            live = ~dones  # lanes that ended were reset: their commands describe the new episode
            for name, c in rt.ctx.commands.items():
                for key, value in (c.metrics(rt.ctx) if hasattr(c, "metrics") else {}).items():
                    acc = metrics.setdefault(f"{name}/{key}", [0.0, 0])
                    acc[0] += float(value[:lanes][live].sum())
                    acc[1] += int(live.sum())
            if out is not None and ran % every == 0:
                frames.append(tile(base.render()))
            ran += 1
            bar.update()
        bar.close()
        video = None if out is None else write_video(frames, out, fps=1.0 / (base.task.step_dt * every))
        onnx = jit = None
        if export is not None:
            meta = deployment_metadata(base, env_id, Path(checkpoint_path))
            if export == "onnx":
                onnx = export_onnx(alg, Path(checkpoint_path).with_name("policy.onnx"), meta)
            else:
                jit = export_jit(alg, Path(checkpoint_path).with_name("policy.pt"), meta)
    finally:  # frees the renderer's GL context while its display is still up
        env.close()
    return PlayResult(ran, {n: float(r) / max(ran * lanes, 1) for n, r in zip(rt.reward_names, rewards)},
                      {k: total / max(count, 1) for k, (total, count) in metrics.items()}, ended, terminated,
                      video, onnx, jit, trained_on)

"""``train --start-from``: a task's actor and critic start from the models of another task's
checkpoint of the same robot (a policy trained on rough ground starting on stairs); ``play`` runs
a policy so on another task of its robot (a policy of flat ground on rough ground).

Each model reads one observation group (``PpoConfig.to_rsl_rl``'s ``obs_groups``); its input
layer's columns (the MLP's first layer, or the recurrent layer's input weights where one reads the
observations first) are the group's terms in order (``TorchManagerRuntime.observation_columns``).
``check_init_from`` needs only the new task's config and the checkpoint, which records what it
needs of its own task (``task_facts``), so that ``train`` refuses bad input before it writes
anything; ``init_from`` also checks each term's width against the one the checkpoint records
(``observation_widths``), which takes a made env.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from motrix_gym.learn import checkpoint
from motrix_gym.learn.checkpoint import CheckpointError
from motrix_gym.learn.config import MODEL_FIELDS, PpoConfig

# the normaliser's per-column statistics, which move with their columns like the input layer's weights
_STATISTICS = ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std")


def _input_layer(module: Any) -> str:
    """The state-dict key of the weights that read ``module``'s observations."""
    return "rnn.rnn.weight_ih_l0" if getattr(module, "is_recurrent", False) else "mlp.0.weight"


def _groups(cfg: PpoConfig, models: Sequence[str]) -> dict[str, str]:
    """Each of ``models`` (``"actor"``, ``"critic"``) and the observation group it reads."""
    return {model: group for model, (group,) in cfg.to_rsl_rl()["obs_groups"].items() if model in models}


def task_facts(env_id: str, **options: Any) -> dict[str, Any]:
    """What a checkpoint records of its task (made with ``options``), for a later start from it
    without the task at hand (one of your own, registered by a module not imported): its robot
    model's name, the robot as the task table describes it, each observation group's terms in
    order and the histories of those that keep one (plain data)."""
    from motrix_gym.envs import robot_label, task_config, task_name

    name = task_name(env_id)
    cfg = task_config(name, **options)
    return {"robot": cfg.scene.robot.name, "robot_label": robot_label(name, cfg),
            "observations": {g: [t.name for t in terms] for g, terms in cfg.observations.items()},
            "history": {g: {t.name: t.history for t in terms if t.history != 1}
                        for g, terms in cfg.observations.items()}}


def observation_widths(env: Any) -> dict[str, dict[str, int]]:
    """Each observation group's terms and their widths (history included) in ``env`` (an rsl_rl
    adapter): what a checkpoint records beside ``task_facts`` once its env is made."""
    rt = env.env.runtime
    return {g: {n: c.stop - c.start for n, c in rt.observation_columns(g).items()} for g in rt.program.observations}


def layout_change(trained: dict[str, Any], now: dict[str, Any]) -> str | None:
    """The first fact of the observations a policy reads (its terms, their histories) in which the
    task facts ``now`` differ from those it was ``trained`` on; None if they agree."""
    return next((k for k in ("observations", "history") if trained.get(k, now[k]) != now[k]), None)


MODELS = ("actor", "critic")


def _facts(ckpt: dict[str, Any], purpose: str) -> dict[str, Any]:
    """The task facts ``ckpt`` records; for a checkpoint without them (an earlier format), those of
    its task as registered now."""
    infos = ckpt["infos"]
    if "task" in infos:
        return infos["task"]
    try:
        return task_facts(infos["env_id"])
    except ValueError as e:
        raise CheckpointError(f"{purpose} a checkpoint of {infos['env_id']}, which it does not describe: "
                              f"{e}") from None


def check_init_from(env_id: str, cfg: PpoConfig, path: str | Path, options: Mapping[str, Any] | None = None, *,
                    models: Sequence[str] = MODELS, purpose: str = "start from") -> dict[str, Any]:
    """The checkpoint at ``path``, if ``env_id``'s ``models`` (the task made with ``options``,
    which may change its observations) can start from it: the same robot and model settings
    (``MODEL_FIELDS``), and each model's observation terms a subset of the new task's (a term the
    checkpoint did not observe starts blind). Otherwise a CheckpointError saying what differs,
    after ``purpose`` and the path."""
    ckpt = checkpoint.load(path)
    check_models(env_id, cfg, ckpt, path, options, models=models, purpose=purpose)
    return ckpt


def check_models(env_id: str, cfg: PpoConfig, ckpt: dict[str, Any], path: str | Path,
                 options: Mapping[str, Any] | None = None, *, models: Sequence[str] = MODELS,
                 purpose: str = "start from") -> None:
    """``check_init_from`` of a checkpoint already loaded (``ckpt``, from ``path``)."""
    source = ckpt["infos"]["env_id"]
    was, now = _facts(ckpt, purpose), task_facts(env_id, **(options or {}))
    if was["robot"] != now["robot"]:
        raise CheckpointError(f"{purpose} {str(path)!r}: it was trained on {source} ({was['robot_label']}), "
                              f"{env_id} has a {now['robot_label']}")
    old = PpoConfig.from_dict(ckpt["infos"]["ppo"])
    for field in MODEL_FIELDS:
        if getattr(old, field) != getattr(cfg, field):
            raise CheckpointError(f"{purpose} {str(path)!r}: its {field} is {getattr(old, field)!r}, "
                                  f"{env_id} trains with {getattr(cfg, field)!r}")
    for model, group in _groups(cfg, models).items():
        extra = sorted(set(was["observations"][group]) - set(now["observations"][group]))
        if extra:
            raise CheckpointError(f"{purpose} {str(path)!r}: its {model} observed {extra}, which {env_id}'s "
                                  f"{group!r} observations lack")
        kept = [{n: h.get(group, {}).get(n, 1) for n in was["observations"][group]}
                for h in (was.get("history", {}), now["history"])]  # a checkpoint without histories: none
        differ = sorted(n for n in kept[0] if kept[0][n] != kept[1][n])
        if differ:
            raise CheckpointError(f"{purpose} {str(path)!r}: its {model} observed {differ} with histories "
                                  f"{[kept[0][n] for n in differ]}, {env_id}'s {group!r} observations keep "
                                  f"{[kept[1][n] for n in differ]}")


def init_from(alg: Any, env: Any, cfg: PpoConfig, ckpt: dict[str, Any], *, models: Sequence[str] = MODELS,
              purpose: str = "start from") -> None:
    """Load ``ckpt`` (from ``check_init_from``) into ``alg``'s ``models``: each term's
    input-layer weights and normaliser statistics move to the term's columns in the new task,
    columns of terms it did not observe keep zero weights; every other weight is copied (a
    shape that differs, such as another action count, is a CheckpointError). The normalisers'
    counts restart, so that their statistics follow the new task's observations from the first
    iteration. The optimizer and iteration count start afresh."""
    rt = env.env.runtime
    source, facts = ckpt["infos"]["env_id"], _facts(ckpt, purpose)
    for model, group in _groups(cfg, models).items():
        columns, read = rt.observation_columns(group), facts.get("widths", {}).get(group, {})
        old, start = {}, 0
        for name in facts["observations"][group]:
            width = columns[name].stop - columns[name].start
            if read.get(name, width) != width:  # a term of the same name that observes something else
                raise CheckpointError(f"{purpose} {source}: its {model} read {name!r} {read[name]} columns wide, "
                                      f"{width} here")
            old[name], start = slice(start, start + width), start + width
        saved = ckpt[f"{model}_state_dict"]
        module = getattr(alg, model)
        first = _input_layer(module)  # the same kind of model as the checkpoint's (check_models)
        if saved[first].shape[1] != start:
            raise CheckpointError(f"{purpose} {source}: its {model} read {saved[first].shape[1]} inputs, "
                                  f"its terms are {start} wide here")
        state = module.state_dict()
        for key, value in saved.items():
            if key in (first, *_STATISTICS) and key in state:
                state[key] = state[key].clone()
                if key == first:
                    state[key].zero_()
                for name, cols in old.items():
                    state[key][:, columns[name]] = value[:, cols]
            elif key == "obs_normalizer.count":
                state[key] = torch.zeros_like(value)
            else:
                state[key] = value
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise CheckpointError(f"{purpose} {source}: its {model} does not fit this task's: {e}") from None

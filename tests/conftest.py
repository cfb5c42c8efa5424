"""Shared helpers: small real-physics envs, run eagerly unless a test is about compilation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import motrix_gym  # noqa: F401  (registers the ids)
from motrix_gym.sim.backend import BACKENDS  # tests of the env's contracts run on every backend
from motrix_gym.sim.render import RenderingUnavailable
from motrix_gym.sim.render import backend as gl_backend
from motrix_gym.vector_env import MotrixVectorEnv

TASK = "G1WalkFlat"
ENV_ID = "Motrix/G1WalkFlat-v0"

warnings.filterwarnings("ignore", message=".*Box .*space.*")


def gl_missing() -> str | None:
    """Why nothing renders on this machine, or None when a backend does."""
    try:
        gl_backend()
    except RenderingUnavailable as e:
        return str(e)
    return None


_GL_MISSING = gl_missing()  # once: where nothing renders, each call probes every backend again
needs_gl = pytest.mark.skipif(_GL_MISSING is not None, reason=str(_GL_MISSING))


def make(num_envs: int = 4, **kwargs) -> MotrixVectorEnv:
    kwargs.setdefault("compile", False)
    return MotrixVectorEnv(TASK, num_envs, **kwargs)


def with_a_graph_break(task: str):
    """``task``'s config with one more reward term, which runs eagerly but breaks any graph it is
    traced into."""
    import dataclasses

    from motrix_gym.envs import task_config
    from motrix_gym.manager.terms import RewardTerm

    def broken(env):
        torch._dynamo.graph_break()
        return env.episode_step * 0.0

    cfg = task_config(task)
    return dataclasses.replace(cfg, rewards=(*cfg.rewards, RewardTerm("broken", broken, 1.0)))


def random_actions(steps: int, num_envs: int, dim: int, std: float = 1.5, seed: int = 0) -> np.ndarray:
    """Actions large enough that episodes end within tens of steps."""
    return (np.random.default_rng(seed).standard_normal((steps, num_envs, dim)) * std).astype(np.float32)


def first_lanes_alike(cfg, steps: int = 120) -> None:
    """Lanes 0-3 of ``cfg`` run bit for bit alike beside 0 or 4 more lanes (same seed and actions)."""
    outs = {}
    for n in (4, 8):
        env = MotrixVectorEnv(cfg, n, compile=False)
        out = [env.reset(seed=3)[0][:4]]
        for act in random_actions(steps, 8, 12, std=1.0, seed=4):
            out.append(env.step(act[:n])[0][:4])
        outs[n] = np.stack(out)
        env.close()
    np.testing.assert_array_equal(outs[4], outs[8])


def compiled_as_eager(cfg, n: int = 16, steps: int = 80) -> tuple[MotrixVectorEnv, MotrixVectorEnv]:
    """``cfg`` compiled (guards checked on every call: a graph that would need another version
    raises) and eager, side by side from one seed and the same actions: the same episodes end and
    observations agree within the compile tolerance; some episode ended. Both envs, still open."""
    fast = MotrixVectorEnv(cfg, n, compile=True, progress=False)
    slow = MotrixVectorEnv(cfg, n, compile=False)
    fast.runtime.check_guards = True
    a, _ = fast.reset(seed=1)
    b, _ = slow.reset(seed=1)
    ended = 0
    for act in random_actions(steps, n, 12, std=2.0, seed=6):
        a, _, ta, ua, _ = fast.step(act)
        b, _, tb, ub, _ = slow.step(act)
        np.testing.assert_array_equal(ta | ua, tb | ub)
        torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), rtol=1e-5, atol=1e-5)
        ended += int((ta | ua).sum())
    assert ended > 0
    return fast, slow


def tensorboard_scalars(run_dir) -> dict[str, dict[int, float]]:
    """A run's TensorBoard scalars: each tag's value at each step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def tiny(task: str):
    """``task``'s PPO settings shrunk to run an iteration in moments: 4 lanes, 4 steps, 16 units."""
    from motrix_gym.envs import ppo_config

    return ppo_config(task).with_(num_envs=4, num_steps_per_env=4, num_learning_epochs=1, num_mini_batches=1,
                                  actor_hidden=(16,), critic_hidden=(16,), save_interval=1)


def _owners(rt) -> dict[str, object]:
    """The objects that hold the runtime's state, by the prefix of their tensors' snapshot keys."""
    return {"ctx": rt.ctx, "rt": rt, "rng": rt.ctx.rng, **{f"cmd.{k}": c for k, c in rt.ctx.commands.items()},
            **{f"observe.{g}": o for g, o in rt._observers.items()}}


def snapshot(env: MotrixVectorEnv) -> dict[str, torch.Tensor]:
    """Every tensor of the runtime state (context, commands, buffers), cloned."""
    rt = env.runtime
    out = {}
    for owner, obj in _owners(rt).items():
        for k, v in vars(obj).items():
            if isinstance(v, torch.Tensor):
                out[f"{owner}.{k}"] = v.clone()
    out["sim.qpos"], out["sim.qvel"] = rt.sim.qpos.clone(), rt.sim.qvel.clone()
    return out


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def env4(backend):
    env = make(4, backend=backend)
    env.reset(seed=0)
    yield env
    env.close()


def restore(env: MotrixVectorEnv, snap: dict[str, torch.Tensor]) -> None:
    """Write a :func:`snapshot` back in place."""
    rt = env.runtime
    owners = _owners(rt)
    for key, value in snap.items():
        owner, name = key.rsplit(".", 1)
        if owner == "sim":
            getattr(rt.sim, name).copy_(value)
        else:
            getattr(owners[owner], name).copy_(value)

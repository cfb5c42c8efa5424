"""Adapters to learners' own vector-env interfaces (each an optional extra)."""

from __future__ import annotations

from typing import Any


def motrix_base(env: Any, adapter: str, output: str | None) -> Any:
    """The ``MotrixVectorEnv`` under ``env``, checked to have SAME_STEP autoreset and ``output``
    (None: either)."""
    from gymnasium.vector import AutoresetMode

    from motrix_gym.vector_env import MotrixVectorEnv

    base = env.unwrapped
    if not isinstance(base, MotrixVectorEnv):
        raise TypeError(f"{adapter} wraps a MotrixVectorEnv, got {type(base).__name__}")
    if output not in (None, base.output) or base.autoreset_mode is not AutoresetMode.SAME_STEP:
        wanted = "" if output is None else f"output={output!r} and "
        raise ValueError(f"{adapter} needs {wanted}autoreset_mode=SAME_STEP, got "
                         f"output={base.output!r} and autoreset_mode={base.autoreset_mode.name}")
    return base


def make_vec(adapter: str, env_id: str, num_envs: int, output: str, kwargs: dict[str, Any]) -> Any:
    """``gym.make_vec`` with the ``output`` and SAME_STEP autoreset an adapter needs; a keyword that
    asks for another is refused before anything is built."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    import motrix_gym  # noqa: F401  (registers the ids)

    needed = {"output": output, "autoreset_mode": AutoresetMode.SAME_STEP}
    for name, value in needed.items():
        given = kwargs.get(name, value)
        if given != value and given != getattr(value, "value", value):
            raise ValueError(f"{adapter} needs {name}={value!r}, got {given!r}")
    return gym.make_vec(env_id, num_envs=num_envs, **{**kwargs, **needed})

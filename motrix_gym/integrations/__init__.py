"""Adapters to learners' own vector-env interfaces (each an optional extra)."""

from __future__ import annotations

from typing import Any


def motrix_base(env: Any, adapter: str, output: str) -> Any:
    """The ``MotrixVectorEnv`` under ``env``, checked to have ``output`` and SAME_STEP autoreset."""
    from gymnasium.vector import AutoresetMode

    from motrix_gym.vector_env import MotrixVectorEnv

    base = env.unwrapped
    if not isinstance(base, MotrixVectorEnv):
        raise TypeError(f"{adapter} wraps a MotrixVectorEnv, got {type(base).__name__}")
    if base.output != output or base.autoreset_mode is not AutoresetMode.SAME_STEP:
        raise ValueError(f"{adapter} needs output={output!r} and autoreset_mode=SAME_STEP")
    return base

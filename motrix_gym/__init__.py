"""motrix-gym: batched MuJoCo robot tasks as native Gymnasium vector environments.

Importing the package registers the ``Motrix/`` ids with Gymnasium and imports neither torch
nor MuJoCo::

    import gymnasium as gym
    import motrix_gym  # noqa: F401

    envs = gym.make_vec("Motrix/G1WalkFlat-v0", num_envs=64)
"""

from motrix_gym.registry import register_all

__version__ = "0.1.0"

register_all()

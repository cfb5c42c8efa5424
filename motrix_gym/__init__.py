"""motrix-gym: batched MuJoCo robot tasks as native Gymnasium vector environments.

Importing the package registers the ``Motrix/`` ids with Gymnasium and imports neither torch
nor MuJoCo::

    import gymnasium as gym
    import motrix_gym  # noqa: F401

    envs = gym.make_vec("Motrix/G1WalkFlat-v0", num_envs=64)
"""

import os

from motrix_gym.registry import register_all

# Off-screen rendering needs an OpenGL backend chosen before MuJoCo is imported. Without a display
# and with MUJOCO_GL unset we pick OSMesa (software rendering, any CPU machine with libosmesa6);
# set MUJOCO_GL=egl yourself to render on a GPU.
if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "osmesa"

__version__ = "0.1.0"

register_all()

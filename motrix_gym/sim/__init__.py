"""Physics: the only package that imports MuJoCo.

Off-screen rendering needs an OpenGL backend chosen before MuJoCo is imported. Without a display
and with ``MUJOCO_GL`` unset, we pick OSMesa (software rendering, works on any CPU machine with
``libosmesa6``); set ``MUJOCO_GL=egl`` yourself to render on a GPU.
"""

import os

if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "osmesa"

"""Off-screen rendering of one lane with ``mujoco.Renderer`` and a camera following the root."""

from __future__ import annotations

import weakref

import mujoco
import numpy as np


class LaneRenderer:
    def __init__(self, model: mujoco.MjModel, width: int = 640, height: int = 480,
                 distance: float = 3.0, azimuth: float = 135.0, elevation: float = -20.0) -> None:
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        try:
            self.renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as e:  # no usable OpenGL backend
            raise RuntimeError(
                f"off-screen rendering failed ({e}). On a machine without a display install OSMesa "
                "(apt-get install libosmesa6) and set MUJOCO_GL=osmesa before importing mujoco, "
                "or MUJOCO_GL=egl on a GPU machine.") from e
        # Close before interpreter teardown: the GL context cannot be freed once modules are gone.
        self._finalizer = weakref.finalize(self, self.renderer.close)
        model.vis.headlight.ambient[:] = 0.35
        model.vis.headlight.diffuse[:] = 0.6
        self.camera = mujoco.MjvCamera()  # a free camera whose target follows the root each frame
        self.camera.distance, self.camera.azimuth, self.camera.elevation = distance, azimuth, elevation
        self.model = model
        self.data = mujoco.MjData(model)

    def render(self, qpos: np.ndarray) -> np.ndarray:
        """(height, width, 3) uint8 RGB frame of the configuration ``qpos``."""
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        self.camera.lookat[:] = self.data.xpos[1]
        self.renderer.update_scene(self.data, camera=self.camera)
        return self.renderer.render()

    def close(self) -> None:
        self._finalizer()


def tile(frames: list[np.ndarray]) -> np.ndarray:
    """Frames of equal size in a near-square grid (row-major, black padding)."""
    n = len(frames)
    cols = int(np.ceil(np.sqrt(n)))
    rows = -(-n // cols)
    h, w, c = frames[0].shape
    grid = np.zeros((rows * h, cols * w, c), dtype=frames[0].dtype)
    for k, f in enumerate(frames):
        r, q = divmod(k, cols)
        grid[r * h:(r + 1) * h, q * w:(q + 1) * w] = f
    return grid

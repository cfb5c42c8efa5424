"""Off-screen rendering of lanes, and the OpenGL backend it runs on.

Nothing but rendering needs OpenGL, so the backend is settled here, the first time a frame is
made, never when MuJoCo is imported or an env is stepped:

- ``MUJOCO_GL``, when the user set it: MuJoCo loaded that backend at import (``mujoco.GLContext``);
- otherwise the first of GLFW (only when a display is set), EGL and OSMesa that makes a frame.
  Each candidate is tried in a fresh interpreter: PyOpenGL binds one platform per process, so a
  backend that failed to load in this one would leave it unable to try the next.

With MUJOCO_GL unset MuJoCo itself imports only GLFW's bindings, which load no OpenGL library.
"""

from __future__ import annotations

import functools
import importlib
import operator
import os
import subprocess
import sys
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from motrix_gym.sim import GL_PACKAGES as PACKAGES
from motrix_gym.sim.engine import mujoco

_OFF = ("disable", "disabled", "off", "false", "0")
Arrow = tuple[np.ndarray, np.ndarray, Sequence[float], float]  # start, end (world, m), rgba, width (m)
Sphere = tuple[np.ndarray, Sequence[float], float]  # centre (world, m), rgba, radius (m)
# Makes one frame in whatever backend MUJOCO_GL names; run in a child interpreter.
_PROBE = """
import mujoco
ctx = mujoco.GLContext(16, 16)
ctx.make_current()
model = mujoco.MjModel.from_xml_string("<mujoco/>")
con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
con.free()
ctx.free()
"""


class RenderingUnavailable(RuntimeError):
    """No OpenGL backend can render off-screen on this machine."""


def candidates() -> tuple[str, ...]:
    """The backends tried, in order, when MUJOCO_GL is unset."""
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    return (("glfw",) if display else ()) + ("egl", "osmesa")


def probe(name: str, env: dict[str, str] | None = None) -> str | None:
    """None when backend ``name`` makes a frame in a child interpreter, else why not (its last
    error line)."""
    child = {**(os.environ if env is None else env), "MUJOCO_GL": name}
    try:
        run = subprocess.run([sys.executable, "-c", _PROBE], env=child, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "timed out"
    if run.returncode == 0:
        return None
    lines = [ln for ln in run.stderr.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit status {run.returncode}"


@functools.cache
def backend() -> str:
    """The backend this process renders with (probed once), or :class:`RenderingUnavailable`
    naming what to install."""
    user = os.environ.get("MUJOCO_GL", "").strip().lower()
    if user in _OFF:
        raise RenderingUnavailable(f"MUJOCO_GL={os.environ['MUJOCO_GL']!r} turns MuJoCo's rendering off; "
                                   "unset it to let motrix-gym pick a backend, or set it to egl, osmesa or glfw")
    if user:
        return user
    reasons = {}
    for name in candidates():
        reasons[name] = probe(name)
        if reasons[name] is None:
            return name
    raise RenderingUnavailable(unavailable_message(reasons))


def unavailable_message(reasons: dict[str, str | None]) -> str:
    tried = "; ".join(f"{name}: {why}" for name, why in reasons.items())
    return ("no OpenGL backend can render off-screen on this machine (tried " + tried + "). "
            f"Install EGL (Debian/Ubuntu: apt-get install {PACKAGES['egl']}; Mesa renders on the CPU, a GPU "
            f"driver's EGL on the GPU) or OSMesa (apt-get install {PACKAGES['osmesa']}), or set MUJOCO_GL to a "
            "backend that works. Stepping, training and benchmarks need no OpenGL.")


def gl_context(width: int, height: int) -> object:
    """A current OpenGL context of the chosen backend."""
    name = backend()
    user = bool(os.environ.get("MUJOCO_GL", "").strip())
    try:
        cls = mujoco.GLContext if user else importlib.import_module(f"mujoco.{name}").GLContext
        ctx = cls(width, height)
        ctx.make_current()
    except Exception as e:  # a backend MuJoCo could not load, or a context it could not create
        hint = PACKAGES.get(name, "")
        raise RenderingUnavailable(f"OpenGL backend {name!r} cannot render: {e}"
                                   + (f" (Debian/Ubuntu: apt-get install {hint})" if hint else "")) from e
    return ctx


NEAR = 0.05  # the near clip plane's distance, as a fraction of the camera's
FOG = (4.5, 18.0)  # m from the camera where fog starts and where it hides the ground entirely


def set_visuals(model: mujoco.MjModel, distance: float) -> None:
    """Light, clip planes and fog of ``model`` for a camera ``distance`` m from the robot."""
    model.vis.headlight.ambient[:] = 0.35
    model.vis.headlight.diffuse[:] = 0.6
    # MuJoCo places the clip planes at multiples of the model's extent, which a terrain of many
    # tiles makes 100 m or more: the near plane would then lie beyond a close camera and cut the
    # robot and the ground in front of it. Keep it a small fraction of the camera distance.
    model.vis.map.znear = min(model.vis.map.znear, NEAR * distance / model.stat.extent)
    # MuJoCo measures fog in extents as well; in metres it looks the same on every terrain.
    model.vis.map.fogstart, model.vis.map.fogend = (d / model.stat.extent for d in FOG)


class LaneRenderer:
    """RGB frames of one model's configurations, from a free camera that follows body ``follow``
    (the robot's root), looking at the point ``lookat_height`` m above its origin."""

    def __init__(self, model: mujoco.MjModel, width: int = 640, height: int = 480,
                 distance: float = 3.0, azimuth: float = 135.0, elevation: float = -20.0, follow: int = 1,
                 lookat_height: float = 0.0) -> None:
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        set_visuals(model, distance)
        self.context = ctx = gl_context(width, height)
        self.mjr = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.mjr)
        # Free the GL objects before the context, and both before interpreter teardown.
        self._finalizer = weakref.finalize(self, _free, self.mjr, ctx)
        # Not at interpreter exit: the GL platform may have shut down by then (EGL's display is
        # gone, and freeing raised), and the process's exit frees the context anyway.
        self._finalizer.atexit = False
        self.scene = mujoco.MjvScene(model, maxgeom=10_000)
        self.scene.flags[mujoco.mjtRndFlag.mjRND_FOG] = True
        self.option = mujoco.MjvOption()
        self.rect = mujoco.MjrRect(0, 0, width, height)
        self.camera = mujoco.MjvCamera()
        self.camera.distance, self.camera.azimuth, self.camera.elevation = distance, azimuth, elevation
        self.model, self.follow, self.lookat_height = model, follow, lookat_height
        self.data = mujoco.MjData(model)
        self.pieces = GroundPieces(model, width / height)
        self._pixels = np.empty((height, width, 3), np.uint8)
        # A new context's first frame differs from later frames of the same state in a few pixels:
        # drawn once here, every frame is a function of its state alone.
        self.render(model.qpos0)

    def render(self, qpos: np.ndarray, arrows: Sequence[Arrow] = (), spheres: Sequence[Sphere] = ()) -> np.ndarray:
        """(height, width, 3) uint8 RGB frame of the configuration ``qpos``, with ``arrows`` and
        ``spheres`` (world frame) drawn over the scene."""
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        self.camera.lookat[:] = self.data.xpos[self.follow]
        self.camera.lookat[2] += self.lookat_height
        self.context.make_current()
        if self.scene.flags[mujoco.mjtRndFlag.mjRND_FOG]:
            mujoco.mjv_updateCamera(self.model, self.data, self.camera, self.scene)
            self.pieces.show_near((self.scene.camera[0].pos + self.scene.camera[1].pos) / 2)
        mujoco.mjv_updateScene(self.model, self.data, self.option, None, self.camera,
                               mujoco.mjtCatBit.mjCAT_ALL, self.scene)
        add_markers(self.scene, arrows, spheres)
        mujoco.mjr_render(self.rect, self.scene, self.mjr)
        mujoco.mjr_readPixels(self._pixels, None, self.rect, self.mjr)
        return np.flipud(self._pixels).copy()  # OpenGL's rows run bottom to top

    def close(self) -> None:
        self._finalizer()


class GroundPieces:
    """The pieces a heightfield is drawn as (``scene.add_ground_pieces``), of which a frame with
    fog draws only those the fog does not hide entirely. Fog grows with the depth along the view
    axis, so a piece is drawn while its nearest point is within the distance at which a point in a
    corner of the view lies at the depth where the fog ends."""

    def __init__(self, model: mujoco.MjModel, aspect: float) -> None:
        from motrix_gym.sim.scene import ground_pieces

        self.model, self.geoms = model, ground_pieces(model)
        self.centres = model.geom_pos[self.geoms, :2].copy()
        self.halves = model.hfield_size[model.geom_dataid[self.geoms], :2].copy()
        # a point where the fog ends, in the corner of the view, is this far from the camera
        tan = np.tan(np.radians(model.vis.global_.fovy) / 2)
        fog_end = model.vis.map.fogend * model.stat.extent
        self.reach = fog_end * float(np.sqrt(1.0 + tan**2 * (1.0 + aspect**2)))

    def show_near(self, camera: np.ndarray) -> None:
        """Draw the pieces within reach of ``camera`` (a position), hide the others (alpha 0)."""
        if len(self.geoms):
            apart = np.linalg.norm(np.maximum(np.abs(self.centres - camera[:2]) - self.halves, 0.0), axis=1)
            self.model.geom_rgba[self.geoms, 3] = apart <= self.reach


def add_markers(scene: mujoco.MjvScene, arrows: Sequence[Arrow] = (), spheres: Sequence[Sphere] = ()) -> None:
    """Append ``arrows`` and ``spheres`` (world frame) to ``scene`` as decorations, after its geoms."""
    for start, end, rgba, width in arrows:
        if np.linalg.norm(end - start) > 1e-3:  # an arrow of no length has no direction
            mujoco.mjv_connector(_new_geom(scene, rgba), mujoco.mjtGeom.mjGEOM_ARROW, width, start, end)
    for pos, rgba, radius in spheres:
        _new_geom(scene, rgba, pos, radius)


def _new_geom(scene: mujoco.MjvScene, rgba: Sequence[float], pos: np.ndarray | None = None,
              radius: float = 0.0) -> mujoco.MjvGeom:
    """A new decoration sphere at the end of ``scene`` (``mjv_connector`` turns it into an arrow)."""
    if scene.ngeom >= scene.maxgeom:
        raise RuntimeError(f"the scene holds at most {scene.maxgeom} geoms, markers included")
    g = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(g, mujoco.mjtGeom.mjGEOM_SPHERE, np.full(3, radius), np.zeros(3) if pos is None else pos,
                        np.eye(3).ravel(), np.asarray(rgba, np.float32))
    g.category = mujoco.mjtCatBit.mjCAT_DECOR
    scene.ngeom += 1
    return g


def _free(mjr: mujoco.MjrContext, ctx: object) -> None:
    ctx.make_current()
    mjr.free()
    ctx.free()


class LaneFrames(Sequence):
    """One frame per lane, as Gymnasium's ``VectorEnv.render`` returns them, each drawn by
    ``draw(i)`` when it is read: a caller that reads lane 0 of thousands pays for one frame, and
    one that reads them all (``np.asarray``) for every lane, as a vector of separate envs would.
    Each read draws the lane again."""

    def __init__(self, n: int, draw: Callable[[int], np.ndarray]) -> None:
        self._n, self._draw = n, draw

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(i, slice):
            return [self._draw(k) for k in range(*i.indices(self._n))]
        try:
            k = operator.index(i)
        except TypeError:
            raise TypeError(f"lanes are indexed by an int or a slice, got {i!r}") from None
        if not -self._n <= k < self._n:
            raise IndexError(f"lane {k} out of range for {self._n} lanes")
        return self._draw(k % self._n)

    def __repr__(self) -> str:
        return f"LaneFrames({self._n} lanes)"


def tile(frames: Sequence[np.ndarray]) -> np.ndarray:
    """Frames of equal size in a near-square grid (row-major, black padding)."""
    frames = list(frames)  # each frame of a LaneFrames read once
    n = len(frames)
    cols = int(np.ceil(np.sqrt(n)))
    rows = -(-n // cols)
    h, w, c = frames[0].shape
    grid = np.zeros((rows * h, cols * w, c), dtype=frames[0].dtype)
    for k, f in enumerate(frames):
        r, q = divmod(k, cols)
        grid[r * h:(r + 1) * h, q * w:(q + 1) * w] = f
    return grid

"""A live window on one lane: MuJoCo's own viewer (``mujoco.viewer``), driven passively.

The viewer draws a mirror of a lane (its configuration, with the commands' markers in the
viewer's user scene); it never steps physics of its own, so its own reset and pause keys change
nothing of the env. Keys pressed in the window are queued for the caller (``pressed``), and a
body dragged with the mouse (MuJoCo's perturbation: double-click it, then Ctrl and the right
button to pull it, the left to turn it) gives the forces ``forces`` asks the lane to feel. The
window needs a display (an X server, Xvfb included) and GLFW; nothing else in the package
opens one.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
import warnings
from collections.abc import Sequence

import glfw
import numpy as np

from motrix_gym.sim.engine import mujoco
from motrix_gym.sim.render import Arrow, Sphere, add_markers, set_visuals

# The keys ``pressed`` reports, by GLFW key code; the viewer acts on every key itself as well
# (its letters toggle what it draws), which for these changes nothing of the env.
_KEYS = {glfw.KEY_UP: "up", glfw.KEY_DOWN: "down", glfw.KEY_LEFT: "left", glfw.KEY_RIGHT: "right",
         glfw.KEY_PAGE_UP: "page_up", glfw.KEY_PAGE_DOWN: "page_down", glfw.KEY_SPACE: "space",
         glfw.KEY_BACKSPACE: "backspace", glfw.KEY_DELETE: "delete", glfw.KEY_MINUS: "minus",
         glfw.KEY_EQUAL: "equal", glfw.KEY_COMMA: "comma", glfw.KEY_PERIOD: "period"}
_WAIT_CLOSED_S = 10.0  # how long close() waits for the viewer's thread to destroy its window


class DisplayUnavailable(RuntimeError):
    """No display to open a window on."""


def check_display() -> None:
    """Return when GLFW can open windows on this machine's display, else raise
    :class:`DisplayUnavailable` saying why and what to do instead."""
    name = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not name:
        raise DisplayUnavailable(
            "a window needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set. On a machine without "
            "a screen, run under a virtual one (Debian/Ubuntu: apt-get install xvfb, then xvfb-run -a "
            "python ...), or record frames instead (render_mode='rgb_array', play --out FILE)")
    with warnings.catch_warnings(record=True) as caught:  # GLFW reports its errors as warnings
        warnings.simplefilter("always")
        ok = glfw.init()
    if not ok:
        # pyGLFW words its errors "(code) b'description'"
        why = "; ".join(re.sub(r"^\(\d+\) b['\"](.*)['\"]$", r"\1", str(w.message)) for w in caught)
        why = why or "glfw.init() failed"
        raise DisplayUnavailable(f"GLFW cannot open windows on display {name!r}: {why}")


class LaneViewer:
    """MuJoCo's viewer window on ``model``, its camera tracking body ``follow`` (the centre of
    mass of it and its children) from ``distance`` m, ``azimuth`` and ``elevation`` degrees, as the
    viewer's own tracking camera does: the mouse turns and zooms it, Escape frees it (then the
    mouse also pans), a double-click with Ctrl tracks another body. ``show`` draws a configuration
    at most once per ``period`` seconds of wall time, so that a loop calling it runs at most in real
    time."""

    def __init__(self, model: mujoco.MjModel, period: float, follow: int = 1, distance: float = 3.0,
                 azimuth: float = 135.0, elevation: float = -20.0) -> None:
        import mujoco.viewer

        check_display()
        set_visuals(model, distance)
        self.model, self.data = model, mujoco.MjData(model)
        self.period = period
        self._keys: queue.SimpleQueue[int] = queue.SimpleQueue()
        before = set(threading.enumerate())
        self.handle = mujoco.viewer.launch_passive(model, self.data, key_callback=self._keys.put,
                                                   show_left_ui=False, show_right_ui=False)
        # The window lives on a daemon thread the viewer starts; close() waits for it, as a
        # process that exits while it tears the window down can crash in GLFW.
        self._threads = [t for t in threading.enumerate() if t not in before]
        with self.handle.lock():
            cam = self.handle.cam
            cam.type, cam.trackbodyid = mujoco.mjtCamera.mjCAMERA_TRACKING, follow
            cam.distance, cam.azimuth, cam.elevation = distance, azimuth, elevation
        self._due = -float("inf")  # when the next frame is to be drawn (perf_counter)

    @property
    def running(self) -> bool:
        """False once the window was closed (by the user, or ``close``)."""
        return self.handle.is_running()

    def show(self, qpos: np.ndarray, arrows: Sequence[Arrow] = (), spheres: Sequence[Sphere] = (),
             pace: bool = True, qvel: np.ndarray | None = None, ctrl: np.ndarray | None = None) -> None:
        """Draw the configuration ``qpos`` with ``arrows`` and ``spheres`` (world frame): with
        ``pace``, once the ``period`` that began with the last paced frame is over; else now.
        ``qvel`` and ``ctrl`` (default: at rest, no controls) complete the state whose forward
        pass gives what the viewer's toggles show (contact points and forces, ...) and what a
        drag's pull is damped by."""
        if pace:
            now = time.perf_counter()
            if now < self._due:
                time.sleep(self._due - now)
            # a frame each period, whatever drawing it takes; a caller that falls behind starts afresh
            self._due = max(now, self._due) + self.period
        m, d = self.model, self.data
        with self.handle.lock():
            d.qpos[:] = qpos
            d.qvel[:] = 0.0 if qvel is None else qvel
            d.ctrl[:] = 0.0 if ctrl is None else ctrl
            # frames and centres of mass (a tracking camera looks at them), contacts and their
            # forces, the factored mass matrix and body velocities (a drag's mass and damping)
            mujoco.mj_forward(m, d)
            scene = self.handle.user_scn
            scene.ngeom = 0
            add_markers(scene, arrows, spheres)
        self.handle.sync()

    def forces(self) -> np.ndarray | None:
        """The forces and torques ``(nbody, 6)`` on the bodies of the configuration last shown
        while the user drags one with the mouse (MuJoCo's ``mjv_applyPerturbForce``: a spring
        with critical damping towards where the mouse holds it); None when nothing is dragged."""
        with self.handle.lock():
            pert = self.handle.perturb
            if not (pert.active | pert.active2) or not 0 < pert.select < self.model.nbody:
                return None
            self.data.xfrc_applied[:] = 0.0
            mujoco.mjv_applyPerturbForce(self.model, self.data, pert)
            return self.data.xfrc_applied.copy()

    def end_drag(self) -> None:
        """End the drag under way, as releasing the mouse button does: ``forces`` is None until
        the user starts another."""
        with self.handle.lock():
            self.handle.perturb.active = self.handle.perturb.active2 = 0

    def pressed(self) -> list[str]:
        """The keys of ``_KEYS`` pressed in the window since the last call, in order, by name:
        ``up``, ``down``, ``left``, ``right``, ``page_up``, ``page_down``, ``space``, ``backspace``,
        ``delete``, ``minus``, ``equal``, ``comma``, ``period``."""
        keys = []
        while True:
            try:
                code = self._keys.get_nowait()
            except queue.Empty:
                return keys
            if code in _KEYS:
                keys.append(_KEYS[code])

    def close(self) -> None:
        """Close the window and wait until the viewer's thread has destroyed it."""
        self.handle.close()
        for t in self._threads:
            t.join(_WAIT_CLOSED_S)

"""Steering a velocity command (vx, vy, yaw rate) from the keys pressed in a viewer's window
(``sim.viewer.LaneViewer.pressed``): ``play --viewer`` and ``examples/deploy_mujoco.py --viewer``."""

from __future__ import annotations

from collections.abc import Sequence

STEP = 0.1  # m/s or rad/s a key press adds to the command
# key -> (component of (vx, vy, yaw rate), sign): forward, sideways to the left, turning left
KEYS = {"up": (0, 1), "down": (0, -1), "page_up": (1, 1), "page_down": (1, -1), "left": (2, 1), "right": (2, -1)}
HELP = (f"up/down: forward/backward, page up/down: sideways left/right, left/right: turn (each press {STEP} m/s "
        "or rad/s, within the task's ranges), delete: stand still")


def steer(command: Sequence[float], key: str,
          ranges: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """``command`` after ``key``: one component moved by ``STEP`` and kept within its (lo, hi) of
    ``ranges``, or zero for ``delete``; None for a key that does not steer."""
    if key == "delete":
        return (0.0, 0.0, 0.0)
    if key not in KEYS:
        return None
    i, sign = KEYS[key]
    lo, hi = ranges[i]
    value = list(command)
    value[i] = min(max(round(value[i] + sign * STEP, 6), lo), hi)  # rounded: ten presses make 1.0 exactly
    return tuple(value)


def describe(command: Sequence[float]) -> str:
    """The line that tells a person steering what the command is now."""
    vx, vy, wz = command
    return f"command: vx {vx:+.2f} m/s, vy {vy:+.2f} m/s, yaw rate {wz:+.2f} rad/s"

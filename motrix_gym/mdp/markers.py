"""What terms draw into rendered frames: per-lane arrows and spheres in the world frame.

A command term with a ``markers(env)`` method returns these, as does an observation function
marked with ``manager.terms.draws``; the env hands the rendered lanes' rows to the renderer
(``sim/render.py``), which draws them over the scene. Only rendering calls them, so they cost
nothing in training.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

RGBA = tuple[float, float, float, float]
COMMAND = (0.1, 0.8, 0.1, 1.0)  # green: what the command asks
MEASURED = (0.1, 0.3, 0.9, 1.0)  # blue: what the robot does
REFERENCE = (1.0, 0.55, 0.0, 0.6)  # orange: a motion's reference
SENSED = (0.9, 0.1, 0.1, 1.0)  # red: where the robot senses its surroundings


@dataclass(frozen=True)
class Arrows:
    start: Tensor  # (lanes, k, 3)
    end: Tensor  # (lanes, k, 3)
    rgba: RGBA
    width: float = 0.02


@dataclass(frozen=True)
class Spheres:
    pos: Tensor  # (lanes, k, 3)
    rgba: RGBA
    radius: float = 0.04

"""Rollout frames written as a GIF or an MP4 (``render``, ``play``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

VIDEO_SUFFIXES = (".gif", ".mp4")


def check_writer(suffix: str) -> None:
    """Raise ``sim.backend.MissingExtra`` where a ``suffix`` file needs a package that is not
    installed, so that a rollout or a training run is refused before it starts, not lost at its end."""
    if suffix == ".mp4":
        try:
            import moviepy  # noqa: F401
        except ImportError:
            from motrix_gym.sim.backend import MissingExtra

            raise MissingExtra('writing an .mp4 needs moviepy: pip install -e ".[video]"') from None


def write_video(frames: list[np.ndarray], out: Path, fps: float) -> Path:
    """``frames`` (H, W, 3 uint8) to ``out``: a looping GIF (Pillow), or an MP4 (moviepy)."""
    if out.suffix == ".gif":
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        images[0].save(out, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
    else:
        from moviepy import ImageSequenceClip

        ImageSequenceClip(frames, fps=fps).write_videofile(str(out), logger=None)
    return out

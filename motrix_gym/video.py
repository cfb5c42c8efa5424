"""Rollout frames written as a GIF or an MP4 (``render``, ``play``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

VIDEO_SUFFIXES = (".gif", ".mp4")


def check_video_out(out: str | Path, suffixes: tuple[str, ...] = VIDEO_SUFFIXES) -> Path:
    """``out`` as a path, checked before any frame is made: a video suffix, an existing folder."""
    path = Path(out)
    if path.suffix not in suffixes:
        raise ValueError(f"{str(out)!r} does not end in one of {suffixes}")
    if not path.parent.is_dir():
        raise ValueError(f"{str(out)!r}: folder {str(path.parent)!r} does not exist")
    return path


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

"""Load clips (a file, a list, or a folder) into one corpus mapped onto a robot.

    corpus = load_corpus(["dance.npz", "kick.npz"], joint_names, body_names, fps=50)

Each clip is validated, resampled to the control rate ``fps`` if it differs (linear for vectors,
slerp for quaternions; ``resample=False`` makes a mismatch an error), and its joints and bodies
are picked by name in the robot's order; a missing name is an error naming the clip.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from motrix_gym.motion.clip import MotionClip, MotionFormatError


def slerp(q0: np.ndarray, q1: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spherical interpolation of unit quaternions (..., 4) with weights (..., 1)."""
    dot = (q0 * q1).sum(-1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)
    dot = np.abs(dot).clip(max=1.0)
    theta = np.arccos(dot)
    s = np.sin(theta)
    small = s < 1e-6
    a = np.where(small, 1.0 - w, np.sin((1.0 - w) * theta) / np.where(small, 1.0, s))
    b = np.where(small, w, np.sin(w * theta) / np.where(small, 1.0, s))
    q = a * q0 + b * q1
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def resample(clip: MotionClip, fps: float) -> MotionClip:
    """The clip at ``fps`` over the same duration (frames at k / fps)."""
    times = np.arange(int(np.floor(clip.duration * fps + 1e-9)) + 1) / fps
    src = times * clip.fps
    i0 = np.minimum(np.floor(src).astype(int), clip.num_frames - 2)
    w = (src - i0)[:, None]
    lerp = lambda a: a[i0] * (1 - w.reshape(-1, *([1] * (a.ndim - 1)))) + a[i0 + 1] * w.reshape(
        -1, *([1] * (a.ndim - 1)))
    return clip.replace(
        fps=fps, joint_pos=lerp(clip.joint_pos), joint_vel=lerp(clip.joint_vel),
        body_pos_w=lerp(clip.body_pos_w), body_lin_vel_w=lerp(clip.body_lin_vel_w),
        body_ang_vel_w=lerp(clip.body_ang_vel_w),
        body_quat_w=slerp(clip.body_quat_w[i0], clip.body_quat_w[i0 + 1], w[:, None]),
    ).validate()


@dataclass(frozen=True)
class MotionCorpus:
    """Clips concatenated along time, joints and bodies in the robot's order (float32 tensors)."""

    names: tuple[str, ...]
    fps: float
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    joint_pos: Tensor  # (F, J)
    joint_vel: Tensor
    body_pos_w: Tensor  # (F, B, 3)
    body_quat_w: Tensor  # (F, B, 4)
    body_lin_vel_w: Tensor
    body_ang_vel_w: Tensor
    clip_start: Tensor  # (C,) first frame of each clip
    clip_length: Tensor  # (C,) frames
    clip_of_frame: Tensor  # (F,)

    @property
    def num_frames(self) -> int:
        return self.joint_pos.shape[0]

    def to(self, device: torch.device | str) -> MotionCorpus:
        """The corpus with its tensors on ``device``."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), Tensor)})


def _paths(sources: str | Path | list[str | Path]) -> list[Path]:
    items = [sources] if isinstance(sources, (str, Path)) else list(sources)
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.glob("*.npz"))
            if not found:
                raise MotionFormatError(f"motion folder {str(p)!r} holds no .npz clip")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise MotionFormatError(f"motion source {str(p)!r} does not exist")
    return out


def load_corpus(sources: str | Path | list[str | Path] | list[MotionClip], joint_names: tuple[str, ...],
                body_names: tuple[str, ...], fps: float, resample_fps: bool = True) -> MotionCorpus:
    clips = [s if isinstance(s, MotionClip) else MotionClip.load(s) for s in (
        sources if isinstance(sources, list) and sources and isinstance(sources[0], MotionClip)
        else _paths(sources))]  # type: ignore[arg-type]
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w",
                                                          "body_lin_vel_w", "body_ang_vel_w")}
    lengths = []
    for clip in clips:
        clip.validate()
        if abs(clip.fps - fps) > 1e-6:
            if not resample_fps:
                raise MotionFormatError(f"motion clip {clip.name!r}: {clip.fps} fps, the task runs at {fps}")
            clip = resample(clip, fps)
        j, b = clip.indices("joint", joint_names), clip.indices("body", body_names)
        for k in parts:
            parts[k].append(getattr(clip, k)[:, j if k.startswith("joint") else b])
        lengths.append(clip.num_frames)
    length = torch.tensor(lengths, dtype=torch.long)
    start = torch.cumsum(length, 0) - length
    t = {k: torch.from_numpy(np.concatenate(v)).float() for k, v in parts.items()}
    return MotionCorpus(names=tuple(c.name for c in clips), fps=fps, joint_names=tuple(joint_names),
                        body_names=tuple(body_names), clip_start=start, clip_length=length,
                        clip_of_frame=torch.repeat_interleave(torch.arange(len(clips)), length), **t)

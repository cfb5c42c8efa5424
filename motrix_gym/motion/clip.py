"""The motion clip schema (see docs/motion-format.md).

A clip is a time series at ``fps`` frames per second of joint positions/velocities (T, J) by
joint name and of world-frame body poses and velocities (T, B, .) by body name. Quaternions are
(w, x, y, z). Stored as one ``.npz`` with these keys plus ``schema_version``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

SCHEMA_VERSION = 1
ARRAYS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


class MotionFormatError(ValueError):
    """A clip that does not follow the schema; the message names the clip and the field."""


@dataclass(frozen=True)
class MotionClip:
    name: str
    fps: float
    joint_names: tuple[str, ...]
    joint_pos: np.ndarray  # (T, J) rad or m
    joint_vel: np.ndarray  # (T, J)
    body_names: tuple[str, ...]
    body_pos_w: np.ndarray  # (T, B, 3)
    body_quat_w: np.ndarray  # (T, B, 4) w, x, y, z
    body_lin_vel_w: np.ndarray  # (T, B, 3)
    body_ang_vel_w: np.ndarray  # (T, B, 3)

    @property
    def num_frames(self) -> int:
        return self.joint_pos.shape[0]

    @property
    def duration(self) -> float:
        return (self.num_frames - 1) / self.fps

    def validate(self) -> MotionClip:
        """Check shapes, finiteness and unit quaternions; return self."""
        where = f"motion clip {self.name!r}"
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise MotionFormatError(f"{where}: fps must be positive, got {self.fps}")
        T, J, B = self.num_frames, len(self.joint_names), len(self.body_names)
        if T < 2:
            raise MotionFormatError(f"{where}: needs at least 2 frames, has {T}")
        want = {"joint_pos": (T, J), "joint_vel": (T, J), "body_pos_w": (T, B, 3), "body_quat_w": (T, B, 4),
                "body_lin_vel_w": (T, B, 3), "body_ang_vel_w": (T, B, 3)}
        for key, shape in want.items():
            arr = getattr(self, key)
            if arr.shape != shape:
                raise MotionFormatError(f"{where}: {key} has shape {arr.shape}, expected {shape}")
            bad = ~np.isfinite(arr)
            if bad.any():
                t = int(np.argwhere(bad)[0][0])
                raise MotionFormatError(f"{where}: {key} has NaN or Inf (first at frame {t})")
        for kind, names in (("joint", self.joint_names), ("body", self.body_names)):
            if len(set(names)) != len(names):
                raise MotionFormatError(f"{where}: duplicate {kind} names")
        norm = np.linalg.norm(self.body_quat_w, axis=-1)
        off = np.abs(norm - 1.0)
        if off.max() > 1e-3:
            t, b = np.unravel_index(int(off.argmax()), off.shape)
            raise MotionFormatError(f"{where}: body_quat_w of {self.body_names[b]!r} at frame {t} is not a unit "
                                    f"quaternion (norm {norm[t, b]:.4f})")
        return self

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, schema_version=SCHEMA_VERSION, name=self.name, fps=self.fps,
                            joint_names=np.array(self.joint_names), body_names=np.array(self.body_names),
                            **{k: getattr(self, k).astype(np.float32) for k in ARRAYS})

    @classmethod
    def load(cls, path: str | Path) -> MotionClip:
        path = Path(path)
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("schema_version", "fps", "joint_names", "body_names", *ARRAYS) if k not in z]
            if missing:
                raise MotionFormatError(f"motion clip {path.name!r}: missing field(s) {missing}")
            version = int(z["schema_version"])
            if version != SCHEMA_VERSION:
                raise MotionFormatError(f"motion clip {path.name!r}: schema_version {version}, "
                                        f"this motrix-gym reads {SCHEMA_VERSION}")
            clip = cls(name=str(z["name"]) if "name" in z else path.stem, fps=float(z["fps"]),
                       joint_names=tuple(str(n) for n in z["joint_names"]),
                       body_names=tuple(str(n) for n in z["body_names"]),
                       **{k: np.asarray(z[k], dtype=np.float64) for k in ARRAYS})
        return clip.validate()

    def indices(self, kind: str, names: tuple[str, ...] | list[str], of: str = "the robot") -> list[int]:
        """Positions of the joints (``kind="joint"``) or bodies named ``names`` in this clip;
        missing names are an error naming them and ``of`` (what needs them)."""
        have = self.joint_names if kind == "joint" else self.body_names
        missing = [n for n in names if n not in have]
        if missing:
            raise MotionFormatError(f"motion clip {self.name!r}: no {kind}(s) {missing} of {of}")
        return [have.index(n) for n in names]

    def replace(self, **changes: object) -> MotionClip:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return MotionClip(**values)  # type: ignore[arg-type]

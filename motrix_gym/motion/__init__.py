"""Motion clips: the schema (``clip.py``), loading into a corpus (``loader.py``), converters from
public formats (``convert.py``) and clip synthesis (``synth.py``)."""

from motrix_gym.motion.clip import SCHEMA_VERSION, MotionClip, MotionFormatError

__all__ = ["SCHEMA_VERSION", "MotionClip", "MotionFormatError"]

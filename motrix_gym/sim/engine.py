"""MuJoCo, imported once for the sim package, with a clear error when the OpenGL backend that
``MUJOCO_GL`` names does not load (MuJoCo loads it at import, so then nothing works)."""

import os

from motrix_gym.sim import GL_PACKAGES

try:
    import mujoco
    from mujoco import batch
except (AttributeError, ImportError) as e:
    if not os.environ.get("MUJOCO_GL"):
        raise
    _gl = os.environ["MUJOCO_GL"]
    _hint = GL_PACKAGES.get(_gl.strip().lower())
    raise ImportError(f"importing mujoco failed with MUJOCO_GL={_gl!r}: {e!r}. That OpenGL backend does not "
                      "load on this machine" + (f" (Debian/Ubuntu: apt-get install {_hint})" if _hint else "")
                      + ". Unset MUJOCO_GL: motrix-gym needs OpenGL only to render, and then picks a backend "
                      "that works itself.") from e

__all__ = ["batch", "mujoco"]

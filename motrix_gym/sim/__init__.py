"""Physics and rendering: the only package that imports MuJoCo."""

import os

# Debian/Ubuntu packages that provide each OpenGL backend MuJoCo renders with.
GL_PACKAGES = {
    "egl": "libegl1 libegl-mesa0 libgl1-mesa-dri",
    "osmesa": "libosmesa6",
    "glfw": "libglfw3 and a display",
}

try:
    import mujoco  # noqa: F401
except (AttributeError, ImportError) as e:  # MuJoCo loads the MUJOCO_GL backend at import
    if not os.environ.get("MUJOCO_GL"):
        raise
    _gl = os.environ["MUJOCO_GL"]
    _hint = GL_PACKAGES.get(_gl.strip().lower())
    raise ImportError(f"importing mujoco failed with MUJOCO_GL={_gl!r}: {e!r}. That OpenGL backend does not "
                      "load on this machine" + (f" (Debian/Ubuntu: apt-get install {_hint})" if _hint else "")
                      + ". Unset MUJOCO_GL: motrix-gym needs OpenGL only to render, and then picks a backend "
                      "that works itself.") from e

"""Physics and rendering: the only package that imports MuJoCo (through ``engine``).

Importing the package itself loads nothing: ``backend`` (the interface the runtime sees) is
free of MuJoCo.
"""

# Debian/Ubuntu packages that provide each OpenGL backend MuJoCo renders with.
GL_PACKAGES = {
    "egl": "libegl1 libegl-mesa0 libgl1-mesa-dri",
    "osmesa": "libosmesa6",
    "glfw": "libglfw3 and a display",
}

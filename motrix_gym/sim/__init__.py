"""Physics: the only package that imports MuJoCo (rendering's OpenGL backend is chosen in
``motrix_gym/__init__.py``, before MuJoCo can be imported)."""

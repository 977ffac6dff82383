"""irfuse's version (`irfuse.__version__`, `irfuse --version`), the one place it is written:
pyproject.toml reads it from here (`[tool.setuptools.dynamic]`). A constant, not the installed
distribution's metadata: reading that imported `importlib.metadata` (and `email`), 0.1 s of
every command's start."""

__version__ = "0.1.0"

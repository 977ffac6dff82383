"""The installed irfuse's version (`irfuse.__version__`, `irfuse --version`)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("irfuse")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

"""xDSL plugin entry point: makes irfuse's dialects, passes and targets visible to `xdsl-opt`."""

from xdsl.universe import Universe

from irfuse.passes.registry import pass_factories


def _kas():
    from irfuse.dialects.kas import Kas
    return Kas


def _fuse():
    from irfuse.dialects.fuse import Fuse
    return Fuse


def _cuda_target():
    from irfuse.backend.cuda_target import CudaTarget
    return CudaTarget


IRFUSE_UNIVERSE = Universe(
    all_dialects={"kas": _kas, "fuse": _fuse},
    all_passes=pass_factories(),
    all_targets={"cuda": _cuda_target},
)

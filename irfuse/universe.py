"""xDSL plugin entry point: makes irfuse's dialects, passes and targets visible to `xdsl-opt`."""

from xdsl.universe import Universe

import irfuse.driver.library  # noqa: F401 -- installs the op library and the implementation checker
from irfuse.backend.cpu_target import CpuLoopTarget
from irfuse.backend.cuda_target import CudaTarget
from irfuse.backend.rows_target import TangentRowsTarget
from irfuse.dialects.fuse import Fuse
from irfuse.dialects.kas import Kas
from irfuse.passes.registry import pass_classes

IRFUSE_UNIVERSE = Universe(
    all_dialects={"kas": lambda: Kas, "fuse": lambda: Fuse},
    all_passes={name: (lambda cls=cls: cls) for name, cls in pass_classes().items()},
    all_targets={"cuda": lambda: CudaTarget, "cpu": lambda: CpuLoopTarget, "tangent-rows": lambda: TangentRowsTarget},
)

import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# JAX takes three quarters of a GPU's memory on its first use unless told otherwise: with
# several test processes on one GPU, the others would run out of memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")))
# The long runs (`IRFUSE_FUZZ_LONG=1`): more seeds, orders and plans than the default run takes.
LONG = os.environ.get("IRFUSE_FUZZ_LONG") == "1"


def pytest_collection_modifyitems(config, items):
    """The tests marked `heavy` first, the rest in their order: worksteal hands each worker a
    contiguous part of the list and the idle one takes the end of the other's queue, so a long
    test left near the end holds one core while the other has nothing left (the longest take
    a tenth of the suite's time on CI's two cores); started first, they run beside the short
    ones."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Compile caches of a test run live in a fresh directory, one for all the run's
    xdist workers (the cache's locks and atomic writes are made for sharing): a library one
    worker built is not built again by the other."""
    old = os.environ.get("IRFUSE_CACHE_DIR")
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = root / "irfuse-cache"
    cache.mkdir(exist_ok=True)
    os.environ["IRFUSE_CACHE_DIR"] = str(cache)
    yield
    if old is None:
        os.environ.pop("IRFUSE_CACHE_DIR", None)
    else:
        os.environ["IRFUSE_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _default_library_untouched():
    """A test that leaves ops or implementations in the process's default library fails: every
    later test of its process (an xdist worker's hundreds) would compile against them. A generic
    op's instance (`mmul_m4x3_m3x3`) and an op's derivative (`jvp_1__det_3x3`) are defined on
    first use, the same from their names in every process, and are not counted."""
    from irfuse.library.catalogue import default_library, generated_name

    def contents(lib):
        return ({name: op.signature() for name, op in lib.ops.items() if not generated_name(name)},
                {name: [i.name for i in impls] for name, impls in lib.hand_implementations.items()})

    before = contents(default_library())
    yield
    assert contents(default_library()) == before, "the test changed the default op library"


@pytest.fixture
def emulated_gpu(monkeypatch):
    """Host libraries built as each kernel's CPU twin (`IRFUSE_CPU_RENDERER=emulate`): the
    generated CUDA run block by block, barriers and poisoned shared memory included, as tests
    of the GPU code need (the default CPU rendering runs kernels as loops over elements)."""
    monkeypatch.setenv("IRFUSE_CPU_RENDERER", "emulate")


def recorded(monkeypatch, owner, name: str) -> list:
    """What each call of method `name` of class `owner` returns from now on, in call order
    (the method still runs): how a test counts a path's runs."""
    results, method = [], getattr(owner, name)

    def spy(*args, **named):
        results.append(method(*args, **named))
        return results[-1]
    monkeypatch.setattr(owner, name, spy)
    return results


def copy_past_a_boundary(a, offset: int):
    """A C-contiguous copy of the NumPy array `a` whose data starts `offset` bytes past a 64-byte
    boundary: a view into a larger buffer, as a view of another's array may lie."""
    import numpy as np

    raw = np.empty(a.nbytes + 64 + offset, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def highorder_operators():
    """`examples/highorder/operators.py`: the bake-off's element operators at any order."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("operators", os.path.join(ROOT, "examples", "highorder",
                                                                            "operators.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def has_gpu() -> bool:
    try:
        from irfuse.runtime.cuda_device import gpu_available

        return gpu_available()
    except Exception:
        return False


requires_gpu = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU with pycuda")


def gpu_count() -> int:
    """How many GPUs CuPy sees (0 without CuPy or a driver)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def check_top_plans_on_cpu(path: str, top: int, dtype: str, n: int, seed: int = 0, nvrtc: bool = False,
                           **budget) -> int:
    """Runs plan 0..top-1 of the search on the CPU against the reference (with `nvrtc`, each
    also compiled to sm_90 as a GPU run would; `budget`: more of `Budget`'s fields, `layout`,
    `chunks`); returns how many ran."""
    from irfuse.testing.differential import Budget, check_plans

    out = check_plans(path, Budget(top=top, dtype=dtype, n=n, seed=seed, nvrtc=nvrtc, **budget))
    assert out.ok, (path, out.failure, out.detail)
    return out.plans


class RecordingDevice:
    """A device that records launches instead of running them (what the executor asks of a
    device, no more): `finishes_in_kernel` and `atomics_in_kernel` as given."""

    name = "recording"

    def __init__(self, finishes_in_kernel: bool = True, atomics_in_kernel: bool = False):
        self.finishes_in_kernel, self.atomics_in_kernel = finishes_in_kernel, atomics_in_kernel
        self.launches = []

    def upload(self, a):
        import numpy as np

        return np.array(a)

    upload_integers = upload

    def alloc(self, shape):
        import numpy as np

        return np.empty(shape)

    def launcher(self, kernel, buffers, n):
        self.launches.append((kernel, buffers))
        return lambda: None

    def copy(self, dst, src):
        pass

    def batch(self, steps):
        return lambda: None

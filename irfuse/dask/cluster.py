"""A local Dask cluster of one worker per GPU, each worker's process seeing its own GPU
first (device 0, which irfuse and CuPy use) and the others after it, so that workers can
open each other's GPU buffers (CUDA IPC; `irfuse.dask.exchange`). `dask_cuda`'s
`LocalCUDACluster` does the same and more (it is used where installed); without it, the
workers are `distributed` nannies started with CUDA_VISIBLE_DEVICES set so."""

from __future__ import annotations


def local_gpu_cluster(gpus: int, threads_per_worker: int = 1):
    """A cluster (a context manager) of `gpus` workers on this host's first `gpus` GPUs."""
    import distributed

    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        from distributed.system import MEMORY_LIMIT

        # Each worker its share of the host's memory (a nanny's default share follows its
        # threads: 1/32 of a 32-core host for one thread, too little for a GPU's arrays).
        share = MEMORY_LIMIT // gpus
        workers = {}
        for g in range(gpus):
            order = ",".join(str((g + k) % gpus) for k in range(gpus))
            workers[f"gpu{g}"] = {"cls": distributed.Nanny, "options": {
                "nthreads": threads_per_worker, "env": {"CUDA_VISIBLE_DEVICES": order}, "dashboard_address": None,
                "memory_limit": share}}
        scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
        return distributed.SpecCluster(workers=workers, scheduler=scheduler)
    return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, range(gpus))), n_workers=gpus,
                            threads_per_worker=threads_per_worker, dashboard_address=None)

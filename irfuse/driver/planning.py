"""The fusion search of a source, stage by stage, as `irfuse plan` shows it: the N best plans
of each stage's program (a program over a mesh that works per node is planned pass by pass,
as compiling plans it), with the search the partition pass runs, so that what is listed as
plan K is what `fuse-partition{plan=K}` applies; where the best plan runs a loop inside a
kernel, the best with every loop on the host too. With `registers="ptxas"` the ranking rests
on the figures the compile's rounds gathered (`compile_with_ptxas_figures`)."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace

from irfuse.artifact.records import record
from irfuse.dialects.element_types import element_type
from irfuse.dialects.kas import LoopOp, program_of
from irfuse.driver.compile import compile_with_ptxas_figures, run_pipeline
from irfuse.driver.front import frontend
from irfuse.driver.options import PTXAS, CompileOptions
from irfuse.driver.sources import Source
from irfuse.passes.fuse_partition import FusePartition
from irfuse.planner.registers import write_register_table
from irfuse.transforms.node_phases import has_nodal_statements, split_at_nodal_statements


@record
class StagePlans:
    label: str  # "" for a program of one stage, else which pass it is
    dags: list
    plans: list
    profile: object  # the device profile planned for
    seconds: float  # what the search took
    host: tuple | None = None  # (dags, plans) of the best plan with every loop on the host, where it differs


def search(source: Source, options: CompileOptions, top: int, max_size: int, progress=None
           ) -> tuple[list[StagePlans], list]:
    """Each stage's `top` best plans (kernels of at most `max_size` calls), and the source's
    warnings; `progress(stage, k, total)` is told how the search goes."""
    if options.registers == PTXAS:
        # (the ranking with the figures the compile's rounds gathered: the plan they settle on first)
        _, _, table = compile_with_ptxas_figures(source, options)
        with tempfile.TemporaryDirectory(prefix="irfuse-ptxas-") as tmp:
            path = os.path.join(tmp, "registers.json")
            write_register_table(path, table)
            return search(source, replace(options, registers=path if table else None), top, max_size, progress)
    result = frontend(source)
    stages = ([(f", pass over the {p.over} ({program_of(p.module).sym_name.data})", p.module)
               for p in split_at_nodal_statements(result.module).passes]
              if has_nodal_statements(result.module) else [("", result.module)])
    itemsize = element_type(options.dtype).itemsize
    found = []
    for s, (label, module) in enumerate(stages):
        module = run_pipeline(module, "kas-dce")
        partition = FusePartition(max_size=max_size, top=top, n=options.n, profile=options.profile,
                                  registers=options.registers)
        t0 = time.perf_counter()
        dags, plans, profile = partition.search(
            program_of(module), itemsize,
            progress=None if progress is None else (lambda k, total, s=s: progress(s, k, total)))
        seconds = time.perf_counter() - t0
        host = None
        if plans and any(isinstance(dags[c.dag].ops[i], LoopOp) for c in plans[0].configs for i in c.group):
            host_dags, host_plans, _ = replace(partition, loops="host", top=1, plan=0).search(program_of(module),
                                                                                             itemsize)
            host = (host_dags, host_plans)
        found.append(StagePlans(label, dags, plans, profile, seconds, host))
    return found, result.warnings

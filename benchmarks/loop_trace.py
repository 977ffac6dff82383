"""Where a time loop's step goes on the GPU: each kernel of a few steps of `irfuse.time_loop`
of the explicit step (its start, duration and the gap before it, from torch.profiler's CUDA
activity) and the node types of the graph the loop captures.

    python benchmarks/loop_trace.py [--cubes 16] [--steps 200]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simulations import DT, EXAMPLES, mesh_arrays  # noqa: E402
from assembly import LAMBDA, MU  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=int, default=16)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    import irfuse

    step = irfuse.compile(os.path.join(EXAMPLES, "mesh", "explicit_step.kas"), backend="cuda")
    t, prepared, conn, X, _ = mesh_arrays(torch, args.cubes)

    def loop(count):
        return irfuse.time_loop(step, count, {"u": "u1", "v": "v1"}, X=t["X"], u=t["u"], v=t["v"], m=t["m"],
                                conn=prepared, dN=t["dN"], lam=LAMBDA, mu=MU, dt=DT)
    loop(70)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        loop(args.steps)
        torch.cuda.synchronize()
    from irfuse.runtime.cuda_graph import cuda_driver

    cu, kinds, edges = cuda_driver(), collections.Counter(), collections.Counter()
    for kept in step._time_loops.values():
        for (count, _), graph in kept.graphs.items():
            if count > 1:
                nodes = cu.cuGraphGetNodes(graph._graph, 0)[2]
                for node in cu.cuGraphGetNodes(graph._graph, nodes)[1]:
                    kinds[cu.cuGraphNodeGetType(node)[1].name] += 1
                got = cu.cuGraphGetEdges(graph._graph, 0)
                count_edges = got[-1]
                got = cu.cuGraphGetEdges(graph._graph, count_edges)
                if len(got) > 4:  # (with edge data: programmatic or plain)
                    for data in got[3][:count_edges]:
                        edges[int(data.type)] += 1
    print("graph nodes:", dict(kinds), "edge types (0 plain, 1 programmatic):", dict(edges))
    events = sorted((e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")),
                    key=lambda e: e.time_range.start)
    names = collections.Counter(e.name for e in events)
    print(f"{len(events)} device events over {args.steps} steps; by name:")
    for name, count in names.most_common():
        total = sum(e.time_range.end - e.time_range.start for e in events if e.name == name)
        print(f"  {count:6d}  {total / count:8.2f} us  {name[:90]}")
    span = events[-1].time_range.end - events[0].time_range.start
    print(f"device span {span:.0f} us, {span / args.steps:.2f} us/step")
    mid = len(events) // 2
    prev = events[mid - 1].time_range.end
    for e in events[mid:mid + 24]:
        print(f"  gap {e.time_range.start - prev:7.2f}  dur {e.time_range.end - e.time_range.start:7.2f}  "
              f"{e.name[:80]}")
        prev = e.time_range.end
    cpu = [e for e in prof.events() if not str(getattr(e, "device_type", "")).endswith("CUDA")]
    top = collections.Counter()
    for e in cpu:
        top[e.name] += e.time_range.end - e.time_range.start
    print("host events:", top.most_common(8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

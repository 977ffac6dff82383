"""Probe (forty-third session, run on the tree before the change, e1610b2, where a taped loop was
split at a fixed budget of `reverse_mode.TAPE_WORDS` words): the planner's predicted time (h100
profile, n = 1,048,576) of each program's derivative unrolled, taped split as deep as the
splitting goes (TAPE_WORDS 1), at the budget (64) and whole; `predicted_times_h100_profile.txt`.

    python predicted_times.py h100 time_loop8 time_loop16 ..."""

import sys
import time

import irfuse
import irfuse.transforms.reverse_mode as rm
from irfuse.dialects.kas import LoopOp, program_of
from irfuse.planner.cost import peak_register_words
from irfuse.planner.profiles import load_profile
from irfuse.planner.search import plan_program
from irfuse.transforms.dead_code import eliminate_dead_code
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, "benchmarks")
from loop_derivatives import programs  # noqa: E402

N = 1 << 20


def predict(p, profile):
    m = ModuleOp([p.clone()])
    eliminate_dead_code(program_of(m))
    _, plans = plan_program(program_of(m), N, profile)
    return (plans[0].predicted_time, max(peak_register_words(c.model) for c in plans[0].configs),
            len(plans[0].configs))


def main() -> None:
    profile = load_profile(sys.argv[1])
    for name in sys.argv[2:]:
        src, mode, wrt = programs()[name]
        f = irfuse.grad if mode == "grad" else irfuse.vjp
        kw = dict(of="E") if mode == "grad" else {}
        for label, loops, words in (("unroll", "unroll", 64), ("seg", "tape", 1), ("tape64", "tape", 64),
                                    ("whole", "tape", 10**9)):
            rm.TAPE_WORDS = words
            t = time.time()
            p = program_of(f(src, wrt=wrt, loops=loops, **kw))
            trips = sorted(op.trip_count.data for op in p.walk() if isinstance(op, LoopOp))
            seconds, peak, kernels = predict(p, profile)
            print(f"{name:15s} {label:7s} predicted {seconds * 1e3:8.3f} ms peak {peak:5d} kernels {kernels} "
                  f"trips {trips[:8]} {time.time() - t:.0f}s", flush=True)


if __name__ == "__main__":
    main()

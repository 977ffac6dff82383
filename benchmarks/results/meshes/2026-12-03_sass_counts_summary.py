"""Summary of Nsight Compute's SourceCounters page (`ncu -i REPORT --page source --csv
--print-source sass`, as `2026-12-03_sass_counts.sh` writes it; gzipped or not): the kernel's
warp instructions executed, the runs of consecutive instructions executed equally often (a
straight stretch of code, or one pass of a loop's body) that take 0.5% or more of them, and the
instructions by opcode.

    python 2026-12-03_sass_counts_summary.py COUNTS.csv[.gz]"""
import collections
import csv
import gzip
import sys

path = sys.argv[1]
with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
    rows = list(csv.reader(f))
header, data = rows[1], rows[2:]
executed, source = header.index("Instructions Executed"), header.index("Source")
stalls = header.index("Warp Stall Sampling (All Samples)")


def number(text: str) -> int:
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return 0


counts = [number(r[executed]) for r in data]
samples = [number(r[stalls]) for r in data]
total, sampled = sum(counts), max(sum(samples), 1)
print(f"{total:,} warp instructions executed, {len(data)} instructions")
runs = []  # [first, last, count, samples]
for i, c in enumerate(counts):
    if runs and runs[-1][2] == c and runs[-1][1] == i - 1:
        runs[-1][1], runs[-1][3] = i, runs[-1][3] + samples[i]
    else:
        runs.append([i, i, c, samples[i]])
for first, last, c, s in runs:
    if c * (last - first + 1) >= 0.005 * total:
        print(f"  {first:5d}-{last:5d}  {c:>13,} x {last - first + 1:4d} = {100 * c * (last - first + 1) / total:5.1f}%"
              f"  (stall samples {100 * s / sampled:5.1f}%)")
ops = collections.Counter()
for r, c in zip(data, counts):
    words = r[source].split()
    op = words[1] if words and words[0].startswith("@") else (words[0] if words else "?")
    ops[op.split(".")[0]] += c
print("  " + ", ".join(f"{op} {100 * c / total:.1f}%" for op, c in ops.most_common(12)))

"""Two sets of `compile_times.py` JSON runs side by side (head, then the change): cold compile
(min-max over the runs), NVRTC's seconds summed over its compiles (min) and their count, cached
load in ms, and where the runs have it the cold compile after the other programs (min-max). Usage: python 2026-12-06_compile_units_ab_compare.py HEAD1.json,HEAD2.json NEW1.json,NEW2.json"""
import json, sys
def load(fs):
    out={}
    for f in fs:
        for r in json.load(open(f))["rows"] if isinstance(json.load(open(f)), dict) else json.load(open(f)):
            out.setdefault((r["program"], r["dtype"]), []).append(r)
    return out
a=load(sys.argv[1].split(",")); b=load(sys.argv[2].split(","))
after = any(r.get("cold_after_others_s") is not None for rows in a.values() for r in rows)
print(f"{'program':32} {'dtype':4} {'head cold':>16} {'new cold':>16} {'head nvrtc(n)':>16} {'new nvrtc(n)':>16} {'head cached':>12} {'new cached':>12}"
      + (f" {'head after others':>18} {'new after others':>18}" if after else ""))
for k in a:
    ha=[r['cold_s'] for r in a[k]]; hb=[r['cold_s'] for r in b[k]]
    na=[r['nvrtc_s'] for r in a[k]]; nb=[r['nvrtc_s'] for r in b[k]]
    ca=[r['cached_s']*1e3 for r in a[k]]; cb=[r['cached_s']*1e3 for r in b[k]]
    line = f"{k[0]:32} {k[1]:4} {min(ha):7.2f}-{max(ha):.2f} {min(hb):11.2f}-{max(hb):.2f} {min(na):9.2f}({a[k][0]['nvrtc_compiles']}) {min(nb):12.2f}({b[k][0]['nvrtc_compiles']}) {min(ca):8.1f}-{max(ca):.1f} {min(cb):8.1f}-{max(cb):.1f}"
    if after:
        oa = [r['cold_after_others_s'] for r in a[k]]; ob = [r['cold_after_others_s'] for r in b[k]]
        line += f" {min(oa):13.2f}-{max(oa):.2f} {min(ob):13.2f}-{max(ob):.2f}"
    print(line)

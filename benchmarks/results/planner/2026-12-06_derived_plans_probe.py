"""Probe (kept for its record): the plans of the programs irfuse derives from the mesh examples
(the P1 and Neo-Hookean residuals' forward derivatives, tangent diagonals and per-element
Jacobians; the Neo-Hookean energy's second derivative), both types, under the h100, h200 and cpu
profiles, as [kernel, bx, by, elements a thread] lists; run under each tree by PYTHONPATH and
compare the two JSONs.
    python PROBE.py OUT.json"""
import sys, os, json, warnings, tempfile
warnings.simplefilter("ignore")
os.environ['IRFUSE_CACHE_DIR'] = tempfile.mkdtemp()
import irfuse
from irfuse.api.tangents import _Jacobian
R = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "mesh") + os.sep
def sig(prog):
    c = prog.compiled
    arts = [s.artifact for s in c.stages] if hasattr(c, 'stages') else [c]
    return [[k.name, k.bx, k.by, getattr(k, 'per_thread', 1)] for a in arts for k in a.kernels if not k.name.startswith('irf_')]
out = {}
for ex, of, wrt in (('p1_residual', 'r', 'u'), ('neo_hookean_residual', 'r', 'u'), ('neo_hookean_energy', 'E', 'u')):
    for dt in ('f32', 'f64'):
        for prof in ('h100', 'h200', 'cpu'):
            be = 'cpu' if prof == 'cpu' else 'cuda'
            kw = dict(backend=be, dtype=dt, profile=prof, **({'arch': 'sm_90'} if be == 'cuda' else {}))
            p = irfuse.compile(R + ex + '.kas', **kw)
            key = f'{ex} {dt} {prof}'
            try:
                out[key + ' jvp'] = sig(irfuse.jvp(p, wrt=wrt, with_outputs=False))
            except Exception as e:
                out[key + ' jvp'] = repr(e)[:80]
            if of == 'r':
                j = _Jacobian(p, of, wrt, 'probe')
                out[key + ' diagonal'] = sig(j.diagonal[0])
                out[key + ' jacobian'] = sig(j.program)
            else:
                try:
                    out[key + ' hvp'] = sig(irfuse.jvp(irfuse.vjp(p, wrt=wrt), wrt=wrt))
                except Exception as e:
                    out[key + ' hvp'] = repr(e)[:80]
            print(key, file=sys.stderr, flush=True)
json.dump(out, open(sys.argv[1], 'w'), indent=0)

// RUN: irfuse-opt %s -t tangent-rows | filecheck %s
// The linear elasticity tangent with the reference gradients dN a table (a uniform input fixed
// when compiling, `constants=`). The rounds kernel's slot code writes out every op reading a
// literal word: J = Xe^T dN becomes differences of coordinates (dN's 0 and 1 folded, its -1 a
// negation) and G = dN J^-1 J^-1's rows and their negated sum, each G word read where it is;
// ops on no literal word keep their calls (det, inv). The CPU twin keeps the table as an
// array and every call.
builtin.module {
  kas.program @elastic_table(%u: !kas.vector<3>, %conn: !kas.index<4>, %Xe: !kas.matrix<4x3>, %lam: !kas.scalar, %mu: !kas.scalar) -> (r : !kas.vector<3>) uniform(lam, mu) nodal(u, r) {
    %dN = kas.table [-1.0, -1.0, -1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] : !kas.matrix<4x3>
    %ue = kas.gather %u, %conn : (!kas.vector<3>, !kas.index<4>) -> !kas.matrix<4x3>
    %J = kas.call @mtmul_4x3_4x3(%Xe, %dN) : (!kas.matrix<4x3>, !kas.matrix<4x3>) -> !kas.matrix<3x3>
    %detJ = kas.call @det_3x3(%J) : (!kas.matrix<3x3>) -> !kas.scalar
    %Jinv = kas.call @inv_3x3(%J) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %G = kas.call @mmul_4x3_3x3(%dN, %Jinv) : (!kas.matrix<4x3>, !kas.matrix<3x3>) -> !kas.matrix<4x3>
    %H = kas.call @mtmul_4x3_4x3(%ue, %G) : (!kas.matrix<4x3>, !kas.matrix<4x3>) -> !kas.matrix<3x3>
    %eps = kas.call @sym_3x3(%H) : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    %tr = kas.call @trace_3x3(%eps) : (!kas.matrix<3x3>) -> !kas.scalar
    %sig = kas.call @scale_3x3_s(%eps, %mu) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    %P = kas.call @smimul33(%tr) : (!kas.scalar) -> !kas.matrix<3x3>
    %P_1 = kas.call @scale_3x3_s(%P, %lam) : (!kas.matrix<3x3>, !kas.scalar) -> !kas.matrix<3x3>
    %sig_2 = kas.call @add_3x3_3x3(%sig, %P_1) : (!kas.matrix<3x3>, !kas.matrix<3x3>) -> !kas.matrix<3x3>
    %fe = kas.call @mmul_4x3_3x3(%G, %sig_2) : (!kas.matrix<4x3>, !kas.matrix<3x3>) -> !kas.matrix<4x3>
    %fe_1 = kas.call @scale_4x3_s(%fe, %detJ) : (!kas.matrix<4x3>, !kas.scalar) -> !kas.matrix<4x3>
    %r = kas.scatter %fe_1, %conn : (!kas.matrix<4x3>, !kas.index<4>) -> !kas.vector<3>
    kas.return %r : !kas.vector<3>
  }
}
// CHECK:      extern "C" __global__ void __launch_bounds__(96) irf_tangent_rows(
// CHECK-NOT:    in_dN
// CHECK:            const real_t* const [[X:v[0-9]+]] = in_Xe + e * 12;
// CHECK:            const real_t [[DN:v[0-9]+]][12] = {(real_t)-0x1.0000000000000p+0, (real_t)-0x1.0000000000000p+0, (real_t)-0x1.0000000000000p+0, (real_t)0x1.0000000000000p+0, (real_t)0x0.0p+0,
// CHECK-NEXT:       real_t [[J:v[0-9]+]][9];
// CHECK-NEXT:       [[J]][0] = ((-[[X]][0]) + [[X]][3]);
// CHECK-NEXT:       [[J]][1] = ((-[[X]][0]) + [[X]][6]);
// CHECK:            [[J]][8] = ((-[[X]][2]) + [[X]][11]);
// CHECK-NEXT:       real_t [[DET:v[0-9]+]][1];
// CHECK-NEXT:       irf_det_3x3_elem_rr(0, 0, [[J]], [[DET]]);
// CHECK-NEXT:       real_t [[INV:v[0-9]+]][9];
// CHECK-NEXT:       irf_inv_3x3_elem_rr(0, 0, [[J]], [[INV]]);
// CHECK-NEXT:       real_t [[G:v[0-9]+]][12];
// CHECK-NEXT:       [[G]][0] = (((-[[INV]][0]) + (-[[INV]][3])) + (-[[INV]][6]));
// CHECK:            [[G]][3] = [[INV]][0];
// (H = ue^T G reads G's words where they lie: J^-1's)
// CHECK:            irf_mtmul_4x3_4x3_elem_rrr(0, 0, {{v[0-9]+}}, [[G]], {{v[0-9]+}});
// CHECK-NOT:        [[DN]]
// CHECK:            const uchar4 irf_p4
// CHECK:      #else
// CHECK:          const real_t [[CDN:v[0-9]+]][12] = {(real_t)-0x1.0000000000000p+0,
// CHECK:          irf_mtmul_4x3_4x3_elem_rrr(0, 0, {{v[0-9]+}}, [[CDN]], {{v[0-9]+}});

// A connectivity's scatter order on the host in one pass over its entries (irfuse.mesh.native):
// the arrays of irfuse.mesh.ScatterInverse, entry for entry those of the sorting versions
// (irfuse.mesh.scatter._inverse, irfuse.mesh.on_gpu.inverse_on_gpu).
//
// Within a group of `per_group` slots, a partial is a node's run of slots; partials are
// numbered group after group, within a group in the order of their first slots, which is
// the order in which a scan of the slots meets each node first. So a scan that remembers, per
// node, the group it was last met in and its partial there numbers them without a sort, and
// a count per partial places each slot (ascending within its partial). The nodes' lists of
// partials are a counting sort of the partials by node (stable: ascending within a node).
// Linear in the entries and the nodes.

#include <stdint.h>
#include <stdlib.h>

extern "C" long long irf_scatter_order(const int32_t* conn, long long n, long long nodes, int per_group,
                                       int64_t* starts, int32_t* partials, uint8_t* members, uint8_t* firsts,
                                       int32_t* bases) {
  // Returns the number of partials, or -1 where scratch memory could not be had.
  // `partials` and `firsts` hold n entries (at most one partial a slot); `starts` nodes + 1,
  // `bases` groups + 1.
  int64_t* seen = (int64_t*)malloc((size_t)(nodes > 0 ? nodes : 1) * sizeof(int64_t));  // group last met in
  int32_t* run = (int32_t*)malloc((size_t)(nodes > 0 ? nodes : 1) * sizeof(int32_t));   // its partial there
  int32_t* node_of = (int32_t*)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));       // each partial's node
  if (!seen || !run || !node_of) {
    free(seen); free(run); free(node_of);
    return -1;
  }
  for (long long v = 0; v < nodes; ++v) seen[v] = -1;
  int32_t slot_run[256], count[256], at[256];
  long long p = 0;
  const long long groups = (n + per_group - 1) / per_group;
  for (long long g = 0; g < groups; ++g) {
    const long long s0 = g * per_group;
    const int m = (int)(n - s0 < per_group ? n - s0 : per_group);
    bases[g] = (int32_t)p;
    int runs = 0;
    for (int j = 0; j < m; ++j) {
      const int32_t v = conn[s0 + j];
      if (seen[v] != g) {
        seen[v] = g;
        run[v] = runs;
        node_of[p + runs] = v;
        count[runs] = 0;
        ++runs;
      }
      slot_run[j] = run[v];
      ++count[run[v]];
    }
    int offset = 0;
    for (int r = 0; r < runs; ++r) {
      firsts[p + r] = (uint8_t)offset;
      at[r] = offset;
      offset += count[r];
    }
    for (int j = 0; j < m; ++j) members[s0 + at[slot_run[j]]++] = (uint8_t)j;
    p += runs;
  }
  bases[groups] = (int32_t)p;
  for (long long v = 0; v <= nodes; ++v) starts[v] = 0;
  for (long long q = 0; q < p; ++q) ++starts[node_of[q] + 1];
  for (long long v = 0; v < nodes; ++v) starts[v + 1] += starts[v];
  // (seen's storage reused: each node's next place in `partials`)
  for (long long v = 0; v < nodes; ++v) seen[v] = starts[v];
  for (long long q = 0; q < p; ++q) partials[seen[node_of[q]]++] = (int32_t)q;
  free(seen); free(run); free(node_of);
  return p;
}

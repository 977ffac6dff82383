// A mesh's preparation on the host, for irfuse.mesh.native: a connectivity's scatter order in
// one pass over its entries, and a Morton renumbering by radix sorts. Each gives, entry for
// entry, the arrays of the sorting versions (irfuse.mesh.scatter._inverse and
// irfuse.mesh.on_gpu.inverse_on_gpu; irfuse.mesh.order.reorder).
//
// The scatter order (irfuse.mesh.ScatterInverse):
// Within a group of `per_group` slots, a partial is a node's run of slots; partials are
// numbered group after group, within a group longest first, equal lengths in the order of
// their first slots (the order in which a scan of the slots meets each node first). So a scan
// that remembers, per node, the group it was last met in and its run there finds the runs
// and their lengths without a sort of the slots, a stable sort of the group's few runs by
// length numbers them, and a count per partial places each slot (ascending within its
// partial). The nodes' lists of partials are a counting sort of the partials by node (stable:
// ascending within a node). Linear in the entries and the nodes but for the runs' sorts.

#include <stdint.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

struct NodeSeen {  // (one cache line a node for both: a random numbering misses once a slot)
  int64_t group;    // the group the node was last met in
  int32_t partial;  // its partial there, numbered within the group
};

extern "C" long long irf_scatter_order(const int32_t* conn, long long n, long long nodes, int per_group,
                                       int64_t* starts, int32_t* partials, uint8_t* members, uint8_t* firsts,
                                       int32_t* bases) {
  // Returns the number of partials, or -1 where scratch memory could not be had.
  // `partials` and `firsts` hold n entries (at most one partial a slot); `starts` nodes + 1,
  // `bases` groups + 1.
  NodeSeen* seen = (NodeSeen*)malloc((size_t)(nodes > 0 ? nodes : 1) * sizeof(NodeSeen));
  int32_t* node_of = (int32_t*)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));  // each partial's node
  if (!seen || !node_of) {
    free(seen); free(node_of);
    return -1;
  }
  for (long long v = 0; v < nodes; ++v) seen[v].group = -1;
  int32_t slot_run[256], count[256], at[256], run_node[256], rank[256];
  long long p = 0;
  const long long groups = (n + per_group - 1) / per_group;
  for (long long g = 0; g < groups; ++g) {
    const long long s0 = g * per_group;
    const int m = (int)(n - s0 < per_group ? n - s0 : per_group);
    bases[g] = (int32_t)p;
    int runs = 0;
    for (int j = 0; j < m; ++j) {
      const int32_t v = conn[s0 + j];
      if (s0 + j + 32 < n) __builtin_prefetch(&seen[conn[s0 + j + 32]]);  // (misses overlapped)
      NodeSeen& node = seen[v];
      if (node.group != g) {
        node.group = g;
        node.partial = runs;
        run_node[runs] = v;
        count[runs] = 0;
        ++runs;
      }
      slot_run[j] = node.partial;
      ++count[node.partial];
    }
    // rank[q]: the run numbered q, by insertion (stable; the runs of a mesh's group are mostly
    // in order or of one length, and a group's few runs bound its moves)
    for (int r = 0; r < runs; ++r) {
      int q = r;
      for (; q > 0 && count[rank[q - 1]] < count[r]; --q) rank[q] = rank[q - 1];
      rank[q] = r;
    }
    int offset = 0;
    for (int q = 0; q < runs; ++q) {
      const int r = rank[q];
      firsts[p + q] = (uint8_t)offset;
      node_of[p + q] = run_node[r];
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
  for (long long v = 0; v < nodes; ++v) seen[v].group = starts[v];
  for (long long q = 0; q < p; ++q) partials[seen[node_of[q]].group++] = (int32_t)q;
  free(seen); free(node_of);
  return p;
}

// A Morton renumbering (irfuse.mesh.reorder(..., method="morton")): the nodes by their keys
// (each axis scaled to 21-bit integers as irfuse.mesh.order._morton_order scales them, the
// bits interleaved), ties in node order, by a stable radix sort a byte at a time; then the
// elements by their new node numbers sorted, lowest first (np.lexsort's order): a counting sort
// by the lowest (buckets: the nodes), then each bucket's few by the rest of their rows.

static int radix_by_key(uint64_t* key, int64_t* index, long long n) {
  // Sorts (key, index) by key, stably; -1 where scratch memory could not be had.
  uint64_t* k2 = (uint64_t*)malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
  int64_t* i2 = (int64_t*)malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  if (!k2 || !i2) {
    free(k2); free(i2);
    return -1;
  }
  for (int shift = 0; shift < 64; shift += 8) {
    long long count[257] = {0};
    for (long long i = 0; i < n; ++i) ++count[((key[i] >> shift) & 255) + 1];
    if (count[((n ? key[0] >> shift : 0) & 255) + 1] == n) continue;  // (one digit for all: no move)
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (long long i = 0; i < n; ++i) {
      const long long at = count[(key[i] >> shift) & 255]++;
      k2[at] = key[i];
      i2[at] = index[i];
    }
    for (long long i = 0; i < n; ++i) {
      key[i] = k2[i];
      index[i] = i2[i];
    }
  }
  free(k2); free(i2);
  return 0;
}

extern "C" int irf_morton_order(const double* coords, long long nodes, int dims, int64_t* node_order) {
  double lo[3] = {0, 0, 0}, span[3] = {1, 1, 1};
  for (int d = 0; d < dims; ++d) {
    double a = nodes ? coords[d] : 0, b = a;
    for (long long v = 1; v < nodes; ++v) {
      const double c = coords[v * dims + d];
      a = c < a ? c : a;
      b = c > b ? c : b;
    }
    lo[d] = a;
    span[d] = b > a ? b - a : 1.0;
  }
  uint64_t* key = (uint64_t*)malloc((size_t)(nodes > 0 ? nodes : 1) * sizeof(uint64_t));
  if (!key) return -1;
  const uint64_t top = (1ull << 21) - 1;
  for (long long v = 0; v < nodes; ++v) {
    uint64_t k = 0;
    for (int d = 0; d < dims; ++d) {
      uint64_t q = (uint64_t)((coords[v * dims + d] - lo[d]) / span[d] * 2097152.0);
      q = q < top ? q : top;
      for (int bit = 0; bit < 21; ++bit) k |= ((q >> bit) & 1ull) << (bit * dims + d);
    }
    key[v] = k;
    node_order[v] = v;
  }
  const int failed = radix_by_key(key, node_order, nodes);
  free(key);
  return failed;
}

extern "C" int irf_element_order(const int32_t* conn, long long elements, int k, const int64_t* node_order,
                                 long long nodes, int64_t* element_order) {
  int32_t* renamed = (int32_t*)malloc((size_t)(elements * k > 0 ? elements * k : 1) * sizeof(int32_t));
  int32_t* number = (int32_t*)malloc((size_t)(nodes > 0 ? nodes : 1) * sizeof(int32_t));
  long long* count = (long long*)malloc((size_t)(nodes + 1) * sizeof(long long));
  if (!renamed || !number || !count) {
    free(renamed); free(number); free(count);
    return -1;
  }
  for (long long r = 0; r < nodes; ++r) number[node_order[r]] = (int32_t)r;
  for (long long e = 0; e < elements; ++e) {
    if (e + 16 < elements)  // (a random numbering misses in `number` at every entry: overlapped)
      for (int a = 0; a < k; ++a) __builtin_prefetch(&number[conn[(e + 16) * k + a]]);
    int32_t* row = renamed + e * k;
    for (int a = 0; a < k; ++a) {  // (insertion: a row's few new numbers, ascending)
      const int32_t x = number[conn[e * k + a]];
      int b = a;
      while (b > 0 && row[b - 1] > x) {
        row[b] = row[b - 1];
        --b;
      }
      row[b] = x;
    }
    element_order[e] = e;
  }
  // By the lowest new node first (a counting sort: stable), then each run of one lowest node by
  // the rest of its rows (stable: ties keep element order), as np.lexsort orders them.
  for (long long r = 0; r <= nodes; ++r) count[r] = 0;
  for (long long e = 0; e < elements; ++e) ++count[renamed[e * k] + 1];
  for (long long r = 0; r < nodes; ++r) count[r + 1] += count[r];
  for (long long e = 0; e < elements; ++e) element_order[count[renamed[e * k]]++] = e;
  // (the rows in that order, gathered once, so the buckets' sorts read them in place)
  int32_t* sorted_rows = (int32_t*)malloc((size_t)(elements * k > 0 ? elements * k : 1) * sizeof(int32_t));
  if (!sorted_rows) {
    free(renamed); free(number); free(count);
    return -1;
  }
  for (long long i = 0; i < elements; ++i) {
    if (i + 16 < elements) __builtin_prefetch(&renamed[element_order[i + 16] * k]);
    for (int c = 0; c < k; ++c) sorted_rows[i * k + c] = renamed[element_order[i] * k + c];
  }
  free(renamed);
  const auto rest_lower = [sorted_rows, k](int64_t a, int64_t b) {  // (places in the gathered rows)
    for (int c = 1; c < k; ++c) {
      const int32_t x = sorted_rows[a * k + c], y = sorted_rows[b * k + c];
      if (x != y) return x < y;
    }
    return false;
  };
  int failed = 0;
  try {
    std::vector<int64_t> place, moved;
    for (long long i = 0; i < elements;) {
      long long j = i + 1;
      while (j < elements && sorted_rows[j * k] == sorted_rows[i * k]) ++j;
      if (j - i > 1 && k > 1) {
        place.resize(j - i);
        moved.resize(j - i);
        for (long long t = 0; t < j - i; ++t) place[t] = i + t;
        std::stable_sort(place.begin(), place.end(), rest_lower);
        for (long long t = 0; t < j - i; ++t) moved[t] = element_order[place[t]];
        for (long long t = 0; t < j - i; ++t) element_order[i + t] = moved[t];
      }
      i = j;
    }
  } catch (...) {  // (no memory for a bucket's places)
    failed = -1;
  }
  free(sorted_rows); free(number); free(count);
  return failed;
}

// irfuse.mesh.renumber's connectivity: out[e] = new numbers of conn[element_order[e]], after
// checking that both orders are permutations (-2: node_order is not, -3: element_order is
// not; -1: no scratch memory), in two linear passes where the array version sorts to check
// and gathers through 64-bit index copies.
extern "C" int irf_renumber(const int32_t* conn, long long elements, int k, const int64_t* node_order,
                            long long nodes, const int64_t* element_order, int32_t* out) {
  int32_t* number = (int32_t*)malloc((size_t)(nodes > 0 ? nodes : 1) * sizeof(int32_t));
  unsigned char* seen = (unsigned char*)calloc((size_t)(elements > nodes ? elements : nodes) + 1, 1);
  if (!number || !seen) {
    free(number); free(seen);
    return -1;
  }
  int failed = 0;
  for (long long r = 0; r < nodes && !failed; ++r) {
    const int64_t v = node_order[r];
    if (v < 0 || v >= nodes || seen[v]) failed = -2;
    else { seen[v] = 1; number[v] = (int32_t)r; }
  }
  if (!failed) {
    for (long long e = 0; e < elements; ++e) seen[e] = 0;
    for (long long e = 0; e < elements && !failed; ++e) {
      const int64_t f = element_order[e];
      if (f < 0 || f >= elements || seen[f]) failed = -3;
      else seen[f] = 1;
    }
  }
  if (!failed) {
    for (long long e = 0; e < elements; ++e) {
      if (e + 16 < elements)  // (rows and numbers both read out of order: overlapped)
        __builtin_prefetch(&conn[element_order[e + 16] * k]);
      const int32_t* row = conn + element_order[e] * k;
      for (int a = 0; a < k; ++a) out[e * k + a] = number[row[a]];
    }
  }
  free(number); free(seen);
  return failed;
}

// A sparse pattern over the nodes (irfuse.mesh.assembly.sparse_pattern): each node's blocks
// are the nodes it shares an element with and itself, ascending, found node by node from its
// (element, local node) slots (a counting sort of the entries by node) with one small sort a
// node, where the array version sorts every element's K x K node pairs at once. Then the CSR
// arrays of D x D blocks laid out as the array version lays them out, and, where asked for,
// each slot's run (`pairs`). The same arrays, entry for entry.

extern "C" long long irf_pattern_blocks(const int32_t* conn, long long elements, int k, long long nodes,
                                        int64_t* starts, int32_t* cols, long long capacity) {
  // starts: nodes + 1 (node n's blocks are cols[starts[n]:starts[n + 1]]); cols: `capacity`
  // words. Returns the blocks, -1 where scratch memory could not be had, -2 past `capacity`.
  const long long n = elements * k;
  std::vector<int64_t> first;
  std::vector<int64_t> slot;
  try {
    first.assign(nodes + 1, 0);
    slot.resize(n);
  } catch (...) {
    return -1;
  }
  for (long long s = 0; s < n; ++s) ++first[conn[s] + 1];
  for (long long v = 0; v < nodes; ++v) first[v + 1] += first[v];
  {
    std::vector<int64_t> at(first.begin(), first.end() - 1);
    for (long long s = 0; s < n; ++s) slot[at[conn[s]]++] = s;
  }
  std::vector<int32_t> near;
  long long made = 0;
  starts[0] = 0;
  for (long long v = 0; v < nodes; ++v) {
    near.clear();
    near.push_back((int32_t)v);
    for (int64_t j = first[v]; j < first[v + 1]; ++j) {
      const int32_t* row = conn + (slot[j] / k) * k;
      for (int b = 0; b < k; ++b) near.push_back(row[b]);
    }
    std::sort(near.begin(), near.end());
    const long long count = std::unique(near.begin(), near.end()) - near.begin();
    if (made + count > capacity) return -2;
    std::copy(near.begin(), near.begin() + count, cols + made);
    made += count;
    starts[v + 1] = made;
  }
  return made;
}

template <class Index>
static void pattern_arrays(const int64_t* starts, const int32_t* cols, long long nodes, int d, Index* indptr,
                           Index* indices, Index* diagonal) {
  // Block p of node row n, row i: run starts[n] * d + i * length + p, its d entries from
  // run * d; row n * d + i begins at starts[n] * d * d + i * length * d.
  for (long long v = 0; v < nodes; ++v) {
    const int64_t begin = starts[v], length = starts[v + 1] - begin;
    const int32_t* near = cols + begin;
    const long long own = std::lower_bound(near, near + length, (int32_t)v) - near;
    for (int i = 0; i < d; ++i) {
      indptr[v * d + i] = (Index)(begin * d * d + (int64_t)i * length * d);
      for (int64_t p = 0; p < length; ++p) {
        const int64_t run = begin * d + (int64_t)i * length + p;
        for (int j = 0; j < d; ++j) indices[run * d + j] = (Index)((int64_t)near[p] * d + j);
      }
      diagonal[v * d + i] = (Index)((begin * d + (int64_t)i * length + own) * d + i);
    }
  }
  indptr[nodes * d] = (Index)(starts[nodes] * d * d);
}

extern "C" void irf_pattern_arrays(const int64_t* starts, const int32_t* cols, long long nodes, int d, int wide,
                                   void* indptr, void* indices, void* diagonal) {
  if (wide)
    pattern_arrays(starts, cols, nodes, d, (int64_t*)indptr, (int64_t*)indices, (int64_t*)diagonal);
  else
    pattern_arrays(starts, cols, nodes, d, (int32_t*)indptr, (int32_t*)indices, (int32_t*)diagonal);
}

extern "C" void irf_pattern_pairs(const int32_t* conn, long long elements, int k, const int64_t* starts,
                                  const int32_t* cols, int d, int32_t* pairs) {
  // Element e's slot (a, i, b): the run of block (conn[e, a], conn[e, b]), row i.
  for (long long e = 0; e < elements; ++e) {
    const int32_t* row = conn + e * k;
    for (int a = 0; a < k; ++a) {
      const int64_t begin = starts[row[a]], length = starts[row[a] + 1] - begin;
      const int32_t* near = cols + begin;
      for (int b = 0; b < k; ++b) {
        const int64_t p = std::lower_bound(near, near + length, row[b]) - near;
        for (int i = 0; i < d; ++i)
          pairs[e * (int64_t)k * d * k + ((int64_t)a * d + i) * k + b] = (int32_t)(begin * d + (int64_t)i * length + p);
      }
    }
  }
}

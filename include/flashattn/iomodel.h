// IO model of attention (seed 003's exercise): how many bytes the naive three-kernel algorithm and
// the tiled FlashAttention-2 forward move between the large arrays in HBM and the on-chip memory.
//
// Each figure comes two ways: counted, by walking the algorithm's loops tile by tile and adding up
// every load and store (ragged last tiles exactly), and from the closed-form formula. For
// non-causal shapes the two agree exactly; for causal ones the formula is an approximation (the
// non-causal K/V traffic halved, plus the diagonal tiles) and the count is the truth.
#pragma once

#include <cstdint>
#include <string>

#include "flashattn/types.h"

namespace flashattn {

struct IoShape {
  int64_t batch = 1;
  int64_t nheads = 1;
  int64_t seqlen_q = 1024;
  int64_t seqlen_k = 1024;
  int64_t headdim = 128;
  int64_t element_bytes = 2;  // Q, K, V, O and the naive S and P; the logsumexp is always fp32
  bool causal = false;        // aligned to the bottom-right corner, as the library's mask is
  int64_t block_q = 256;      // Br: query rows per tile (the outer loop)
  int64_t block_k = 128;      // Bc: key rows per tile (the inner loop)
};

// Bytes read from and written to the large arrays.
struct IoTraffic {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  int64_t total_bytes() const { return read_bytes + write_bytes; }
};

struct IoReport {
  IoShape shape;
  IoTraffic naive_counted, naive_formula;
  IoTraffic tiled_counted, tiled_formula;
  // True when the closed forms are exact for this shape (non-causal); else they approximate.
  bool formula_exact = true;
  double reduction_counted() const;  // naive total / tiled total
  double reduction_formula() const;
  // Where the reduction levels off for long sequences: naive moves ~4 N^2 elements (S and P,
  // each written once and read once) while tiled re-reads K and V once per query tile,
  // ~2 N^2 d / Br elements, so the ratio tends to 2 Br / d, not to N / Br.
  double reduction_limit() const;
};

// Ok, or a message naming the field that is out of range.
Status validate_io_shape(const IoShape& shape);

// Naive: S = Q K^T (written), P = softmax(S) (read, written), O = P V (read P, V; write O). Each
// kernel is credited with perfect reuse (every input element read once), the best case for naive.
IoTraffic count_naive_io(const IoShape& shape);
IoTraffic naive_io_formula(const IoShape& shape);

// Tiled FlashAttention-2 forward: for each Q tile (loaded once), every K/V tile it can see is
// loaded; O and the fp32 logsumexp are written once. Causal skips tiles that are fully masked and
// loads partially masked ones whole; a Q tile that sees no key writes O = 0 and L = -inf only.
IoTraffic count_tiled_io(const IoShape& shape);
IoTraffic tiled_io_formula(const IoShape& shape);

IoReport io_report(const IoShape& shape);

}  // namespace flashattn

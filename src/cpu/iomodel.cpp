// The IO model of include/flashattn/iomodel.h. The counters walk the same loops the kernels run,
// so that a change of tiling shows up here the way it would in a profiler's DRAM byte counters.
#include "flashattn/iomodel.h"

#include <algorithm>
#include <cmath>

namespace flashattn {
namespace {

constexpr int64_t kLseBytes = 4;  // the logsumexp is fp32 whatever the element type

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Traffic of one (batch, head); every algorithm here treats heads independently.
IoTraffic times_heads(IoTraffic per_head, const IoShape& s) {
  const int64_t heads = s.batch * s.nheads;
  return {per_head.read_bytes * heads, per_head.write_bytes * heads};
}

// One past the last key that query tile [q0, q0 + rows) can see.
int64_t tile_key_end(const IoShape& s, int64_t q0, int64_t rows) {
  if (!s.causal) return s.seqlen_k;
  const int64_t last_row = q0 + rows - 1;
  return std::min(s.seqlen_k, last_row + (s.seqlen_k - s.seqlen_q) + 1);
}

}  // namespace

Status validate_io_shape(const IoShape& s) {
  auto positive = [](const char* name, int64_t v) -> Status {
    if (v >= 1) return Status::Ok();
    return Status::Invalid(std::string("argument '") + name + "': is " + std::to_string(v) + "; expected >= 1");
  };
  Status st;
  if (!(st = positive("batch", s.batch)).ok()) return st;
  if (!(st = positive("nheads", s.nheads)).ok()) return st;
  if (!(st = positive("seqlen_q", s.seqlen_q)).ok()) return st;
  if (!(st = positive("seqlen_k", s.seqlen_k)).ok()) return st;
  if (!(st = positive("headdim", s.headdim)).ok()) return st;
  if (!(st = positive("element_bytes", s.element_bytes)).ok()) return st;
  if (!(st = positive("block_q", s.block_q)).ok()) return st;
  return positive("block_k", s.block_k);
}

IoTraffic count_naive_io(const IoShape& s) {
  const int64_t e = s.element_bytes, d = s.headdim;
  IoTraffic t;
  // Kernel 1, S = Q K^T: K stays resident, each query row streams in and its score row out.
  t.read_bytes += s.seqlen_k * d * e;
  for (int64_t i = 0; i < s.seqlen_q; ++i) {
    t.read_bytes += d * e;
    t.write_bytes += s.seqlen_k * e;
  }
  // Kernel 2, P = softmax(S), row by row. The causal mask is applied here, but the full square
  // is still stored: the naive algorithm has no notion of skipping.
  for (int64_t i = 0; i < s.seqlen_q; ++i) {
    t.read_bytes += s.seqlen_k * e;
    t.write_bytes += s.seqlen_k * e;
  }
  // Kernel 3, O = P V: V stays resident, each probability row streams in and its output row out.
  t.read_bytes += s.seqlen_k * d * e;
  for (int64_t i = 0; i < s.seqlen_q; ++i) {
    t.read_bytes += s.seqlen_k * e;
    t.write_bytes += d * e;
  }
  return times_heads(t, s);
}

IoTraffic naive_io_formula(const IoShape& s) {
  const int64_t e = s.element_bytes, d = s.headdim, nq = s.seqlen_q, nk = s.seqlen_k;
  return times_heads({(nq * d + 2 * nk * d + 2 * nq * nk) * e, (2 * nq * nk + nq * d) * e}, s);
}

IoTraffic count_tiled_io(const IoShape& s) {
  const int64_t e = s.element_bytes, d = s.headdim;
  IoTraffic t;
  for (int64_t q0 = 0; q0 < s.seqlen_q; q0 += s.block_q) {
    const int64_t rows = std::min(s.block_q, s.seqlen_q - q0);
    const int64_t key_end = tile_key_end(s, q0, rows);
    if (key_end > 0) {
      t.read_bytes += rows * d * e;  // the Q tile
      for (int64_t k0 = 0; k0 < key_end; k0 += s.block_k) {
        const int64_t keys = std::min(s.block_k, s.seqlen_k - k0);
        t.read_bytes += 2 * keys * d * e;  // the K tile and the V tile
      }
    }
    t.write_bytes += rows * d * e + rows * kLseBytes;  // O tile and its logsumexp, once
  }
  return times_heads(t, s);
}

IoTraffic tiled_io_formula(const IoShape& s) {
  const int64_t e = s.element_bytes, d = s.headdim, nq = s.seqlen_q, nk = s.seqlen_k;
  const int64_t q_tiles = ceil_div(nq, s.block_q);
  const IoTraffic writes_only{0, nq * d * e + nq * kLseBytes};
  if (!s.causal) {
    return times_heads({(nq * d + 2 * nk * d * q_tiles) * e, writes_only.write_bytes}, s);
  }
  // Causal: Q tile t sees about (t + 1) * Br keys past the offset nk - nq, so the K/V rows summed
  // over tiles are the non-causal nk * Tq halved plus the diagonal tiles. Ignores Bc rounding and
  // ragged tiles; when nq > nk the first query tiles see nothing and only the last ~nk rows count.
  double kv_rows;
  if (nq <= nk) {
    kv_rows = static_cast<double>(q_tiles) * (nk - nq) + nq * (q_tiles + 1) / 2.0;
  } else {
    const int64_t active_tiles = ceil_div(nk, s.block_q);
    kv_rows = nk * (active_tiles + 1) / 2.0;
  }
  const auto kv_bytes = static_cast<int64_t>(std::llround(2.0 * kv_rows * d * e));
  return times_heads({nq * d * e + kv_bytes, writes_only.write_bytes}, s);
}

double IoReport::reduction_counted() const {
  return static_cast<double>(naive_counted.total_bytes()) / static_cast<double>(tiled_counted.total_bytes());
}

double IoReport::reduction_formula() const {
  return static_cast<double>(naive_formula.total_bytes()) / static_cast<double>(tiled_formula.total_bytes());
}

double IoReport::reduction_limit() const {
  const double limit = 2.0 * static_cast<double>(shape.block_q) / static_cast<double>(shape.headdim);
  return shape.causal ? 2.0 * limit : limit;  // causal halves the tiled traffic, not the naive
}

IoReport io_report(const IoShape& shape) {
  IoReport r;
  r.shape = shape;
  r.naive_counted = count_naive_io(shape);
  r.naive_formula = naive_io_formula(shape);
  r.tiled_counted = count_tiled_io(shape);
  r.tiled_formula = tiled_io_formula(shape);
  r.formula_exact = !shape.causal;
  return r;
}

}  // namespace flashattn

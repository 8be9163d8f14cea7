// What the CPU forward and backward both need to address a tile: where its rows start in an
// operand, and the score geometry of one of its rows for the SIMD epilogue.
#pragma once

#include <cstdint>

#include "cpu/simd/kernels.h"
#include "problem.h"

namespace flashattn {

// Address of row i (counted inside the sequence) of head h of batch b.
inline void* row_address(const Operand& op, DType dtype, int b, int64_t row0, int64_t i, int h) {
  return static_cast<char*>(op.data) + element_offset(op, b, row0, i, h) * dtype_size(dtype);
}

// A score row whose element c lies at signed distance dist0 + dist_step * c from the diagonal,
// with the problem's mask, scale and softcap and the head's ALiBi slope.
inline cpu::ScoreRow score_geometry(const AttentionProblem& p, float slope, int n_valid, int64_t dist0,
                                    float dist_step) {
  cpu::ScoreRow row;
  row.n_valid = n_valid;
  row.dist0 = dist0;
  row.dist_step = dist_step;
  row.window_left = p.mask.window_left;
  row.window_right = p.mask.window_right;
  row.scale = p.score.scale;
  row.softcap = p.score.softcap;
  row.alibi_slope = slope;
  return row;
}

}  // namespace flashattn

// The merge of the sm80 forward's key pieces (KernelParams::num_splits > 1): each piece wrote
// its rows' O normalised by its own sum, O_s, and its logsumexp lse_s (forward_kernel.cuh,
// write_piece). The row's logsumexp over all its keys is lse = log(sum_s exp(lse_s)), and its
// output the pieces' outputs weighted by their share of the row's mass:
//   O = sum_s exp(lse_s - lse) * O_s.
// A piece that saw no key (lse_s = -inf) has weight 0 and is left out (its O_s is 0, but a
// row with no key at all must give O = 0 and lse = -inf, not 0 * inf).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "cuda/common/ptx.cuh"
#include "cuda/sm80/batch_sequence.cuh"
#include "cuda/sm80/params.h"

namespace flashattn::sm80 {

// One warp per query row: the lanes share out the pieces for the lse, then the columns.
constexpr int kCombineWarps = 4;

template <typename Element>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_pieces_kernel(const KernelParams p) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i = static_cast<int>(blockIdx.x) * kCombineWarps + warp;
  const int h = blockIdx.y, b = blockIdx.z;
  const cuda::DeviceSequence seq = batch_sequence(p, b);
  if (i >= seq.len_q) return;
  const int64_t row = workspace_row(p, seq.q_row0, b, i);
  const int64_t piece_stride = static_cast<int64_t>(p.nheads_q) * p.workspace_rows;  // rows between pieces
  const float* lse_s = p.lse_pieces + static_cast<int64_t>(h) * p.workspace_rows + row;

  float top = -INFINITY;
  for (int s = lane; s < p.num_splits; s += 32) top = fmaxf(top, lse_s[s * piece_stride]);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
  float mass = 0.0f;
  if (top != -INFINITY) {
    for (int s = lane; s < p.num_splits; s += 32) {
      const float l = lse_s[s * piece_stride];
      if (l != -INFINITY) mass += __expf(l - top);
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) mass += __shfl_xor_sync(0xffffffffu, mass, offset);
  const float lse = top == -INFINITY ? -INFINITY : top + logf(mass);

  if (p.lse != nullptr && lane == 0) {
    p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + (seq.q_row0 + i) * p.lse_row_stride] = lse;
  }
  Element* out = static_cast<Element*>(p.out.data) + element_offset(p.out, b, seq.q_row0, i, h);
  const float* o_s = p.o_pieces + (static_cast<int64_t>(h) * p.workspace_rows + row) * p.headdim;
  // Column pairs: the head dim is a multiple of 8.
  for (int col = 2 * lane; col < p.headdim; col += 64) {
    float2 acc = make_float2(0.0f, 0.0f);
    if (lse != -INFINITY) {
      for (int s = 0; s < p.num_splits; ++s) {
        const float l = lse_s[s * piece_stride];
        if (l == -INFINITY) continue;
        const float weight = __expf(l - lse);
        const float2 o = *reinterpret_cast<const float2*>(o_s + s * piece_stride * p.headdim + col);
        acc.x = fmaf(weight, o.x, acc.x);
        acc.y = fmaf(weight, o.y, acc.y);
      }
    }
    *reinterpret_cast<uint32_t*>(out + col) = cuda::pack_pair<Element>(acc.x, acc.y);
  }
}

template <typename Element>
cudaError_t launch_combine_pieces(const KernelParams& p, cudaStream_t stream) {
  const dim3 grid((p.seqlen_q + kCombineWarps - 1) / kCombineWarps, p.nheads_q, p.batch);
  combine_pieces_kernel<Element><<<grid, kCombineWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashattn::sm80

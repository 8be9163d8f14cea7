// The row-wise kernels around the backward main kernel: D = rowsum(dO * O) with the dQ
// workspace zeroed before it, and the fp32 dQ workspace converted to the output dtype after it.
// One 16-byte chunk per lane (head dims up to 256 are 32 chunks). The preparation zeroes whole
// rows, which serves either dQ workspace layout (the blocked one permutes inside 8-row bands). The conversion takes one warp
// per query row; the preparation packs 32 / prepare_lanes_per_row rows into a warp, so that every
// lane loads (one row per warp left half the lanes idle at d128 and three quarters at d64, and
// the kernel took 87 us where FA2's took 68 at d128 seqlen 512 causal).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/ptx.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/sm80/batch_sequence.cuh"
#include "cuda/sm80/params.h"

namespace flashattn::sm80 {

using namespace flashattn::cuda;

constexpr int kRowsPerBlock = 8;

template <typename Element>
FA_DEV float dot8(const uint4& a, const uint4& b) {
  const Element* x = reinterpret_cast<const Element*>(&a);
  const Element* y = reinterpret_cast<const Element*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) s += to_float<Element>(x[e]) * to_float<Element>(y[e]);
  return s;
}

// Lanes per row in the preparation: the power of two that covers the row's 16-byte chunks.
inline __host__ __device__ int prepare_lanes_per_row(int headdim_chunks) {
  int lanes = 1;
  while (lanes < headdim_chunks) lanes *= 2;
  return lanes;
}

// Query rows per block of the preparation (kRowsPerBlock warps).
inline __host__ __device__ int prepare_rows_per_block(int headdim_chunks) {
  return kRowsPerBlock * (32 / prepare_lanes_per_row(headdim_chunks));
}

template <typename Element>
__global__ void __launch_bounds__(kRowsPerBlock * 32) backward_prepare_kernel(const KernelParams p) {
  const int h = blockIdx.y, b = blockIdx.z;
  const int lanes = prepare_lanes_per_row(p.headdim_chunks);
  const int lane = threadIdx.x % 32;
  const int sub = lane & (lanes - 1);  // chunk of this lane in its row
  const int i = blockIdx.x * prepare_rows_per_block(p.headdim_chunks) + (threadIdx.x / lanes);
  const DeviceSequence seq = batch_sequence(p, b);
  const bool row_valid = i < seq.len_q;
  float partial = 0.0f;
  if (row_valid && sub < p.headdim_chunks) {
    const Element* o = static_cast<const Element*>(p.out.data) + b * p.out.batch_stride +
                       (seq.q_row0 + i) * p.out.row_stride + h * p.out.head_stride + sub * 8;
    const Element* dout = static_cast<const Element*>(p.dout.data) + b * p.dout.batch_stride +
                          (seq.q_row0 + i) * p.dout.row_stride + h * p.dout.head_stride + sub * 8;
    partial = dot8<Element>(*reinterpret_cast<const uint4*>(o), *reinterpret_cast<const uint4*>(dout));
  }
  // The whole warp shuffles (rows of a warp end at different lengths); offsets below `lanes`
  // stay inside the row's lane group.
  for (int offset = lanes / 2; offset > 0; offset /= 2) partial += __shfl_xor_sync(0xffffffffu, partial, offset);
  if (!row_valid) return;
  const int64_t row = static_cast<int64_t>(h) * p.total_q + workspace_row(p, seq.q_row0, b, i);
  if (sub == 0) p.dsum[row] = partial;
  float4* dq = reinterpret_cast<float4*>(p.dq_accum + row * p.headdim);
  for (int c = sub; c < p.headdim / 4; c += lanes) dq[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

template <typename Element>
__global__ void __launch_bounds__(kRowsPerBlock * 32) backward_convert_dq_kernel(const KernelParams p) {
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x % 32;
  const int i = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const DeviceSequence seq = batch_sequence(p, b);
  if (i >= seq.len_q || lane >= p.headdim_chunks) return;
  const int64_t row = static_cast<int64_t>(h) * p.total_q + workspace_row(p, seq.q_row0, b, i);
  // Blocked layout (see KernelParams::dq_blocked): row i's 8 columns of chunk `lane` are row i % 8
  // of the band's column block `lane`, 64 floats per block.
  const int in_band = i & 7;
  const bool blocked = p.dq_blocked && i - in_band + 8 <= seq.len_q;
  const int chunk = p.dq_chunks_rotated ? lane ^ int(row & 3) : lane;
  const int64_t offset = blocked ? (row - in_band) * p.headdim + lane * 64 + in_band * 8 : row * p.headdim + chunk * 8;
  const float4* acc = reinterpret_cast<const float4*>(p.dq_accum + offset);
  const float4 lo = acc[0], hi = acc[1];
  uint4 packed;
  packed.x = pack_pair<Element>(lo.x, lo.y);
  packed.y = pack_pair<Element>(lo.z, lo.w);
  packed.z = pack_pair<Element>(hi.x, hi.y);
  packed.w = pack_pair<Element>(hi.z, hi.w);
  Element* dq = static_cast<Element*>(p.dq.data) + b * p.dq.batch_stride + (seq.q_row0 + i) * p.dq.row_stride +
                h * p.dq.head_stride + lane * 8;
  *reinterpret_cast<uint4*>(dq) = packed;
}

// The preparation over every (query row block, head, batch): D and the zeroed dQ workspace.
template <typename Element>
cudaError_t launch_prepare(const KernelParams& p, cudaStream_t stream) {
  if (p.seqlen_q <= 0) return cudaSuccess;
  const int rows = prepare_rows_per_block(p.headdim_chunks);
  const dim3 grid((p.seqlen_q + rows - 1) / rows, p.nheads_q, p.batch);
  backward_prepare_kernel<Element><<<grid, kRowsPerBlock * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

// The dQ workspace (layout p.dq_blocked) converted into dq.
template <typename Element>
cudaError_t launch_convert_dq(const KernelParams& p, cudaStream_t stream) {
  if (p.seqlen_q <= 0) return cudaSuccess;
  const dim3 grid((p.seqlen_q + kRowsPerBlock - 1) / kRowsPerBlock, p.nheads_q, p.batch);
  backward_convert_dq_kernel<Element><<<grid, kRowsPerBlock * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashattn::sm80

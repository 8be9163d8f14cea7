// Launch sequence of the backward: prepare (D, zeroed dQ workspace), main kernel, dQ conversion.
// The workspace pointers in `p` are set by the caller.
#pragma once

#include <cuda_runtime.h>

#include "cuda/sm80/backward_kernel.cuh"
#include "cuda/sm80/backward_rows.cuh"
#include "cuda/sm80/kernel_registry.h"

namespace flashattn::sm80 {

// Grid order of the main kernel. Under a causal mask (without a left window) key tile n sees
// the query tiles from its diagonal to the end, so blocks of small n carry the most work. With
// the key tile fastest (the default order, also FA2's) the heaviest block of the last (head,
// batch) starts near the end of the grid and runs alone: a tail of up to one heavy block. Key tile
// slowest launches every (head, batch)'s heavy blocks first and ends on the short ones. Measured
// (device calls 8-9, same-call A/B): d128 causal 8k +5%, 2k +4%; d256 causal 2k +3%; but at 512
// d64 -14% and d256 -10%, and d64 (128-row query tiles, twice the heads) -7% even at 2k. Hence
// head dims above 64 (64-row query tiles) and seqlen_k >= 2048 only.
template <int kHeadDim>
bool key_tile_major_pays(const KernelParams& p) {
  return kHeadDim > 64 && p.mask.right_bound_only() && p.seqlen_k >= 2048;
}

template <typename Element, int kHeadDim, int kVariant = 0>
cudaError_t launch_backward_variant(const KernelParams& p, cudaStream_t stream) {
  using Cfg = BackwardConfig<kHeadDim, kVariant>;
  KernelParams kp = p;
  kp.dq_blocked = Cfg::kBlockedDq;
  cudaError_t err = launch_prepare<Element>(p, stream);
  if (err != cudaSuccess) return err;
  if (p.seqlen_k > 0) {
    auto kernel = backward_kernel<Element, kHeadDim, kVariant>;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
    if (err != cudaSuccess) return err;
    const int num_n = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    kp.key_tile_major = (Cfg::kForceKeyTileMajor || key_tile_major_pays<kHeadDim>(p)) && num_n <= 65535;
    const dim3 grid = kp.key_tile_major ? dim3(p.nheads_kv, p.batch, num_n) : dim3(num_n, p.nheads_kv, p.batch);
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(kp);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return launch_convert_dq<Element>(kp, stream);
}

template <typename Element, int kHeadDim>
cudaError_t launch_backward(const KernelParams& p, cudaStream_t stream) {
  return launch_backward_variant<Element, kHeadDim, 0>(p, stream);
}

}  // namespace flashattn::sm80

namespace flashattn::sm80 {
// The dispatch sizes the deterministic-mode dQ semaphores with kBackwardBlockM rows per query
// tile; kernels with larger tiles use a prefix of each (batch, head)'s counters.
static_assert(BackwardConfig<32>::kBlockM % kBackwardBlockM == 0 && BackwardConfig<64>::kBlockM % kBackwardBlockM == 0 &&
                  BackwardConfig<128>::kBlockM == kBackwardBlockM && BackwardConfig<256>::kBlockM == kBackwardBlockM,
              "the dispatch sizes the dQ semaphores with kBackwardBlockM");
}  // namespace flashattn::sm80

// Launch sequence of the backward: prepare (D, zeroed dQ workspace), main kernel, dQ conversion.
// The workspace pointers in `p` are set by the caller.
#pragma once

#include <cuda_runtime.h>

#include "cuda/sm80/backward_kernel.cuh"
#include "cuda/sm80/backward_rows.cuh"
#include "cuda/sm80/kernel_registry.h"

namespace flashattn::sm80 {

template <typename Element, int kHeadDim, int kVariant = 0>
cudaError_t launch_backward_variant(const KernelParams& p, cudaStream_t stream) {
  using Cfg = BackwardConfig<kHeadDim, kVariant>;
  const dim3 row_grid((p.seqlen_q + kRowsPerBlock - 1) / kRowsPerBlock, p.nheads_q, p.batch);
  if (p.seqlen_q > 0) {
    backward_prepare_kernel<Element><<<row_grid, kRowsPerBlock * 32, 0, stream>>>(p);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (p.seqlen_k > 0) {
    auto kernel = backward_kernel<Element, kHeadDim, kVariant>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
    if (err != cudaSuccess) return err;
    const int num_n = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    const dim3 grid = Cfg::kKeyTileMajor ? dim3(p.nheads_kv, p.batch, num_n) : dim3(num_n, p.nheads_kv, p.batch);
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (p.seqlen_q > 0) {
    backward_convert_dq_kernel<Element><<<row_grid, kRowsPerBlock * 32, 0, stream>>>(p);
    return cudaGetLastError();
  }
  return cudaSuccess;
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

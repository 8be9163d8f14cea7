// The launch templates of the sm80 kernel set, declared without their kernels: each
// instantiation lives in its own generated file under src/cuda/instantiations/, and which ones
// exist is told to the dispatch by FLASHATTN_SM80_HDIM_<d> and FLASHATTN_SM80_<DTYPE> (cmake/sm80.cmake).
#pragma once

#include <cuda_runtime.h>

#include "cuda/sm80/params.h"

namespace flashattn::sm80 {

template <typename Element, int kHeadDim>
cudaError_t launch_forward(const KernelParams& p, cudaStream_t stream);

template <typename Element, int kHeadDim>
cudaError_t launch_backward(const KernelParams& p, cudaStream_t stream);

// Query tile of the backward (the deterministic dQ semaphores count one per query tile).
constexpr int kBackwardBlockM = 64;

// The forward's query tile height and key tile width at head dim d (ForwardConfig, whose
// comments say why), for the host's grid and key-split arithmetic too.
constexpr int forward_block_m(int d, bool key_splits = false) { return d >= 192 || key_splits ? 64 : 128; }
constexpr int forward_block_n(int d) { return d <= 64 ? 128 : 64; }

}  // namespace flashattn::sm80

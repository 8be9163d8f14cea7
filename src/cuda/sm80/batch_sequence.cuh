// The sequence of batch entry b as an sm80 kernel's parameters describe it (fixed or variable
// length, seqused): one spelling of the call for the forward, the backward and its row kernels.
#pragma once

#include "cuda/common/sequence.cuh"
#include "cuda/sm80/params.h"

namespace flashattn::sm80 {

FA_DEV cuda::DeviceSequence batch_sequence(const KernelParams& p, int b) {
  return cuda::device_sequence(p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_q, p.seqused_k, p.seqlen_q, p.seqlen_k,
                               p.total_q, p.cu_rows_k, b);
}

}  // namespace flashattn::sm80

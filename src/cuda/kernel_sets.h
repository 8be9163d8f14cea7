// The kernel sets the CUDA runtime layer dispatches to. Each set says whether it can run a
// problem (naming the missing option when not) and runs it on p.stream.
#pragma once

#include "problem.h"

namespace flashattn {

// FlashAttention-2 kernels for sm80 and newer (src/cuda/sm80/).
Status sm80_supports_forward(const AttentionProblem& p);
Status sm80_supports_backward(const AttentionProblem& p);
Status sm80_forward(const AttentionProblem& p);
Status sm80_backward(const AttentionProblem& p);

// FlashAttention-3 forward for sm90 (src/cuda/sm90/).
Status sm90_supports_forward(const AttentionProblem& p);
Status sm90_forward(const AttentionProblem& p);

}  // namespace flashattn

// The kernel sets the CUDA runtime layer dispatches to. Each set says whether it can run a
// problem (naming the missing option when not) and runs it on p.stream.
#pragma once

#include <cstdint>

#include "problem.h"

namespace flashattn {

// FlashAttention-2 kernels for sm80 and newer (src/cuda/sm80/).
Status sm80_supports_forward(const AttentionProblem& p);
Status sm80_supports_backward(const AttentionProblem& p);
Status sm80_forward(const AttentionProblem& p);
Status sm80_backward(const AttentionProblem& p);
// The sm80 backward's workspace, preparation (D = rowsum(dO * O), zeroed fp32 dQ workspace) and
// dQ conversion around another main kernel (the sm90 backward), which adds dQ into dq_accum,
// row-major (nheads_q, total_q, headdim), with each row's 8-float chunks rotated where
// dq_chunks_rotated (chunk c of row r at c ^ (r % 4), r counted over all heads' rows), and reads
// D from dsum (nheads_q, total_q).
using BackwardMain = Status (*)(const AttentionProblem& p, float* dq_accum, const float* dsum);
Status sm80_backward_around(const AttentionProblem& p, BackwardMain main, bool dq_chunks_rotated);

// FlashAttention-3 forward for sm90 (src/cuda/sm90/).
Status sm90_supports_forward(const AttentionProblem& p);
Status sm90_forward(const AttentionProblem& p);
// FlashAttention-3 backward for sm90 (src/cuda/sm90/sm90_backward.cu): head dims 64, 128 and 256,
// fixed or variable length (no seqused, no rows outside the sequences), masks and softcap without
// ALiBi, not deterministic; the sm80 backward takes the rest.
Status sm90_supports_backward(const AttentionProblem& p);
Status sm90_backward(const AttentionProblem& p);
// The rule (of the problems it supports): head dims 64, 128 and 256, where it beats the sm80 backward.
bool sm90_picks_backward(const AttentionProblem& p);
// Launches of the sm90 backward so far in this process (tests check that the API took it).
int64_t sm90_backward_launches();

}  // namespace flashattn

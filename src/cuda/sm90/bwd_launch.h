// Host launch of the sm90 backward main kernel for one configuration: BackwardParams from the
// problem, the four tensor maps, one CTA per (key block, KV head, batch). Instantiated once per
// (dtype, head dim) in src/cuda/instantiations/sm90_bwd_*.cu.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/sm90/bwd_kernel.h"
#include "cuda/sm90/tensor_map.h"
#include "problem.h"

namespace flashattn {
namespace sm90 {

template <class Cfg>
Status launch_backward_main(const AttentionProblem& pb, float* dq_accum, const float* dsum) {
  BackwardParams kp{};
  const bool varlen = pb.varlen();
  const int64_t rows_q = pb.tensor_rows_q(), rows_k = pb.tensor_rows_k();
  Status s = encode_operand_map(&kp.tma_q, pb.q, pb.dtype, Cfg::kHeadDim, rows_q, pb.nheads_q, pb.batch, varlen,
                                Cfg::kBlockM);
  if (s.ok()) s = encode_operand_map(&kp.tma_do, pb.dout, pb.dtype, Cfg::kHeadDim, rows_q, pb.nheads_q, pb.batch,
                                     varlen, Cfg::kBlockM);
  if (s.ok()) s = encode_operand_map(&kp.tma_k, pb.k, pb.dtype, Cfg::kHeadDim, rows_k, pb.nheads_kv, pb.batch,
                                     varlen, Cfg::kBlockN);
  if (s.ok()) s = encode_operand_map(&kp.tma_v, pb.v, pb.dtype, Cfg::kHeadDim, rows_k, pb.nheads_kv, pb.batch,
                                     varlen, Cfg::kBlockN);
  if (!s.ok()) return s;
  kp.cu_seqlens_q = pb.cu_seqlens_q;
  kp.cu_seqlens_k = pb.cu_seqlens_k;
  kp.total_q = pb.total_q;
  kp.lse = pb.lse;
  kp.lse_batch_stride = pb.lse_batch_stride;
  kp.lse_head_stride = pb.lse_head_stride;
  kp.lse_row_stride = pb.lse_row_stride;
  kp.dsum = dsum;
  kp.dq_accum = dq_accum;
  kp.dk = pb.dk;
  kp.dv = pb.dv;
  kp.heads_per_kv = pb.heads_per_kv();
  kp.seqlen_q = pb.seqlen_q;
  kp.seqlen_k = pb.seqlen_k;
  kp.scale = pb.score.scale;
  kp.score_pre = pb.score.tanh_input_scale();
  kp.score_log2 = pb.score.log2_factor();
  kp.window_left = pb.mask.window_left;
  kp.window_right = pb.mask.window_right;
  const int num_n = (pb.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if (num_n == 0 || pb.batch == 0 || pb.nheads_kv == 0) return Status::Ok();
  auto kernel = backward_kernel<Cfg>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err != cudaSuccess) return Status::Runtime(std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(err));
  kernel<<<dim3(num_n, pb.nheads_kv, pb.batch), Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(pb.stream)>>>(kp);
  err = cudaGetLastError();
  if (err != cudaSuccess) return Status::Runtime(std::string("sm90 backward launch: ") + cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace sm90
}  // namespace flashattn

// The sm90 backward's entry points: which problems it takes (the sm80 backward takes the others)
// and the switch from run-time dtype / head dim to a compiled configuration. The workspace, the
// preparation (D) and the dQ conversion are the sm80 backward's (sm80_backward_around).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <string>
#include <type_traits>

#include "cuda/kernel_sets.h"
#include "cuda/sm90/bwd_config.h"
#include "cuda/sm90/head_dims.h"
#include "cuda/sm90/operand_checks.h"

namespace flashattn {
namespace sm90 {
template <class Cfg>
Status launch_backward_main(const AttentionProblem& pb, float* dq_accum, const float* dsum);
}  // namespace sm90

namespace {

// run = false: whether a configuration is compiled for the problem's dtype and head dim. The cases
// this build left out are discarded (if constexpr on a condition that depends on Element).
template <typename Element>
Status dispatch_head_dim(const AttentionProblem& p, bool run, float* dq_accum, const float* dsum) {
  constexpr bool kBf16 = std::is_same<Element, __nv_bfloat16>::value;
  (void)kBf16;
#define FLASHATTN_SM90_BWD_CASE(HD)                                                                 \
  if constexpr (FLASHATTN_SM90_BUILT(kBf16, HD)) {                                                 \
    if (p.headdim == HD) {                                                                          \
      return run ? sm90::launch_backward_main<sm90::BackwardConfig<HD, Element>>(p, dq_accum, dsum) \
                 : Status::Ok();                                                                    \
    }                                                                                               \
  }
  FLASHATTN_SM90_BACKWARD_HEAD_DIMS(FLASHATTN_SM90_BWD_CASE)
#undef FLASHATTN_SM90_BWD_CASE
  return Status::Unsupported("the sm90 backward kernel is built for bf16 / fp16 at head dims " +
                             sm90::head_dims_text(sm90::kBackwardHeadDims) +
                             " (those of them FLASHATTN_HDIMS / FLASHATTN_DTYPES select); not " + std::string(dtype_name(p.dtype)) +
                             " at head dim " + std::to_string(p.headdim));
}

Status dispatch(const AttentionProblem& p, bool run, float* dq_accum, const float* dsum) {
  if (p.dtype == DType::kBFloat16) return dispatch_head_dim<__nv_bfloat16>(p, run, dq_accum, dsum);
  if (p.dtype == DType::kFloat16) return dispatch_head_dim<__half>(p, run, dq_accum, dsum);
  return Status::Unsupported(std::string("the sm90 backward kernel takes bf16 or fp16, not ") + dtype_name(p.dtype));
}

Status run_main(const AttentionProblem& p, float* dq_accum, const float* dsum) { return dispatch(p, true, dq_accum, dsum); }

std::atomic<int64_t> g_launches{0};

}  // namespace

Status sm90_supports_backward(const AttentionProblem& p) {
  constexpr const char* kBwd = "the sm90 backward kernel";
  if (p.seqused_q != nullptr || p.seqused_k != nullptr) {
    return Status::Unsupported("the sm90 backward kernel does not take seqused");
  }
  // Its TMA loads of a sequence's last blocks read the next rows: they must belong to a sequence
  // (finite values) or lie past the tensor (zero fill), never be rows no sequence owns.
  if (p.varlen() && (p.q_rows_past_last_sequence || p.kv_rows_past_last_sequence)) {
    return Status::Unsupported("the sm90 backward kernel takes variable length only where every row of q and k "
                               "belongs to a sequence (cu_seqlens readable, no rows past the last sequence)");
  }
  if (p.alibi_slopes != nullptr || !(p.score.scale > 0.0f)) {
    return Status::Unsupported("the sm90 backward kernel takes a positive softmax_scale and no ALiBi");
  }
  if (p.deterministic) return Status::Unsupported("the sm90 backward kernel has no deterministic mode");
  Status s = dispatch(p, false, nullptr, nullptr);
  if (!s.ok()) return s;
  const int eb = dtype_size(p.dtype);
  const bool varlen = p.varlen();
  const int64_t rows_q = p.tensor_rows_q(), rows_k = p.tensor_rows_k();
  // A tensor map needs at least one row (cuTensorMapEncodeTiled fails on none): q or k without
  // rows, such as every sequence empty, is the sm80 backward's (which zeroes dK and dV).
  if (rows_q == 0 || rows_k == 0) {
    return Status::Unsupported("the sm90 backward kernel needs at least one row of q and of k");
  }
  const struct {
    const char* name;
    const Operand& op;
    int64_t rows;
    int heads;
  } operands[] = {{"q", p.q, rows_q, p.nheads_q},     {"k", p.k, rows_k, p.nheads_kv},
                  {"v", p.v, rows_k, p.nheads_kv},    {"dout", p.dout, rows_q, p.nheads_q},
                  {"dk", p.dk, rows_k, p.nheads_kv},  {"dv", p.dv, rows_k, p.nheads_kv}};
  for (const auto& o : operands) {
    if (!(s = sm90::check_strides(kBwd, o.name, o.op, o.rows, o.heads, p.batch, varlen, eb)).ok()) return s;
  }
  if (rows_q > (int64_t(1) << 31) - 256 || rows_k > (int64_t(1) << 31) - 256 || p.batch > 65535 ||
      p.nheads_kv > 65535) {
    return Status::Unsupported("the sm90 backward kernel's grid and 32-bit TMA coordinates do not cover this problem");
  }
  return Status::Ok();
}

Status sm90_backward(const AttentionProblem& p) {
  Status s = sm90_supports_backward(p);
  if (!s.ok()) return s;
#if defined(FLASHATTN_WITH_SM80)
  g_launches.fetch_add(1, std::memory_order_relaxed);
  return sm80_backward_around(p, &run_main, /*dq_chunks_rotated=*/true);
#else
  return Status::Unsupported("the sm90 backward kernel uses the sm80 backward's preparation and dQ conversion, "
                             "which this build lacks (FLASHATTN_CUDA_ARCHS without 80)");
#endif
}

// Every head dim it has: 1.1-1.5x the sm80 backward at 64 and 128 (docs/perf.md, sm90 backward v3
// and v5), 1.25-1.55x at 256 (session 8, work-next).
bool sm90_picks_backward(const AttentionProblem& p) {
  return p.headdim == 64 || p.headdim == 128 || p.headdim == 256;
}

int64_t sm90_backward_launches() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace flashattn

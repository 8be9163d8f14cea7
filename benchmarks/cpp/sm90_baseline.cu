// An older sm90 kernel compiled beside the current one, so flashattn_sm90_variants can time both
// in one process on the same inputs. Built only when FLASHATTN_SM90_BASELINE names a folder that
// holds cuda/sm90/ of the older version (e.g. `git archive main src/cuda/sm90 | tar -x
// --strip-components=1 -C DIR`); that folder comes first on the include path, and the namespace
// is renamed so the two kernels do not collide. The rest of src/ (problem.h, ...) is current.
#define sm90 sm90_baseline
#include "cuda/sm90/launch.h"
#include "cuda/sm90/tensor_map.cu"
// The launch's tail workspace (a baseline from session 32 on); its launch counter outside the
// namespace renamed as well.
#define sm90_split_tail_launches sm90_baseline_split_tail_launches
#include "cuda/sm90/split_tail.cu"
#undef sm90_split_tail_launches
#undef sm90

namespace flashattn {

Status sm90_baseline_forward_bf16(const AttentionProblem& p) {
  switch (p.headdim) {
    case 64: return sm90_baseline::launch_forward<sm90_baseline::KernelConfig<64, __nv_bfloat16>>(p);
    case 128: return sm90_baseline::launch_forward<sm90_baseline::KernelConfig<128, __nv_bfloat16>>(p);
    case 256: return sm90_baseline::launch_forward<sm90_baseline::KernelConfig<256, __nv_bfloat16>>(p);
    default: return Status::Unsupported("baseline: head dim not built");
  }
}

// The static schedule's kernel (the API's for causal d128 and all of d256).
Status sm90_baseline_forward_static_bf16(const AttentionProblem& p) {
  switch (p.headdim) {
    case 64: return sm90_baseline::launch_forward<sm90_baseline::StaticScheduleConfig<64, __nv_bfloat16>>(p);
    case 128: return sm90_baseline::launch_forward<sm90_baseline::StaticScheduleConfig<128, __nv_bfloat16>>(p);
    case 256: return sm90_baseline::launch_forward<sm90_baseline::StaticScheduleConfig<256, __nv_bfloat16>>(p);
    default: return Status::Unsupported("baseline: head dim not built");
  }
}

// The cluster pairs (the API's for unmasked d128 rows from 2048 keys).
Status sm90_baseline_forward_cluster_bf16(const AttentionProblem& p) {
  if (p.headdim != 128) return Status::Unsupported("baseline: cluster pairs at head dim 128 only");
  return sm90_baseline::launch_forward<sm90_baseline::ClusterPairsConfig<128, __nv_bfloat16>>(p);
}

}  // namespace flashattn

// The sliced decode kernel's launch (sliced_decode.h): the packed kernel's parameters with
// 16-row tiles, its own key splits, and the packed kernel's combine kernel for split tiles.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/sm90/launch.h"
#include "cuda/sm90/sliced_decode.h"

namespace flashattn {
namespace sm90 {

template <int HeadDim, typename Element>
Status launch_sliced_decode(const AttentionProblem& pb) {
  using Cfg = SlicedDecodeConfig<HeadDim, Element>;
  using Packed = PackGqaConfig<HeadDim, Element>;
  // Everything but the tiles as the packed kernel would run pb: pointers, strides, lengths,
  // masks, pages (whose 128-key blocks are this kernel's too).
  static_assert(Packed::kBlockN == Cfg::kBlockN, "pages and pieces count the packed kernel's blocks");
  KernelParams kp;
  int sms = 0;
  Status filled = fill_params<Packed>(pb, kp, sms);
  if (!filled.ok() || kp.num_tiles == 0) return filled;
  const int group = pb.heads_per_kv();
  if (group < 1 || int64_t(pb.seqlen_q) * group > Cfg::kBlockM) {
    return Status::Unsupported("the sm90 sliced decode kernel takes at most " + std::to_string(Cfg::kBlockM) +
                               " packed rows (seqlen_q x query heads per KV head), not " +
                               std::to_string(int64_t(pb.seqlen_q) * group));
  }
  kp.pack_rows = Cfg::kBlockM / group;
  kp.num_m_blocks = (pb.seqlen_q + kp.pack_rows - 1) / kp.pack_rows;
  kp.num_tiles = kp.num_m_blocks * pb.batch * pb.nheads_kv;
  kp.longest_first = 0;  // tile_coord_packed's plain numbering: (m block, kv head, batch)
  kp.div_m_blocks = FastDivisor::make(uint32_t(kp.num_m_blocks));

  // Pieces: the caller's or FLASHATTN_SM90_KEY_SPLITS (key_splits_asked, as for the packed
  // kernel), else enough for the CTAs the SMs hold (sm90_sliced_decode_splits).
  const int key_blocks = sm90_visible_key_blocks(pb, Cfg::kBlockN);
  const size_t piece_bytes = size_t(kp.num_tiles) * PieceSlot<Cfg::kHeadDim>::kBytes;
  const int splits = key_splits_asked(pb, sm90_sliced_decode_splits(kp.num_tiles, Cfg::kCtasPerSm * sms, key_blocks),
                                      key_blocks, piece_bytes);
  CapturedWorkspaces captured;
  kp.key_splits = 1;
  if (splits >= 2 && int64_t(kp.num_tiles) * splits < (int64_t(1) << 31)) {
    int* counters = nullptr;
    float* slots = nullptr;
    // No counters: the combine kernel merges every split tile (one int keeps the shared helper's
    // contract of a non-null pair where there is a workspace).
    Status w = split_tail_workspace(pb.device_index, pb.stream, sizeof(int), piece_bytes * splits, captured, &counters,
                                    &slots);
    if (!w.ok()) return w;
    if (counters != nullptr) {
      kp.key_splits = splits;
      kp.split_partials = slots;
      kp.split_combine = 1;
    }
  }
  kp.div_key_splits = FastDivisor::make(uint32_t(kp.key_splits));

  auto kernel = sliced_decode_kernel<Cfg>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  // Room for the CTAs an SM holds: the driver otherwise may size the carveout for one.
  if (err == cudaSuccess) err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
  if (err != cudaSuccess) return Status::Runtime(std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(err));
  const int64_t work = int64_t(kp.num_tiles) * kp.key_splits;
  err = launch_dependent(kernel, dim3(unsigned(work)), dim3(Cfg::kThreads), Cfg::kSmemBytes, pb.stream,
                         programmatic_launch_allowed(), kp);
  const cudaError_t last = cudaGetLastError();
  if (err == cudaSuccess) err = last;
  if (err == cudaSuccess && kp.key_splits > 1) {
    // The combine kernel counts work indices as the packed kernel's launch leaves them.
    KernelParams combined = kp;
    combined.num_tiles = int(work);
    err = launch_combine_kernel<Cfg>(combined, pb.stream);
    if (err == cudaSuccess) count_split_combine_launch();
  }
  if (err != cudaSuccess) return Status::Runtime(std::string("sm90 sliced decode launch: ") + cudaGetErrorString(err));
  Status freed = captured.free_after_launch();
  if (!freed.ok()) return freed;
  if (kp.key_splits > 1) count_key_split_launch();
  return Status::Ok();
}

#if FLASHATTN_SM90_BF16_HDIM64
template Status launch_sliced_decode<64, __nv_bfloat16>(const AttentionProblem&);
#endif
#if FLASHATTN_SM90_FP16_HDIM64
template Status launch_sliced_decode<64, __half>(const AttentionProblem&);
#endif
#if FLASHATTN_SM90_BF16_HDIM128
template Status launch_sliced_decode<128, __nv_bfloat16>(const AttentionProblem&);
#endif
#if FLASHATTN_SM90_FP16_HDIM128
template Status launch_sliced_decode<128, __half>(const AttentionProblem&);
#endif

}  // namespace sm90
}  // namespace flashattn

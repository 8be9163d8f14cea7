// Host launch of one kernel configuration: fills KernelParams from the problem, encodes the tensor
// maps and starts a persistent grid of at most one CTA per SM. Included only by the generated
// instantiation files (one per dtype and head dim).
//
// In builds with FLASHATTN_SM90_PDL (CMake option, on by default since session 74) the forward
// kernel goes out as a programmatic dependent of whatever kernel precedes it in the stream
// (programmatic_launch_allowed): its CTAs may be placed while that kernel's last ones finish, and
// each thread waits in forward_kernel (wait_for_prerequisite_grids) for that kernel's end and its
// writes before touching global memory. Decode steps and short rows, whose kernels take tens of
// microseconds, otherwise pay the gap between two kernels in full.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda/sm90/kernel.h"
#include "cuda/sm90/kernel_choice.h"
#include "cuda/sm90/split_combine.h"
#include "cuda/sm90/split_keys.h"
#include "cuda/sm90/split_tail.h"
#include "cuda/sm90/tensor_map.h"
#include "env_switch.h"

namespace flashattn {
namespace sm90 {

namespace {
// In builds with FLASHATTN_SM90_PDL: FLASHATTN_SM90_PDL=0 launches the forward kernel as an
// ordinary one (read at every launch, so that one process can time both); anything else, or
// unset, as a programmatic dependent. Other builds always launch ordinarily (the kernel does not
// wait there).
bool programmatic_launch_allowed() {
#ifdef FLASHATTN_SM90_PDL
  return env_switch_on("FLASHATTN_SM90_PDL");
#else
  return false;
#endif
}

// One counter slot per launch of a dynamically scheduled kernel (tile_scheduler.h).
int next_counter_slot() {
  static std::atomic<unsigned> launches{0};
  return int(launches.fetch_add(1, std::memory_order_relaxed) % kCounterSlots);
}

// A positive whole number of heads a causal group in FLASHATTN_SM90_CAUSAL_GROUPS, else 0 (unset,
// a name, or anything else).
int forced_group_heads(const char* value) {
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long heads = std::strtol(value, &end, 10);
  return *end == '\0' && heads > 0 && heads <= (1L << 30) ? int(heads) : 0;
}

// (batch, head) pairs per causal scheduling group (tile_scheduler.h, longest_first_in_l2_group):
// as many as have their K and V in half the L2 together. A query head's share is its KV head's
// bytes over the heads that read them; with GQA packing a tile's head is the KV head itself.
int l2_group_heads(const AttentionProblem& pb, bool packed, int l2_bytes) {
  const int64_t kv_head_bytes = 2 * int64_t(std::max(pb.seqlen_k, 1)) * pb.headdim * 2;
  const int64_t head_bytes = packed ? kv_head_bytes : std::max<int64_t>(kv_head_bytes / pb.heads_per_kv(), 1);
  const int64_t heads = int64_t(pb.batch) * (packed ? pb.nheads_kv : pb.nheads_q);
  return int(std::clamp<int64_t>(int64_t(l2_bytes) / 2 / head_bytes, 1, std::max<int64_t>(heads, 1)));
}

// The causal groups of a launch (kernel_choice.h gives the rule and the measurements): one head
// per group at head dim 128 up to kSm90OneHeadGroupMaxKeys keys and above head dim 128 up to
// kSm90WideOneHeadGroupMaxKeys, L2-sized groups at head dim 64 and with GQA packing up to
// kSm90L2GroupMaxKeys keys (where Cfg::kCausalL2Groups allows), and one head per group in d64's
// tall tiles at any length; else one group of all heads.
// FLASHATTN_SM90_CAUSAL_GROUPS=all|l2|one|N overrides the rule (N: that many heads a group, at
// most all; read at every launch, for benchmarks). Any other value leaves the rule in charge.
template <class Cfg>
int causal_group_heads(const AttentionProblem& pb, int l2_bytes) {
  const int all = pb.batch * (Cfg::kPackGqa ? pb.nheads_kv : pb.nheads_q);
  const char* forced = std::getenv("FLASHATTN_SM90_CAUSAL_GROUPS");
  if (forced != nullptr && std::strcmp(forced, "all") == 0) return all;
  if (forced != nullptr && std::strcmp(forced, "one") == 0) return 1;
  if (forced != nullptr && std::strcmp(forced, "l2") == 0) return l2_group_heads(pb, Cfg::kPackGqa, l2_bytes);
  const int forced_heads = forced_group_heads(forced);
  if (forced_heads > 0) return std::min(forced_heads, std::max(all, 1));
  if (!Cfg::kCausalL2Groups) return all;
  if (!Cfg::kPackGqa && Cfg::kHeadDim == 64 && Cfg::kConsumerWarpgroups == 4) return 1;  // d64's tall tiles
  if (!Cfg::kPackGqa && Cfg::kHeadDim > 64 && Cfg::kHeadDim <= 128) {
    return pb.seqlen_k <= kSm90OneHeadGroupMaxKeys ? 1 : all;
  }
  if (!Cfg::kPackGqa && Cfg::kHeadDim > 128) return pb.seqlen_k <= kSm90WideOneHeadGroupMaxKeys ? 1 : all;
  const bool l2 = !Cfg::kPackGqa || pb.seqlen_k <= kSm90L2GroupMaxKeys;
  return l2 ? l2_group_heads(pb, Cfg::kPackGqa, l2_bytes) : all;
}

// Whether Cfg's launch runs the tail kernel (KernelConfig::kHasTailKernel): the library's static
// and cluster-pair configurations only, and the harness's timeline of them (kTailTimeline). The
// harness's other forms of them (derived configurations) run whole tiles, so that each does not
// build a second kernel (nor need the tail's assumptions: its O whole at each piece's end, rows
// summed by adds).
template <class Cfg>
constexpr bool kLaunchesTailKernel =
    Cfg::kHasTailKernel &&
    (std::is_same<Cfg, StaticScheduleConfig<Cfg::kHeadDim, typename Cfg::Element>>::value ||
     std::is_same<Cfg, ClusterPairsConfig<Cfg::kHeadDim, typename Cfg::Element>>::value || Cfg::kTailTimeline);

// The configuration whose tail kernel (TailKernelConfig) runs Cfg's split tail: the static kernel
// of the same head dim and type after cluster pairs (a piece is one CTA's, and the static kernel
// numbers the tiles as the pairs do where they run: unmasked, one length), else Cfg itself.
template <class Cfg>
using TailBaseOf = std::conditional_t<Cfg::kClusterPairs, StaticScheduleConfig<Cfg::kHeadDim, typename Cfg::Element>, Cfg>;

// Whether a launch of Cfg whose whole waves are `wave_ctas` CTAs wide splits its last wave's
// tiles by keys over the `tail_ctas` CTAs of the tail kernel (split_tail.h,
// TailKernelConfig<TailBaseOf<Cfg>> after Cfg's whole waves), which needs every tile alike: no
// mask, one length (no varlen, no seqused), and no GQA packing (kHasTailKernel). Then where the
// tiles leave a partial wave with at least one key block of it per tail CTA, fill at least one
// wave, and have at least Cfg::kSplitTailMinKeys keys, unless the caller asked for no split
// (num_splits 1). FLASHATTN_SM90_SPLIT_TAIL=never|always overrides the last three (read at every
// launch; tests split small problems with it, whose tiles then all lie in the tail).
template <class Cfg>
bool splits_tail(const AttentionProblem& pb, int num_tiles, int wave_ctas, int tail_ctas, int key_blocks) {
  if (pb.mask.has_mask() || pb.varlen() || pb.seqused_q != nullptr || pb.seqused_k != nullptr) {
    return false;
  }
  const int tail_tiles = num_tiles % wave_ctas;
  const int64_t units = int64_t(tail_tiles) * key_blocks;
  // split_tail.h shares the units out in 32-bit arithmetic: units x CTAs must fit.
  if (tail_tiles == 0 || units < tail_ctas || key_blocks < 2 || units * tail_ctas >= (int64_t(1) << 31)) return false;
  const char* forced = std::getenv("FLASHATTN_SM90_SPLIT_TAIL");
  if (forced != nullptr && std::strcmp(forced, "never") == 0) return false;
  if (forced != nullptr && std::strcmp(forced, "always") == 0) return true;
  return pb.num_splits != 1 && num_tiles >= wave_ctas && pb.seqlen_k >= Cfg::kSplitTailMinKeys;
}

// The key splits of a packed launch (split_keys.h; the rule is kernel_choice.h's
// sm90_key_splits) and their workspace (the graph's own under capture, in `captured`):
// kp.num_tiles becomes the work indices. The pieces: the caller's num_splits where given, else
// the rule's; FLASHATTN_SM90_KEY_SPLITS (tests: it may idle pieces) overrides both. Nothing
// changes at one piece, or without a workspace (split_tail_workspace). A caller's count is held
// to one piece a key block (more would only idle) and to a workspace of kMaxCallerSplitBytes: a
// piece's slot holds a whole tile's 64 rows a warpgroup even where G rows are packed, so 512
// decode tiles at 256 pieces would ask for 9 GB.
constexpr size_t kMaxCallerSplitBytes = size_t(1) << 30;

// The pieces a tile: the caller's num_splits where given (held to one a key block and to the
// workspace bound, a piece of the tiles costing piece_bytes), else `by_rule`;
// FLASHATTN_SM90_KEY_SPLITS overrides both.
inline int key_splits_asked(const AttentionProblem& pb, int by_rule, int key_blocks, size_t piece_bytes) {
  int splits = by_rule;
  if (pb.num_splits > 0) {
    splits = int(std::min<size_t>({size_t(pb.num_splits), size_t(key_blocks), kMaxCallerSplitBytes / piece_bytes}));
  }
  if (const char* forced = std::getenv("FLASHATTN_SM90_KEY_SPLITS")) {
    splits = std::clamp(std::atoi(forced), 1, kMaxNumSplits);
  }
  return splits;
}

template <class Cfg>
Status arrange_key_splits(const AttentionProblem& pb, KernelParams& kp, int sms, CapturedWorkspaces& captured) {
  const int key_blocks = sm90_visible_key_blocks(pb, Cfg::kBlockN);
  const size_t piece_bytes = size_t(kp.num_tiles) * Cfg::kConsumerWarpgroups * PieceSlot<Cfg::kHeadDim>::kBytes;
  // The rule counts CTA slots (an SM holds Cfg::kCtasPerSm); the combine kernel's choice below
  // the SMs themselves, which a second CTA leaves no room on.
  const int splits = key_splits_asked(
      pb, sm90_key_splits(kp.num_tiles, cta_slots<Cfg>(sms), key_blocks, Cfg::kHeadDim), key_blocks, piece_bytes);
  if (splits < 2 || int64_t(kp.num_tiles) * splits >= (int64_t(1) << 31)) return Status::Ok();
  int* counters = nullptr;
  float* slots = nullptr;
  // sm90_merge_counters per tile and consumer warpgroup; a slot per work index and consumer
  // warpgroup.
  Status w = split_tail_workspace(pb.device_index, pb.stream,
                                  size_t(kp.num_tiles) * Cfg::kConsumerWarpgroups * sm90_merge_counters(splits) * sizeof(int),
                                  piece_bytes * splits, captured, &counters, &slots);
  if (!w.ok() || counters == nullptr) return w;
  kp.key_splits = splits;
  kp.div_key_splits = FastDivisor::make(uint32_t(splits));
  kp.split_counters = counters;
  kp.split_partials = slots;
  kp.split_combine =
      sm90_combines_pieces_after(splits, kp.num_tiles * splits, sms, Cfg::kHeadDim,
                                 std::getenv("FLASHATTN_SM90_SPLIT_COMBINE")) ? 1 : 0;
  kp.num_tiles *= splits;
  return Status::Ok();
}

// The launch attribute that makes a kernel a programmatic dependent of the one before it.
inline cudaLaunchAttribute programmatic_dependence() {
  cudaLaunchAttribute programmatic{};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  return programmatic;
}

// `kernel` on `grid` CTAs of `block` threads with `smem` bytes of shared memory on `stream`;
// where `dependent`, as a programmatic dependent of the kernel before it in the stream: its CTAs
// may start once that kernel allows it (launch_dependent_grids) and wait for it to end
// (wait_for_prerequisite_grids) before reading its output.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, void* stream,
                             bool dependent, const Args&... args) {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute programmatic = programmatic_dependence();
  config.attrs = &programmatic, config.numAttrs = dependent ? 1 : 0;
  config.gridDim = grid, config.blockDim = block, config.dynamicSmemBytes = smem;
  config.stream = static_cast<cudaStream_t>(stream);
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// The combine kernel of a launch of Cfg whose pieces only wrote their slots (split_combine.h),
// dependent on that launch: its CTAs take the SMs the packed grid leaves idle and wait there.
template <class Cfg>
cudaError_t launch_combine_kernel(const KernelParams& kp, void* stream) {
  const CombineShape shape = combine_shape(kp.num_tiles / kp.key_splits, kp.pack_rows, int(kp.pack_div.divisor),
                                           kp.seqlen_q, Cfg::kBlockM, PieceSlot<Cfg::kHeadDim>::kOAccum, kp.key_splits);
  const int64_t blocks = (shape.groups * shape.group_lanes + kCombineThreads - 1) / kCombineThreads;
  if (blocks == 0) return cudaSuccess;
  return launch_dependent(combine_pieces_kernel<Cfg>, dim3(unsigned(blocks)), dim3(kCombineThreads), 0, stream, true,
                          kp, shape);
}

// kp's split-tail fields for the tail kernel of Tail on `ctas` CTAs, which takes the last
// `tail_tiles` of kp.num_tiles tiles of `key_blocks` blocks each, and its workspace (the
// graph's own under capture, in `captured`); `split` becomes true where there is one.
template <class Tail>
Status arrange_split_tail(const AttentionProblem& pb, KernelParams& kp, int tail_tiles, int key_blocks, int ctas,
                          CapturedWorkspaces& captured, bool& split) {
  int* counters = nullptr;
  float* slots = nullptr;
  // A counter per tail tile and consumer warpgroup; two slots per CTA and consumer warpgroup.
  Status w = split_tail_workspace(pb.device_index, pb.stream, size_t(tail_tiles) * Tail::kConsumerWarpgroups * sizeof(int),
                                  size_t(2) * ctas * Tail::kConsumerWarpgroups * PieceSlot<Tail::kHeadDim>::kBytes,
                                  captured, &counters, &slots);
  if (!w.ok() || counters == nullptr) return w;
  split = true;
  kp.tail_first = kp.num_tiles - tail_tiles;
  kp.tail_blocks = key_blocks;
  kp.tail_units = tail_tiles * key_blocks;
  kp.tail_counters = counters;
  kp.tail_partials = slots;
  return Status::Ok();
}

// TailKernelConfig<Cfg>'s launch on all `sms` SMs; `after_whole_waves`: dependent on the
// whole waves' kernel just launched (its CTAs start as that kernel's leave their SMs). Without
// it (every tile in the tail: tests force that) an ordinary launch, so that it cannot start
// beside whatever kernel came before it in the stream.
template <class Cfg>
cudaError_t launch_tail_kernel(const KernelParams& kp, int sms, void* stream, bool after_whole_waves) {
  using Tail = TailKernelConfig<Cfg>;
  auto kernel = forward_kernel<Tail>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tail::kSmemBytes);
  if (err != cudaSuccess) return err;
  return launch_dependent(kernel, dim3(sms), dim3(Tail::kThreads), Tail::kSmemBytes, stream, after_whole_waves, kp);
}
}  // namespace

// KernelParams of Cfg's kernels for pb, all but the split tail's (tail_first = num_tiles: no
// tail), and the device's SM count in `sms`. Where pb has no tile, kp.num_tiles is 0 and `sms`
// unset.
template <class Cfg>
Status fill_params(const AttentionProblem& pb, KernelParams& kp, int& sms) {
  const bool varlen = pb.varlen();
  const int64_t rows_q = pb.tensor_rows_q(), rows_k = pb.tensor_rows_k();
  // A smaller head dim runs with its columns past pb.headdim zero (KernelParams::head_dim), on a
  // narrow twin only (NarrowHeadDimConfig: its stores and fallback loads around TMA test the head
  // dim, in whole pairs and 16-byte chunks).
  if (pb.headdim <= 0 || pb.headdim > Cfg::kHeadDim || pb.headdim % 8 != 0 ||
      (!Cfg::kNarrowHeadDim && pb.headdim != Cfg::kHeadDim)) {
    return Status::Unsupported("the sm90 kernel of head dim " + std::to_string(Cfg::kHeadDim) +
                               (Cfg::kNarrowHeadDim ? " (narrow twin) runs head dims that are multiples of 8 up to it"
                                                    : " runs that head dim only") +
                               ", not " + std::to_string(pb.headdim));
  }
  // GQA packing (pack_gqa.h; the callers have checked the group: 2..64 from sm90_forward_pack_gqa,
  // 1 for MHA decode's key splits, sm90_picks_mha_key_splits): a tile holds Cfg::kBlockM / G
  // (rounded down) query rows of the G heads of one KV head.
  const int group = pb.heads_per_kv();
  int tile_rows_q = Cfg::kBlockM;  // query rows per tile
  if constexpr (Cfg::kPackGqa) {
    if (group < 1 || group > kRowsPerConsumer) {
      return Status::Unsupported("GQA head packing needs a group of 1..64 query heads per KV head, not " +
                                 std::to_string(group));
    }
    tile_rows_q = Cfg::kBlockM / group;
  }
  if constexpr (Cfg::kClusterPairs) {
    // Both CTAs of a pair must read the same key blocks (kernel_choice.h: the rule that picks
    // this kernel asks the same question).
    if (const char* why = sm90_cluster_pairs_refusal(pb, tile_rows_q)) {
      return Status::Unsupported(std::string(why) + " (" + std::to_string(tile_rows_q) + "-row query tiles, seqlen_q " +
                                 std::to_string(pb.seqlen_q) + ")");
    }
  }
  // Cluster pairs load half a key block per CTA (mainloop_load.h, load_half_block).
  constexpr int kKvBoxRows = Cfg::kClusterPairs ? Cfg::kBlockN / 2 : Cfg::kBlockN;
  Status s;
  if constexpr (Cfg::kPackGqa) {
    s = encode_packed_operand_map(&kp.tma_q, pb.q, pb.dtype, pb.headdim, rows_q, pb.nheads_kv, group, pb.batch,
                                  varlen, tile_rows_q);
  } else {
    s = encode_operand_map(&kp.tma_q, pb.q, pb.dtype, pb.headdim, rows_q, pb.nheads_q, pb.batch, varlen, Cfg::kBlockM);
  }
  // Paged K/V (paged_blocks.h): maps over the pages, (dim, page_size, heads, num_pages), each key
  // block inside one page.
  if (pb.paged()) {
    if (const char* why = sm90_paged_refusal(pb, Cfg::kBlockN, MainloopLoad<Cfg>::kReadsPages)) {
      return Status::Unsupported(std::string(why) + " (page_size " + std::to_string(pb.page_size) + ", " +
                                 std::to_string(Cfg::kBlockN) + "-key blocks)");
    }
    kp.block_table = pb.block_table;
    kp.block_table_stride = static_cast<int>(pb.block_table_batch_stride);
    kp.page_blocks = FastDivisor::make(uint32_t(pb.page_size / Cfg::kBlockN));
    kp.num_pages = pb.num_pages;
  }
  const int64_t kv_rows = pb.kv_tensor_rows();
  const int kv_batches = pb.kv_tensor_batches();
  if (s.ok()) s = encode_operand_map(&kp.tma_k, pb.k, pb.dtype, pb.headdim, kv_rows, pb.nheads_kv, kv_batches, varlen, kKvBoxRows);
  if (s.ok()) s = encode_operand_map(&kp.tma_v, pb.v, pb.dtype, pb.headdim, kv_rows, pb.nheads_kv, kv_batches, varlen, kKvBoxRows);
  if constexpr (Cfg::kPackGqa) {
    if (s.ok()) {
      s = encode_packed_operand_map(&kp.tma_o, pb.out, pb.dtype, pb.headdim, rows_q, pb.nheads_kv, group, pb.batch,
                                    varlen, kRowsPerConsumer / group);
    }
  } else {
    if (s.ok()) s = encode_operand_map(&kp.tma_o, pb.out, pb.dtype, pb.headdim, rows_q, pb.nheads_q, pb.batch, varlen, kRowsPerConsumer);
  }
  if (!s.ok()) return s;

  kp.k = pb.k.data;
  kp.k_batch_stride = pb.k.batch_stride;
  kp.k_row_stride = pb.k.row_stride;
  kp.k_head_stride = pb.k.head_stride;
  kp.q = pb.q.data;
  kp.q_batch_stride = pb.q.batch_stride;
  kp.q_row_stride = pb.q.row_stride;
  kp.q_head_stride = pb.q.head_stride;
  kp.head_dim = pb.headdim;
  kp.v = pb.v.data;
  kp.v_batch_stride = pb.v.batch_stride;
  kp.v_row_stride = pb.v.row_stride;
  kp.v_head_stride = pb.v.head_stride;
  kp.out = pb.out.data;
  kp.out_batch_stride = pb.out.batch_stride;
  kp.out_row_stride = pb.out.row_stride;
  kp.out_head_stride = pb.out.head_stride;
  kp.lse = pb.lse;
  kp.lse_batch_stride = pb.lse_batch_stride;
  kp.lse_head_stride = pb.lse_head_stride;
  kp.lse_row_stride = pb.lse_row_stride;
  kp.cu_seqlens_q = pb.cu_seqlens_q;
  kp.cu_seqlens_k = pb.cu_seqlens_k;
  kp.seqused_q = pb.seqused_q;
  kp.seqused_k = pb.seqused_k;
  kp.cu_rows_q = static_cast<int>(rows_q);  // sm90_supports_forward: fewer than 2^31 rows
  kp.cu_rows_k = static_cast<int>(rows_k);
  // A packed group that does not divide a warpgroup's 64 rows has no output box (epilogue.h).
  kp.clip_rows = varlen || pb.seqused_q != nullptr || (Cfg::kPackGqa && kRowsPerConsumer % group != 0);
  // The LSE through TMA (epilogue.h): with the output's TMA store, rows contiguous, and strides
  // the map takes (multiples of 16 bytes); else each row's thread stores it.
  if constexpr (Epilogue<Cfg>::kLseByTma) {
    const auto aligned = [](int64_t elements) { return (elements * 4) % 16 == 0; };
    if (pb.lse != nullptr && !kp.clip_rows && pb.lse_row_stride == 1 && aligned(pb.lse_head_stride) &&
        aligned(pb.lse_batch_stride) && reinterpret_cast<uintptr_t>(pb.lse) % 16 == 0) {
      kp.lse_by_tma = encode_lse_map(&kp.tma_lse, pb.lse, pb.seqlen_q, pb.nheads_q, pb.batch, pb.lse_head_stride,
                                     pb.lse_batch_stride, kRowsPerConsumer)
                          .ok();
    }
  }
  kp.batch = pb.batch;
  kp.nheads_q = pb.nheads_q;
  kp.heads_per_kv = pb.heads_per_kv();
  kp.seqlen_q = pb.seqlen_q;
  kp.seqlen_k = pb.seqlen_k;
  kp.num_m_blocks = (pb.seqlen_q + tile_rows_q - 1) / tile_rows_q;
  // Tiles are numbered over (m block, head, batch); with GQA packing the head is the KV head.
  const int tile_heads = Cfg::kPackGqa ? pb.nheads_kv : pb.nheads_q;
  kp.num_tiles = kp.num_m_blocks * pb.batch * tile_heads;
  if constexpr (Cfg::kPackGqa) kp.pack_div = FastDivisor::make(uint32_t(group));
  kp.pack_rows = tile_rows_q;
  kp.nheads_kv = pb.nheads_kv;
  kp.longest_first = pb.mask.right_bound_only();
  // Key rows past a sequence's length that may hold anything (mainloop_load.h zeroes their V).
  kp.zero_kv_tail = MainloopLoad<Cfg>::kZeroesKvTail && (pb.seqused_k != nullptr || pb.kv_rows_past_last_sequence);
  // The zeroing job's global slot needs a slot of its own per launch, with either schedule.
  kp.counter_slot = Cfg::kDynamicSchedule || kp.zero_kv_tail ? next_counter_slot() : 0;
  kp.score_pre = pb.score.tanh_input_scale();
  kp.score_log2 = pb.score.log2_factor();
  kp.window_left = pb.mask.window_left;
  kp.window_right = pb.mask.window_right;
  if (kp.num_tiles == 0) return Status::Ok();

  int l2_bytes = 0;
  cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, pb.device_index);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, pb.device_index);
  if (err != cudaSuccess) return Status::Runtime(std::string("cudaDeviceGetAttribute: ") + cudaGetErrorString(err));
  kp.l2_group_heads = causal_group_heads<Cfg>(pb, l2_bytes);
  const int pairs = pb.batch * tile_heads;
  kp.div_m_blocks = FastDivisor::make(kp.num_m_blocks);
  kp.div_heads = FastDivisor::make(tile_heads);
  kp.div_group_tiles = FastDivisor::make(kp.l2_group_heads * kp.num_m_blocks);
  kp.div_group = FastDivisor::make(kp.l2_group_heads);
  kp.div_last_group = FastDivisor::make(pairs % kp.l2_group_heads == 0 ? kp.l2_group_heads : pairs % kp.l2_group_heads);
  kp.tail_first = kp.num_tiles;
  return Status::Ok();
}

template <class Cfg>
Status launch_forward(const AttentionProblem& pb) {
  KernelParams kp;
  int sms = 0;
  Status filled = fill_params<Cfg>(pb, kp, sms);
  if (!filled.ok() || kp.num_tiles == 0) return filled;
  cudaError_t err = cudaSuccess;
  // The split tail (split_tail.h): this kernel runs the whole waves (num_tiles = tail_first),
  // then the tail kernel the rest by key blocks. The cluster pairs decide below, once they know
  // how many pairs fit.
  bool split = false;
  CapturedWorkspaces captured;  // freed after the launches, as nodes of the graph being captured
  if constexpr (Cfg::kSplitKeys) {
    Status k = arrange_key_splits<Cfg>(pb, kp, sms, captured);
    if (!k.ok()) return k;
  }
  if constexpr (kLaunchesTailKernel<Cfg> && !Cfg::kClusterPairs) {
    const int key_blocks = (pb.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    if (splits_tail<Cfg>(pb, kp.num_tiles, sms, sms, key_blocks)) {
      Status t = arrange_split_tail<Cfg>(pb, kp, kp.num_tiles % sms, key_blocks, sms, captured, split);
      if (!t.ok()) return t;
    }
  }
  auto kernel = forward_kernel<Cfg>;
  const bool programmatic = programmatic_launch_allowed();
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err != cudaSuccess) return Status::Runtime(std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(err));
  if constexpr (Cfg::kClusterPairs) {
    // As many pairs as fit at once (a GPC may leave an SM without a partner), at most one per
    // pair of tiles.
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attrs[2]{};
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = 2, attrs[0].val.clusterDim.y = 1, attrs[0].val.clusterDim.z = 1;
    attrs[1] = programmatic_dependence();
    // The occupancy query below sees the cluster dimension alone.
    config.attrs = attrs, config.numAttrs = 1;
    config.blockDim = dim3(Cfg::kThreads), config.dynamicSmemBytes = Cfg::kSmemBytes;
    config.stream = static_cast<cudaStream_t>(pb.stream);
    config.gridDim = dim3(2 * std::max(1, sms / 2));
    int clusters = 0;
    err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
    if (err != cudaSuccess) return Status::Runtime(std::string("cudaOccupancyMaxActiveClusters: ") + cudaGetErrorString(err));
    // The split tail after the whole waves of `clusters` pairs: the static kernel's tail kernel
    // (TailBaseOf), its own parameters (tensor maps of whole key blocks) on every SM.
    KernelParams tail;
    if constexpr (kLaunchesTailKernel<Cfg>) {
      using Tail = TailBaseOf<Cfg>;
      const int wave_ctas = 2 * std::max(1, clusters);
      const int key_blocks = (pb.seqlen_k + Tail::kBlockN - 1) / Tail::kBlockN;
      if (splits_tail<Cfg>(pb, kp.num_tiles, wave_ctas, sms, key_blocks)) {
        int tail_sms = 0;
        Status t = fill_params<Tail>(pb, tail, tail_sms);
        // A whole pair of tiles in every wave, so the whole waves end on a pair (both even).
        if (t.ok()) t = arrange_split_tail<Tail>(pb, tail, kp.num_tiles % wave_ctas, key_blocks, sms, captured, split);
        if (!t.ok()) return t;
        if (split) kp.num_tiles = tail.tail_first;
      }
    }
    if (kp.num_tiles > 0) {
      config.gridDim = dim3(2 * std::max(1, std::min(clusters, kp.num_tiles / 2)));
      config.numAttrs = programmatic ? 2 : 1;
      err = cudaLaunchKernelEx(&config, kernel, kp);
    }
    if constexpr (kLaunchesTailKernel<Cfg>) {
      if (split && err == cudaSuccess) {
        err = launch_tail_kernel<TailBaseOf<Cfg>>(tail, sms, pb.stream, kp.num_tiles > 0);
        if (err == cudaSuccess) count_split_tail_launch();
      }
    }
  } else if (!split) {
    const int slots = cta_slots<Cfg>(sms);
    if constexpr (Cfg::kCtasPerSm > 1) {
      // Room for the CTAs an SM holds: the driver otherwise may size the carveout for one.
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
      if (err != cudaSuccess) return Status::Runtime(std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(err));
    }
    const int grid = std::min({kp.num_tiles, slots, Cfg::kDynamicSchedule ? kMailboxCtas : slots});
    err = launch_dependent(kernel, dim3(grid), dim3(Cfg::kThreads), Cfg::kSmemBytes, pb.stream, programmatic, kp);
  } else if constexpr (kLaunchesTailKernel<Cfg>) {
    // Whole waves (none where the tiles are fewer than the SMs: tests force the split there),
    // then the tail on every SM, each of its CTAs started as soon as one of the first kernel's
    // leaves an SM (programmatic dependent launch; the first kernel allows it at its start).
    if (kp.tail_first > 0) {
      KernelParams whole = kp;
      whole.num_tiles = kp.tail_first;
      err = launch_dependent(kernel, dim3(sms), dim3(Cfg::kThreads), Cfg::kSmemBytes, pb.stream, programmatic, whole);
    }
    if (err == cudaSuccess) err = launch_tail_kernel<Cfg>(kp, sms, pb.stream, kp.tail_first > 0);
    if (err == cudaSuccess) count_split_tail_launch();
  }
  // Read (and cleared) whether or not a launch above returned an error itself, so that a failed
  // cudaLaunchKernelEx leaves no sticky last error for the caller's next check.
  const cudaError_t last = cudaGetLastError();
  if (err == cudaSuccess) err = last;
  if constexpr (Cfg::kSplitKeys && kSm90CombineKernelBuilt) {
    if (err == cudaSuccess && kp.split_combine) {  // set only where the launch splits (arrange_key_splits)
      err = launch_combine_kernel<Cfg>(kp, pb.stream);
      if (err == cudaSuccess) count_split_combine_launch();
    }
  }
  if (err != cudaSuccess) return Status::Runtime(std::string("sm90 forward launch: ") + cudaGetErrorString(err));
  Status freed = captured.free_after_launch();
  if (!freed.ok()) return freed;
  if (Cfg::kSplitKeys && kp.key_splits > 1) count_key_split_launch();
  return Status::Ok();
}

}  // namespace sm90
}  // namespace flashattn

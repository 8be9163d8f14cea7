// The sm90 kernel set's entry points: which problems the FlashAttention-3 forward takes, and the
// switch from run-time dtype / head dim to a compiled configuration (which are built:
// cuda/sm90/head_dims.h).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/kernel_sets.h"
#include "cuda/sm90/config.h"
#include "cuda/sm90/head_dims.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/kernel_choice.h"
#include "cuda/sm90/operand_checks.h"
#include "env_switch.h"

namespace flashattn {
namespace sm90 {
template <class Cfg>
Status launch_forward(const AttentionProblem& p);
template <int HeadDim, typename Element>
Status launch_sliced_decode(const AttentionProblem& p);
}  // namespace sm90

namespace {

// Which instantiation of a (dtype, head dim) runs: the default one, GQA head packing
// (sm90::PackGqaConfig), the static schedule (sm90::StaticScheduleConfig), short rows
// (sm90::ShortRowsConfig: 128-row tiles at head dim 64, no checked max at 128), cluster pairs
// (sm90::ClusterPairsConfig; built and picked by rule at head dim 128), tall tiles
// (sm90::TallTilesConfig; at head dims 64 and 128) or GQA head packing in 64-row tiles of one
// consumer warpgroup (sm90::PackGqaOneWgConfig; at head dim 64), or decode in 16-row mma.sync
// tiles whose warps take slices of each key block (sm90::SlicedDecodeConfig; at head dims 64, 128).
enum class Variant { kDefault, kPackGqa, kStaticSchedule, kShortRows, kClusterPairs, kTallTiles, kPackGqaOneWg,
                     kSlicedDecode };
constexpr int kVariantCount = int(Variant::kSlicedDecode) + 1;  // keep the last one named here

// Devices whose attributes the rules keep (asked_once: the HBM bandwidth, the SM count); past
// it the query runs at every call.
constexpr int kMaxCachedDevices = 64;

// Query rows per tile of the cluster-pair kernels the rule picks (the same for both dtypes).
constexpr int kClusterPairsTileRows = sm90::ClusterPairsConfig<128, __nv_bfloat16>::kBlockM;
static_assert(sm90::ClusterPairsConfig<128, __half>::kBlockM == kClusterPairsTileRows, "");

// Cfg's kernel where it is built (kBuilt), else Unsupported naming the head dims it is built for
// and the instantiation's head dim (head_dim; p.headdim rounds up to it).
template <bool kBuilt, class Cfg>
Status launch_if_built(const AttentionProblem& p, const char* kernel, const char* built_for, int head_dim) {
  if constexpr (kBuilt) {
    return sm90::launch_forward<Cfg>(p);
  } else {
    return Status::Unsupported(std::string("the sm90 ") + kernel + " kernel is built for " + built_for +
                               " only, not " + std::to_string(head_dim));
  }
}

template <int HeadDim, class Default, class Packed, class Static, class ShortRows, class Cluster, class Tall,
          class PackedOneWg>
Status launch_variant(const AttentionProblem& p, Variant variant) {
  // A smaller head dim (runs_narrow): the default kernel's narrow twin, whatever the variant.
  if (p.headdim < HeadDim) return sm90::launch_forward<sm90::NarrowHeadDimConfig<Default>>(p);
  if (variant == Variant::kClusterPairs) {
    return launch_if_built<sm90_has_cluster_pairs(HeadDim), Cluster>(p, "cluster-pair", "head dim 128", HeadDim);
  }
  if (variant == Variant::kTallTiles) {
    return launch_if_built<sm90_has_tall_tiles(HeadDim), Tall>(p, "tall-tile", "head dims 64 and 128", HeadDim);
  }
  if (variant == Variant::kPackGqa) return sm90::launch_forward<Packed>(p);
  if (variant == Variant::kPackGqaOneWg) {
    return launch_if_built<sm90_has_pack_gqa_one_wg(HeadDim), PackedOneWg>(p, "one-warpgroup packed", "head dim 64",
                                                                            HeadDim);
  }
  // Where the static schedule is the default, Static is Default (one instantiation of it), and
  // ShortRows is Static at head dims other than 64 and 128.
  if (variant == Variant::kStaticSchedule) return sm90::launch_forward<Static>(p);
  if (variant == Variant::kShortRows) return sm90::launch_forward<ShortRows>(p);
  return sm90::launch_forward<Default>(p);
}

// Whether this build compiled the forward instantiation of (bf16 or fp16, hd).
constexpr bool built(bool bf16, int hd) {
#define FLASHATTN_SM90_BUILT_ITEM(HD) \
  if (hd == HD) return FLASHATTN_SM90_BUILT(bf16, HD);
  FLASHATTN_SM90_FORWARD_HEAD_DIMS(FLASHATTN_SM90_BUILT_ITEM)
#undef FLASHATTN_SM90_BUILT_ITEM
  return false;
}

// The head dim of the instantiation that runs p: the smallest built for p's dtype that holds
// p.headdim, a multiple of 8 (0: none). As FlashAttention-3 rounds its head dims up, one between
// the instantiations runs on the next larger, computing its products (80 on 96: a fifth more),
// in the default kernel's narrow twin (sm90::NarrowHeadDimConfig: the columns past p.headdim
// zero). The rules of kernel_choice.h pick among the instantiated head dims' kernels only.
int instantiation_head_dim(const AttentionProblem& p) {
  if (p.headdim <= 0 || p.headdim % 8 != 0) return 0;
  for (int hd : sm90::kForwardHeadDims) {
    if (hd >= p.headdim && built(p.dtype == DType::kBFloat16, hd)) return hd;
  }
  return 0;
}

// p's head dim is not the head dim of the instantiation that runs it (one between them, or one
// this build left out): the narrow twin of the default kernel runs it.
bool runs_narrow(const AttentionProblem& p) {
  const int hd = instantiation_head_dim(p);
  return hd != 0 && hd != p.headdim;
}

// p's head dim is none of those the kernels are instantiated at in a full build: the rules of
// kernel_choice.h, timed on those, give it no kernel of theirs (whatever this build has).
bool between_instantiations(const AttentionProblem& p) {
  for (int hd : sm90::kForwardHeadDims) {
    if (hd == p.headdim) return false;
  }
  return true;
}

template <typename Element>
Status dispatch_head_dim(const AttentionProblem& p, bool run, Variant variant) {
  constexpr bool kBf16 = std::is_same<Element, __nv_bfloat16>::value;
  (void)kBf16;
  const int head_dim = instantiation_head_dim(p);
  (void)head_dim;
  // The cases of the head dims this build left out are discarded (if constexpr on a condition that
  // depends on Element), so their kernels are never referenced.
#define FLASHATTN_SM90_CASE(HD)                                                                          \
  if constexpr (FLASHATTN_SM90_BUILT(kBf16, HD)) {                                                      \
    if (head_dim == HD) {                                                                                \
      if (!run) return Status::Ok();                                                                     \
      return launch_variant<HD, sm90::KernelConfig<HD, Element>, sm90::PackGqaConfig<HD, Element>,       \
                            sm90::StaticScheduleConfig<HD, Element>, sm90::ShortRowsConfig<HD, Element>, \
                            sm90::ClusterPairsConfig<HD, Element>, sm90::TallTilesConfig<HD, Element>,   \
                            sm90::PackGqaOneWgConfig<HD, Element>>(p, variant);                          \
    }                                                                                                    \
  }
  if (variant == Variant::kSlicedDecode) {
    if constexpr (FLASHATTN_SM90_BUILT(kBf16, 64)) {
      if (head_dim == 64 && p.headdim == 64) return run ? sm90::launch_sliced_decode<64, Element>(p) : Status::Ok();
    }
    if constexpr (FLASHATTN_SM90_BUILT(kBf16, 128)) {
      if (head_dim == 128 && p.headdim == 128) return run ? sm90::launch_sliced_decode<128, Element>(p) : Status::Ok();
    }
    return Status::Unsupported("the sm90 sliced decode kernel is built for head dims 64 and 128 only, not " +
                               std::to_string(p.headdim));
  }
  FLASHATTN_SM90_FORWARD_HEAD_DIMS(FLASHATTN_SM90_CASE)
#undef FLASHATTN_SM90_CASE
  if (p.headdim <= 0 || p.headdim % 8 != 0) {
    return Status::Unsupported("the sm90 forward kernel takes head dims that are positive multiples of 8; got " +
                               std::to_string(p.headdim));
  }
  return Status::Unsupported("the sm90 forward kernel is not built for head dim " + std::to_string(p.headdim) +
                             " or a larger one with dtype " + dtype_name(p.dtype) +
                             " (FLASHATTN_HDIMS / FLASHATTN_DTYPES)");
}

Status dispatch(const AttentionProblem& p, bool run, Variant variant = Variant::kDefault) {
  if (p.dtype == DType::kBFloat16) return dispatch_head_dim<__nv_bfloat16>(p, run, variant);
  if (p.dtype == DType::kFloat16) return dispatch_head_dim<__half>(p, run, variant);
  return Status::Unsupported(std::string("the sm90 forward kernel takes bf16 or fp16, not ") + dtype_name(p.dtype));
}

// Key rows a block of the packed kernel of head dim hd holds (config.h, TileShape; 0: none).
int packed_block_keys(int hd) {
#define FLASHATTN_SM90_BLOCK_KEYS_ITEM(HD) \
  if (hd == HD) return sm90::TileShape<HD>::kBlockN;
  FLASHATTN_SM90_FORWARD_HEAD_DIMS(FLASHATTN_SM90_BLOCK_KEYS_ITEM)
#undef FLASHATTN_SM90_BLOCK_KEYS_ITEM
  return 0;
}

// FLASHATTN_SM90_PACK_GQA=0 leaves GQA packing out (read at every call, as FLASHATTN_SM90_VARIANT
// below), so that a benchmark times a decode shape packed and not in one process
// (benchmarks/bench_decode.py); paged problems then go to the sm80 kernel.
bool pack_gqa_allowed() { return env_switch_on("FLASHATTN_SM90_PACK_GQA"); }

// GQA packing proper (the rule and the direct entry), G in 2..64: G <= 64 keeps at least two
// query rows of the whole group in a tile and warpgroup 0's 64 rows all query rows (pack_gqa.h).
// MHA decode reaches the packed kernel at G = 1 by its own rule (sm90_picks_mha_key_splits).
bool pack_gqa_group_ok(const AttentionProblem& p) {
  const int group = p.nheads_kv > 0 ? p.heads_per_kv() : 0;
  return p.nheads_kv > 0 && p.nheads_q == group * p.nheads_kv && group >= 2 && group <= sm90::kRowsPerConsumer;
}

// Why the sm90 forward cannot read p's pages (null: it can): only the packed kernel reads them
// (sm90_forward runs every paged problem there), at the head dims it is instantiated at, with a
// group of 1..64 query heads per KV head; the rest is sm90_paged_refusal's (kernel_choice.h).
// d192's 112-key blocks take pages of a multiple of 112 rows only.
const char* paged_refusal(const AttentionProblem& p) {
  if (!pack_gqa_allowed()) {
    return "the sm90 kernels read paged k / v in the GQA-packed instantiation only, which FLASHATTN_SM90_PACK_GQA=0 "
           "leaves out";
  }
  // Not the instantiation's own head dim: one between them (the narrow twin's) or none built.
  const int hd = instantiation_head_dim(p);
  if (between_instantiations(p) || hd != p.headdim) {
    return "the sm90 kernel reads paged k / v at the head dims its packed kernel is built for only";
  }
  // MHA (G = 1) as the packed kernel runs decode's key splits, else a packing group.
  if (!(p.nheads_kv > 0 && p.nheads_q == p.nheads_kv) && !pack_gqa_group_ok(p)) {
    return "the sm90 kernel reads paged k / v with 1..64 query heads per KV head only";
  }
  return sm90_paged_refusal(p, packed_block_keys(hd), true);
}

}  // namespace

Status sm90_supports_forward(const AttentionProblem& p) {
  constexpr const char* kFwd = "the sm90 forward kernel";
  if (p.paged()) {
    if (const char* why = paged_refusal(p)) return Status::Unsupported(why);
  }
  if (p.alibi_slopes != nullptr) return Status::Unsupported("the sm90 forward kernel does not implement ALiBi");
  // seqused_k and varlen k/v rows past cu_seqlens_k[batch]: the TMA loads of a sequence's last
  // key block read rows past its length, which may hold NaN. Their scores are masked, and their V
  // rows are zeroed in shared memory before P V (KernelParams::zero_kv_tail, mainloop_load.h)
  // by the kernels of head dims up to kZeroKvTailMaxHeadDim (params.h); the sm80 kernel takes
  // larger ones.
  if ((p.seqused_k != nullptr || p.kv_rows_past_last_sequence) && p.headdim > sm90::kZeroKvTailMaxHeadDim) {
    return Status::Unsupported("the sm90 forward kernel zeroes k/v rows past seqused_k or cu_seqlens_k[batch] only "
                               "up to head dim " + std::to_string(sm90::kZeroKvTailMaxHeadDim) +
                               "; the sm80 kernel takes head dim " + std::to_string(p.headdim));
  }
  // A tensor map needs at least one row (cuTensorMapEncodeTiled fails on none): k without rows
  // (every sequence without keys) is the sm80 kernel's, which writes O = 0 and lse = -inf.
  if (p.tensor_rows_k() == 0) return Status::Unsupported("the sm90 forward kernel needs at least one row of k");
  if (p.score.softcap <= 0.0f && !(p.score.scale > 0.0f)) {
    return Status::Unsupported("the sm90 forward kernel needs a positive softmax_scale without softcap; got " +
                               std::to_string(p.score.scale));
  }
  Status s = dispatch(p, false);
  if (!s.ok()) return s;
  // Tiles are numbered in 32 bits (KernelParams::num_tiles), and the schedulers step a tile
  // index past the count by up to a grid (kernel.h, tile_scheduler.h): past 2^30 tiles a count or
  // an index could wrap and the launch compute nothing. Counted in the fewest rows a tile holds
  // (a consumer warpgroup's), so no kernel's count can pass it; only views whose batches or heads
  // share memory (zero strides in q) come near it.
  const int64_t most_tiles = (int64_t(p.seqlen_q) + sm90::kRowsPerConsumer - 1) / sm90::kRowsPerConsumer *
                             p.batch * p.nheads_q;
  if (most_tiles > (int64_t(1) << 30)) {
    return Status::Unsupported("the sm90 forward kernel numbers its tiles in 32 bits; batch " + std::to_string(p.batch) +
                               " x nheads_q " + std::to_string(p.nheads_q) + " x seqlen_q " +
                               std::to_string(p.seqlen_q) + " is too many rows");
  }
  const bool varlen = p.varlen();
  const int eb = dtype_size(p.dtype);
  const int64_t rows_q = p.tensor_rows_q(), rows_k = p.tensor_rows_k();
  if (!(s = sm90::check_strides(kFwd, "q", p.q, rows_q, p.nheads_q, p.batch, varlen, eb)).ok()) return s;
  // Pages: the maps over k and v are (dim, page_size, heads, num_pages) (launch.h).
  const int64_t kv_rows = p.kv_tensor_rows();
  const int kv_batches = p.kv_tensor_batches();
  if (!(s = sm90::check_strides(kFwd, "k", p.k, kv_rows, p.nheads_kv, kv_batches, varlen, eb)).ok()) return s;
  if (!(s = sm90::check_strides(kFwd, "v", p.v, kv_rows, p.nheads_kv, kv_batches, varlen, eb)).ok()) return s;
  if (!(s = sm90::check_strides(kFwd, "out", p.out, rows_q, p.nheads_q, p.batch, varlen, eb)).ok()) return s;
  if (rows_q > (int64_t(1) << 31) - sm90::kMaxBlockM || rows_k > (int64_t(1) << 31) - 256) {
    return Status::Unsupported("the sm90 forward kernel indexes rows with 32-bit TMA coordinates; too many rows");
  }
  // The checked max's recompute of a tile (KernelConfig::kHeldCheckPerTile: the bf16 d128
  // kernels with two consumer warpgroups, but for GQA packing; warp_scores.h, ValuesInGlobal)
  // keeps V's row stride in 32 bits, which no real layout passes.
  if (p.v.row_stride >= (int64_t(1) << 31)) {
    return Status::Unsupported("the sm90 forward kernel needs v's row stride below 2^31 elements; got " +
                               std::to_string(p.v.row_stride));
  }
  return Status::Ok();
}

namespace {

// Launches of each variant through the API so far in this process (tests check that the API took
// the kernel its rule names); indexed by Variant.
std::atomic<int64_t> g_launches[kVariantCount];

Status launch_counted(const AttentionProblem& p, Variant variant) {
  g_launches[int(variant)].fetch_add(1, std::memory_order_relaxed);
  return dispatch(p, true, variant);
}

int64_t launches_of(Variant variant) { return g_launches[int(variant)].load(std::memory_order_relaxed); }

// The packed kernel that runs p: the one-warpgroup kernel's 64-row tiles where its rule picks them.
// The sliced decode kernel before both where its switch picks it.
Variant packed_variant(const AttentionProblem& p) {
  if (sm90_picks_sliced_decode(p)) return Variant::kSlicedDecode;
  return sm90_picks_pack_gqa_one_wg(p) ? Variant::kPackGqaOneWg : Variant::kPackGqa;
}

// FLASHATTN_SM90_VARIANT (default, static, short_rows, cluster, tall) overrides the rules of
// kernel_choice.h (GQA packing excepted) for the problems that variant can run, so that a benchmark times the variants
// through the package on the same shapes (docs/perf.md, v8). Read at every call (well under a
// microsecond against ~80 us of host time per call) so one process can switch between them.
// Unset, empty or unknown: the rules (false).
bool forced_variant(Variant* variant) {
  const char* v = std::getenv("FLASHATTN_SM90_VARIANT");
  if (v == nullptr) return false;
  const std::string name(v);
  if (name == "default") *variant = Variant::kDefault;
  else if (name == "static") *variant = Variant::kStaticSchedule;
  else if (name == "short_rows") *variant = Variant::kShortRows;
  else if (name == "cluster") *variant = Variant::kClusterPairs;
  else if (name == "tall") *variant = Variant::kTallTiles;
  else return false;
  return true;
}

}  // namespace

bool sm90_picks_pack_gqa(const AttentionProblem& p) {
  return !between_instantiations(p) && pack_gqa_group_ok(p) && p.seqlen_q <= kSm90PackGqaMaxQuery &&
         int64_t(p.seqlen_q) * p.heads_per_kv() <= kSm90PackGqaMaxRows;
}

bool sm90_picks_mha_key_splits(const AttentionProblem& p, int sms) {
  if (between_instantiations(p) || p.nheads_kv <= 0 || p.nheads_q != p.nheads_kv) return false;
  if (p.seqlen_q > kSm90PackGqaMaxQuery || p.num_splits == 1) return false;
  const int key_blocks = sm90_visible_key_blocks(p, kSm90MhaSplitBlockKeys);
  // The caller's count wherever a tile has two blocks to cut (the launch's own blocks are as many
  // or more: kSm90MhaSplitBlockKeys is the widest block_n).
  if (p.num_splits > 1) return key_blocks >= 2;
  // The CTA slots of the kernel that would run it, as the launch counts them (sm90::cta_slots).
  const int slots = sm90_picks_pack_gqa_one_wg(p)
                        ? sm90::cta_slots<sm90::PackGqaOneWgConfig<64, __nv_bfloat16>>(sms)
                        : sms;
  return sm90_key_splits(p.batch * p.nheads_kv, slots, key_blocks, p.headdim) > 1;
}

Status sm90_forward(const AttentionProblem& p) {
  Status s = sm90_supports_forward(p);
  if (!s.ok()) return s;
  if (runs_narrow(p)) return launch_counted(p, Variant::kDefault);
  // Only the packed kernel reads pages (sm90_supports_forward has checked that it can).
  if (p.paged()) return launch_counted(p, packed_variant(p));
  if (pack_gqa_allowed() && sm90_picks_pack_gqa(p)) return launch_counted(p, packed_variant(p));
  Variant variant = Variant::kDefault;
  if (forced_variant(&variant)) return launch_counted(p, variant);
  // After the forced variant: a benchmark that names an unpacked kernel times it on MHA decode too.
  // MHA decode goes to the sliced decode kernel wherever its switch gives it the problem (GQA
  // reaches it above, through packed_variant), with its own key pieces, not the MHA split rule's:
  // that rule counts the wgmma kernels' CTA slots and leaves 128+ tiles unsplit and unpacked.
  if (pack_gqa_allowed() && p.nheads_q == p.nheads_kv && sm90_picks_sliced_decode(p)) {
    return launch_counted(p, Variant::kSlicedDecode);
  }
  if (pack_gqa_allowed() && sm90_picks_mha_key_splits(p, sm90_sm_count(p.device_index))) {
    return launch_counted(p, packed_variant(p));
  }
  if (sm90_picks_cluster_pairs(p)) variant = Variant::kClusterPairs;
  else if (sm90_picks_tall_tiles(p)) variant = Variant::kTallTiles;
  else if (sm90_picks_short_rows(p)) variant = Variant::kShortRows;
  else if (sm90_picks_static_schedule(p, sm90_hbm_tbps(p.device_index))) variant = Variant::kStaticSchedule;
  return launch_counted(p, variant);
}

bool sm90_picks_short_rows(const AttentionProblem& p) {
  if (between_instantiations(p)) return false;
  if (p.seqlen_k > kSm90ShortRowsMaxKeys) return false;
  return p.headdim == 64 && p.mask.has_mask() && !p.mask.right_bound_only();
}

int64_t sm90_short_rows_launches() { return launches_of(Variant::kShortRows); }

bool sm90_picks_cluster_pairs(const AttentionProblem& p) {
  if (between_instantiations(p)) return false;
  return sm90_has_cluster_pairs(p.headdim) && !p.mask.has_mask() && p.seqlen_k >= kSm90ClusterPairsMinKeys &&
         sm90_cluster_pairs_refusal(p, kClusterPairsTileRows) == nullptr;
}

int64_t sm90_cluster_pairs_launches() { return launches_of(Variant::kClusterPairs); }

bool sm90_picks_tall_tiles(const AttentionProblem& p) {
  if (between_instantiations(p)) return false;
  if (!sm90_has_tall_tiles(p.headdim)) return false;
  if (p.headdim == 64 && !p.mask.has_mask()) return p.seqlen_k <= kSm90TallTilesMaxUnmaskedKeysHdim64;
  if (!p.mask.right_bound_only()) return false;
  return p.headdim == 64 ? p.seqlen_k <= kSm90TallTilesMaxKeysHdim64 : p.seqlen_k > kSm90OneHeadGroupMaxKeys;
}

int64_t sm90_tall_tiles_launches() { return launches_of(Variant::kTallTiles); }

namespace {

// A device attribute the rules read at every call, asked once per device (0.0f: not asked yet; a
// failed query is kept as -1 and read as 0, unknown). query(device) returns it, or <= 0 on failure.
template <class Query>
double asked_once(std::atomic<float> (&cache)[kMaxCachedDevices], int device_index, Query query) {
  const bool cached = device_index >= 0 && device_index < kMaxCachedDevices;
  if (cached) {
    const float known = cache[device_index].load(std::memory_order_relaxed);
    if (known != 0.0f) return known > 0.0f ? known : 0.0;
  }
  float value = float(query(device_index));
  if (!(value > 0.0f)) {
    value = -1.0f;
    cudaGetLastError();  // a failed query is not the caller's next error
  }
  if (cached) cache[device_index].store(value, std::memory_order_relaxed);
  return value > 0.0f ? value : 0.0;
}

int device_attribute(cudaDeviceAttr attribute, int device_index) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, attribute, device_index) == cudaSuccess ? value : 0;
}

}  // namespace

double sm90_hbm_tbps(int device_index) {
  static std::atomic<float> cache[kMaxCachedDevices];
  return asked_once(cache, device_index, [](int device) {
    const int clock_khz = device_attribute(cudaDevAttrMemoryClockRate, device);
    const int bus_bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, device);
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e12;
  });
}

int sm90_sm_count(int device_index) {
  static std::atomic<float> cache[kMaxCachedDevices];
  return int(asked_once(cache, device_index,
                        [](int device) { return double(device_attribute(cudaDevAttrMultiProcessorCount, device)); }));
}

bool sm90_picks_static_schedule(const AttentionProblem& p, double hbm_tbps) {
  if (!sm90::kDefaultDynamicSchedule || between_instantiations(p)) return false;
  const bool d96_kernel = p.headdim > 64 && p.headdim <= 96;
  if (!p.mask.has_mask()) {
    if (p.headdim == 256) return true;
    if (d96_kernel) return p.seqlen_k <= kSm90StaticUnmaskedMaxKeysHdim96;
    return p.headdim > 96 && p.headdim <= 128 && p.seqlen_k <= kSm90StaticUnmaskedMaxKeys;
  }
  // Causal (a right bound only): the masks whose tiles go longest first (launch.h).
  if (p.mask.right_bound_only()) {
    if (d96_kernel) return p.seqlen_k <= kSm90StaticCausalMaxKeysHdim96;
    const bool bandwidth_known_low = hbm_tbps > 0.0 && hbm_tbps < kSm90StaticCausalHdim64MinTBps;
    return p.headdim > 64 || (p.seqlen_k <= kSm90StaticCausalMaxKeysHdim64 && !bandwidth_known_low);
  }
  return p.seqlen_k <= kSm90StaticScheduleMaxKeys && !(p.headdim > 128 && p.seqlen_k <= kSm90L2GroupMaxKeys);
}

int64_t sm90_static_schedule_launches() { return launches_of(Variant::kStaticSchedule); }

int64_t sm90_default_launches() { return launches_of(Variant::kDefault); }

bool sm90_runs_narrow_twin(const AttentionProblem& p) { return runs_narrow(p); }

bool sm90_dynamic_schedule_by_default() { return sm90::kDefaultDynamicSchedule; }

// GQA head packing (cuda/sm90/pack_gqa.h).
Status sm90_supports_forward_pack_gqa(const AttentionProblem& p) {
  Status s = sm90_supports_forward(p);
  if (!s.ok()) return s;
  if (between_instantiations(p)) {
    return Status::Unsupported("GQA head packing is built for head dims " + sm90::head_dims_text(sm90::kForwardHeadDims) + " only, not " +
                               std::to_string(p.headdim));
  }
  if (runs_narrow(p)) {
    return Status::Unsupported("GQA head packing at head dim " + std::to_string(p.headdim) + " is not built (" +
                               dtype_name(p.dtype) + "; FLASHATTN_HDIMS / FLASHATTN_DTYPES)");
  }
  if (!pack_gqa_group_ok(p)) {
    return Status::Unsupported("GQA head packing needs nheads_q / nheads_kv in 2..64; got " +
                               std::to_string(p.nheads_q) + " / " + std::to_string(p.nheads_kv));
  }
  return Status::Ok();
}

Status sm90_forward_pack_gqa(const AttentionProblem& p) {
  Status s = sm90_supports_forward_pack_gqa(p);
  if (!s.ok()) return s;
  return launch_counted(p, packed_variant(p));
}

int64_t sm90_pack_gqa_launches() {
  return launches_of(Variant::kPackGqa) + launches_of(Variant::kPackGqaOneWg) + launches_of(Variant::kSlicedDecode);
}

bool sm90_picks_pack_gqa_one_wg(const AttentionProblem& p) {
  const EnvSetting setting = env_setting("FLASHATTN_SM90_PACK_GQA_ONE_WG");
  if (setting == EnvSetting::kOff) return false;
  if (!sm90_has_pack_gqa_one_wg(p.headdim) || p.nheads_kv <= 0) return false;
  if (int64_t(p.seqlen_q) * p.heads_per_kv() > kSm90PackGqaOneWgMaxRows) return false;
  return setting == EnvSetting::kOn ||
         (p.heads_per_kv() >= 2 && int64_t(p.batch) * p.nheads_kv <= kSm90PackGqaOneWgMaxTiles);
}

int64_t sm90_pack_gqa_one_wg_launches() { return launches_of(Variant::kPackGqaOneWg); }

bool sm90_picks_sliced_decode(const AttentionProblem& p) {
  const EnvSetting setting = env_setting("FLASHATTN_SM90_SLICED_DECODE");
  if (setting == EnvSetting::kOff) return false;
  if (!sm90_has_sliced_decode(p.headdim) || p.nheads_kv <= 0 || p.nheads_q % p.nheads_kv != 0) return false;
  if (int64_t(p.seqlen_q) * p.heads_per_kv() > kSm90SlicedDecodeMaxRows) return false;
  return setting == EnvSetting::kOn || sm90_sliced_decode_by_rule(p, sm90_sm_count(p.device_index));
}

int64_t sm90_sliced_decode_launches() { return launches_of(Variant::kSlicedDecode); }

}  // namespace flashattn

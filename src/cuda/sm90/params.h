// What the kernel receives, by value as a __grid_constant__ parameter (the tensor maps must live
// in parameter or constant space for TMA to read them).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "cuda/common/fast_divisor.h"

namespace flashattn {
namespace sm90 {

struct KernelParams {
  // 4-D maps (dim, row, head, batch). Variable length: batch extent 1 over the packed rows,
  // addressed at cu_seqlens[b] + row.
  CUtensorMap tma_q, tma_k, tma_v, tma_o;
  // 3-D map (row, head, batch) over the LSE, read where lse_by_tma is set (launch.h).
  CUtensorMap tma_lse;

  void* out = nullptr;  // the predicated (variable-length) epilogue writes through this
  int64_t out_batch_stride = 0, out_row_stride = 0, out_head_stride = 0;
  float* lse = nullptr;  // may be null
  int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 0;

  const int32_t* cu_seqlens_q = nullptr;  // null for fixed length
  const int32_t* cu_seqlens_k = nullptr;
  // Used lengths (null when not given): sequence b takes part with its first seqused[b] rows;
  // masks align to them and rows of out / lse past seqused_q are neither read nor written.
  const int32_t* seqused_q = nullptr;
  const int32_t* seqused_k = nullptr;
  // The output leaves through row-predicated stores (variable length, or seqused_q: a TMA box
  // would spill into the next sequence or past the used rows), else through TMA stores.
  int clip_rows = 0;
  // The LSE leaves through shared memory and a TMA store with O (Cfg::kLseThroughTma, where the
  // output is a TMA store and the LSE's rows are contiguous with 16-byte aligned strides).
  int lse_by_tma = 0;
  int batch = 0, nheads_q = 0, heads_per_kv = 1;
  int seqlen_q = 0, seqlen_k = 0;  // fixed: the lengths; varlen: the longest

  int num_m_blocks = 0, num_tiles = 0;
  int longest_first = 0;  // schedule tiles with the most key blocks first (causal)
  // With longest_first: tiles go in groups of this many (batch, head) pairs, whose K and V fit in
  // half the L2 together; longest first within each group (tile_scheduler.h, tile_coord).
  int l2_group_heads = 1;
  int counter_slot = 0;   // dynamic schedule: this launch's counter slot (tile_scheduler.h)

  // Softmax in base 2: logit * log2(e) = score_pre ? tanh(dot * score_pre) * score_log2 : dot * score_log2.
  float score_log2 = 0.0f;
  float score_pre = 0.0f;  // scale / softcap when the soft cap is on, else 0
  int window_left = -1, window_right = -1;

  // GQA head packing (Cfg::kPackGqa only; pack_gqa.h). Appended after every field the default
  // kernel reads, so its parameter offsets stay as they were.
  // The query rows a tile holds, pack_rows = kBlockM / G (rounded down) for the group
  // G = heads_per_kv (1..64, 1 for MHA decode's key splits; pack_div below): tile row r < pack_rows * G is query row r / G of
  // head kv * G + r % G; the rows past pack_rows * G (none where G is a power of two) hold none.
  int pack_rows = 0;
  int nheads_kv = 0;   // tiles are (m block, kv head, batch) when packing

  // Key rows past a sequence's length may hold anything (seqused_k, varlen rows past the last
  // sequence): the V rows of a partial last key block are zeroed in shared memory before P V
  // (mainloop_load.h). Set by the launch; 0 keeps the producer on its plain path.
  int zero_kv_tail = 0;

  // The tile decode's divisors (tile_scheduler.h, Cfg::kFastTileDecode), set by the launch for its
  // tile numbering. Appended after every other field, so their offsets stay as they were.
  FastDivisor div_m_blocks;     // num_m_blocks
  FastDivisor div_heads;        // nheads_q, or nheads_kv for GQA head packing
  FastDivisor div_group_tiles;  // l2_group_heads * num_m_blocks
  FastDivisor div_group;        // l2_group_heads
  FastDivisor div_last_group;   // the (batch, head) pairs of the last group (fewer where they do not divide)

  // K in global memory (element offsets as Operand's, problem.h), for the checked max's fallback
  // with KernelConfig::kFallbackKeysFromGlobal (warp_scores.h). Appended, as above.
  const void* k = nullptr;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  // Q likewise, for the fallback where Q's tile is released once its fragments are in registers
  // (KernelConfig::kQReleasedAtLoad). Appended, as above.
  const void* q = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;

  // The static schedule's split tail (the tail kernel, KernelConfig::kSplitTail, split_tail.h):
  // tiles from tail_first on are cut into pieces of key blocks, tail_units (tiles x tail_blocks)
  // shared out evenly over the CTAs; a tile's pieces meet in tail_partials, counted in
  // tail_counters. Appended, as above.
  int tail_first = 0, tail_units = 0, tail_blocks = 1;
  int* tail_counters = nullptr;
  float* tail_partials = nullptr;

  // V likewise, for the checked max's recompute of a tile (KernelConfig::kHeldCheckPerTile).
  // Appended, as above.
  const void* v = nullptr;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;

  // The problem's head dim, a multiple of 8 up to Cfg::kHeadDim: head dims between the
  // instantiations run on the next larger one (sm90_forward.cu, instantiation_head_dim). The
  // tensor maps span this many columns, so TMA fills the boxes' columns past it with zeros on
  // loads and leaves them out of stores; the stores and loads that go around TMA (the predicated
  // epilogue, the checked max's fallback from global memory) test it. Appended, as above.
  int head_dim = 0;

  // GQA head packing's group G (pack_rows above). Appended, as above.
  FastDivisor pack_div;

  // Key splits of the packed kernel (Cfg::kSplitKeys, split_keys.h): work index i is piece
  // i % key_splits of tile i / key_splits (num_tiles counts work indices); a tile's pieces meet
  // in split_partials (a slot per work index and consumer warpgroup), counted in
  // split_counters (sm90_merge_counters(key_splits) per tile and consumer warpgroup: the merge's
  // levels, split_keys.h). key_splits 1: no split, the pointers
  // null. Appended, as above.
  int key_splits = 1;
  FastDivisor div_key_splits;
  int* split_counters = nullptr;
  float* split_partials = nullptr;
  // The pieces combined by a kernel of their own after this one (split_combine.h): every piece
  // only writes its slot, nothing is counted or merged here. Appended, as above.
  int split_combine = 0;
  // Variable length: the rows of q and k that cu_seqlens' entries are clamped to
  // (variants/sequence.h: entries the host did not read may be out of range). Appended, as above.
  int cu_rows_q = 0, cu_rows_k = 0;
  // Paged K/V (Cfg::kReadsPages, paged_blocks.h): key block n of sequence b is block
  // n % page_blocks of page block_table[b * block_table_stride + n / page_blocks]; null when k
  // and v are not pages. Appended, as above.
  const int32_t* block_table = nullptr;
  int block_table_stride = 0;
  FastDivisor page_blocks;  // key blocks a page (page_size / kBlockN)
  int num_pages = 0;
};

// The head dims whose kernels carry the zeroing above; problems that need it at larger head dims
// go to the sm80 kernel (sm90_supports_forward). All of them now: at 256 the producer's extra code
// first made ptxas spill 40 bytes in the consumers, but not since the v5 kernel (CUDA 13.0: 0 bytes
// of stack, no LDL/STL, in the default, packed and static-schedule hdim 256 instantiations).
constexpr int kZeroKvTailMaxHeadDim = 256;

// The harness's boundary timings (KernelConfig::kTimingWithoutStore / Staging / Send): whether
// the part `left_out` names is left out. Where it is set the answer is always true (a launch has
// tiles), but the compiler cannot tell, so what the part would have read (O, its normalisation)
// stays computed; where it is not, a constant false.
__device__ __forceinline__ bool harness_leaves_out(bool left_out, const KernelParams& p) {
  return left_out && p.num_tiles > 0;
}

}  // namespace sm90
}  // namespace flashattn

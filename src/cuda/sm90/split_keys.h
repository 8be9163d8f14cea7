// Key splits of the packed kernel (Cfg::kSplitKeys; KernelParams::key_splits, set by the launch
// where a problem's tiles are fewer than the SMs: launch.h, kernel_choice.h sm90_key_splits).
// A decode step with GQA packing has one tile per KV head and batch: (1, 32 / 8, 128k keys) is 8
// tiles, so 8 of 132 SMs would stream 64 MB of K and V each. With S splits, work index
// i = tile * S + piece is piece `piece` of tile `tile`: the piece's share of the tile's visible
// key blocks, run as a short tile of its own (its own Q load, softmax state, normalised O and
// logsumexp); the S pieces of a tile then meet in global memory as the split tail's do
// (piece_merge.h), the last to arrive merging them in piece order and storing the tile whole.
// A tile with fewer visible key blocks than S (varlen, seqused, a window) is cut into as many
// pieces as it has blocks; its work indices past them do nothing. A tile without a visible key is
// one piece, stored empty. The dynamic schedule hands out the work indices as it does tiles.
#pragma once

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/config.h"
#include "cuda/sm90/kernel_choice.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/piece_merge.h"

namespace flashattn {
namespace sm90 {

// The tile of work index `index`, and in `piece` which of its pieces it is.
template <class Cfg>
__device__ __forceinline__ int split_tile_of(const KernelParams& p, int index, int& piece) {
  if constexpr (Cfg::kSplitKeys) {
    return p.div_key_splits.divide(index, piece);
  } else {
    piece = 0;
    return index;
  }
}

// Narrows the tile's key-block range to its piece `piece` and returns how many pieces the tile
// has (its visible blocks, at most key_splits, at least 1; blocks shared out as evenly as integers
// allow), or 0 where the tile has no such piece: the work index then does nothing. The producer
// and the consumers both call it, so they agree on every work index.
template <int kBlockN>
__device__ __forceinline__ int keep_key_piece(BlockRange<kBlockN>& r, int piece, int splits) {
  const int first = r.n_begin, blocks = r.n_end - r.n_begin;
  const int pieces = max(1, min(splits, blocks));
  if (piece >= pieces) return 0;
  r.n_begin = first + piece * blocks / pieces;
  r.n_end = first + (piece + 1) * blocks / pieces;
  return pieces;
}

// Where a warpgroup's pieces of a tile meet: slots by work index, sm90_merge_counters counters a
// tile.
template <class Cfg>
struct KeySplitMerge {
  using Slot = PieceSlot<Cfg::kHeadDim>;

  const KernelParams& p;
  int wg, thread;

  __device__ __forceinline__ float4* slot(int tile, int piece) const {
    return reinterpret_cast<float4*>(p.split_partials) +
           (int64_t(tile * p.key_splits + piece) * Cfg::kConsumerWarpgroups + wg) * Slot::kSlotVectors + thread;
  }

  // Whether either of this thread's two accumulator rows (wgmma's layout: warp w holds rows
  // 16 w .. 16 w + 15 of the warpgroup's 64, lane l rows l / 4 and l / 4 + 8) is a query row of
  // the sequence. The others are never stored, so their O and L go neither to a slot nor back:
  // a decode tile at G = 4 has 4 query rows of a warpgroup's 64, 16 threads of 128.
  // `th`: the thread asked about (this one, or the lane of warp 0 whose rows another warp merges).
  __device__ __forceinline__ bool holds_query_row(const SequenceInfo& seq, const TileCoord& t, int th) const {
    const int r = wg * kRowsPerConsumer + (th / 32) * 16 + (th % 32) / 4;
    auto is_query = [&](int row) {
      return tile_row_holds_query<Cfg>(p, row) && tile_row_query<Cfg>(p, t, row) < seq.len_q;
    };
    return is_query(r) || is_query(r + 8);
  }

  // Piece `piece` of `pieces` of tile `t` (work tile `tile`) of sequence `seq` has left its
  // normalised O and L (this warpgroup's rows) in o and lse. Returns true where this warpgroup
  // arrived last: o and lse then hold the whole tile in its query rows.
  // Up to kSm90MergeGroupPieces pieces (and at head dim 256 always): the last to arrive merges
  // them all. Past that, in two levels: the last of each group of kSm90MergeGroupPieces
  // consecutive pieces merges the group into the group's first slot, and the last group merges
  // the groups' results. Each level merges in order (pieces, then groups), so the bits do not
  // depend on the order of arrival. Counters (sm90_merge_counters of them a tile and warpgroup):
  // the groups' meeting first, then one a group; each reset by the last to count in it.
  __device__ bool merge(float (&o)[Slot::kOAccum], float (&lse)[2], const SequenceInfo& seq, const TileCoord& t,
                        int tile, int piece, int pieces) const {
    int* const meeting = p.split_counters + (tile * Cfg::kConsumerWarpgroups + wg) * sm90_merge_counters(p.key_splits);
    const bool live = holds_query_row(seq, t, thread);
    if (live) Slot::write(slot(tile, piece), o, lse);
    if constexpr (kSm90CombineKernelBuilt) {
      if (p.split_combine) return false;  // combine_pieces_kernel merges and stores the tile
    }
    const int barrier = Cfg::kEpilogueBarrier0 + wg;
    // Whether all of the warpgroup's query rows are warp 0's (decode tiles of up to 16 rows):
    // then all four warps merge them (merge_pieces_for_warp0). Through a vote, as count_piece_in's
    // answer: the compiler then knows it is the warp's.
    bool warp0_rows = false;
    if constexpr (kWarp0Merge) {
      warp0_rows = !__any_sync(0xffffffffu, named_barrier_any(barrier, kWarpgroupThreads, live && thread >= 32));
    }
    const int warp = thread / 32;
    const bool owner_live = holds_query_row(seq, t, thread % 32);
    // Piece c's slot at warp 0's lane thread % 32, whose rows this thread merges in that case.
    auto owner_slot = [&](int c) { return slot(tile, c) - warp * 32; };
    // Two levels at head dims up to 192 only: the d256 kernels spill with the second inlined
    // merge_pieces (and one call in a loop over the levels spilled d128's and serialised its
    // wgmmas).
    if (kTwoLevels && pieces > kSm90MergeGroupPieces) {
      const int group = piece / kSm90MergeGroupPieces, first = group * kSm90MergeGroupPieces;
      const int last = min(first + kSm90MergeGroupPieces, pieces) - 1;
      int* const group_counter = meeting + 1 + group;
      if (!count_piece_in(group_counter, last - first, barrier, thread)) return false;
      if (thread == 0) *group_counter = 0;  // every piece of the group has arrived: clean for the next launch
      if (warp0_rows) {
        // The group's result where its first piece was: each thread rewrites only the O it has
        // just read itself, and warp 0 the L once every warp has read it.
        float4 share[Warp0Share<Cfg::kHeadDim>::kVectors];
        merge_pieces_for_warp0<Cfg::kHeadDim>(share, lse, first, last, owner_slot, owner_live, warp);
        write_share(owner_slot(first), share, lse, owner_live, warp, barrier);
      } else {
        merge_pieces<Cfg::kHeadDim>(o, lse, first, last, piece, [&](int c) { return slot(tile, c); }, live);
        // The group's result where its first piece was: each thread rewrites only the entries it
        // has just read itself.
        if (live) Slot::write(slot(tile, first), o, lse);
      }
      if (!count_piece_in(meeting, sm90_merge_groups(pieces) - 1, barrier, thread)) return false;
      if (thread == 0) *meeting = 0;
      if (warp0_rows) {
        float4 share[Warp0Share<Cfg::kHeadDim>::kVectors];
        merge_pieces_for_warp0<Cfg::kHeadDim>(share, lse, 0, sm90_merge_groups(pieces) - 1,
                                              [&](int g) { return owner_slot(g * kSm90MergeGroupPieces); }, owner_live,
                                              warp);
        share_back(o, lse, share, tile, owner_live, live, warp, barrier);
      } else {
        merge_pieces<Cfg::kHeadDim>(o, lse, 0, sm90_merge_groups(pieces) - 1, group,
                                    [&](int g) { return slot(tile, g * kSm90MergeGroupPieces); }, live);
      }
      return true;
    }
    if (!count_piece_in(meeting, pieces - 1, barrier, thread)) return false;
    if (thread == 0) *meeting = 0;  // every piece has arrived: clean for the next launch
    if (warp0_rows) {
      float4 share[Warp0Share<Cfg::kHeadDim>::kVectors];
      merge_pieces_for_warp0<Cfg::kHeadDim>(share, lse, 0, pieces - 1, owner_slot, owner_live, warp);
      share_back(o, lse, share, tile, owner_live, live, warp, barrier);
    } else {
      merge_pieces<Cfg::kHeadDim>(o, lse, 0, pieces - 1, piece, [&](int c) { return slot(tile, c); }, live);
    }
    return true;
  }

  // A share (merge_pieces_for_warp0) into the owner's slot at `owner_first`: each thread's O
  // float4s (it alone read them), then, after a barrier (every warp has read every L), the L
  // by warp 0.
  __device__ __forceinline__ static void write_share(float4* owner_first, const float4 (&share)[Warp0Share<Cfg::kHeadDim>::kVectors],
                                                     const float (&lse)[2], bool owner_live, int warp, int barrier) {
    if (owner_live) {
#pragma unroll
      for (int k = 0; k < Warp0Share<Cfg::kHeadDim>::kVectors; ++k) {
        __stcg(owner_first + Warp0Share<Cfg::kHeadDim>::offset(warp, k), share[k]);
      }
    }
    named_barrier_sync(barrier, kWarpgroupThreads);
    if (owner_live && warp == 0) __stcg(owner_first + Slot::kOAccum / 4 * kWarpgroupThreads, make_float4(lse[0], lse[1], 0.0f, 0.0f));
  }

  // The last level's shares back to their owners' registers through the first piece's slot (the
  // L2: the barrier orders the warpgroup's writes before its reads). Every thread loads on the
  // one path (O's registers are wgmma accumulators); warps 1-3 hold no row and read nothing.
  __device__ __forceinline__ void share_back(float (&o)[Slot::kOAccum], float (&lse)[2],
                                             const float4 (&share)[Warp0Share<Cfg::kHeadDim>::kVectors], int tile,
                                             bool owner_live, bool live, int warp, int barrier) const {
    if (owner_live) {
#pragma unroll
      for (int k = 0; k < Warp0Share<Cfg::kHeadDim>::kVectors; ++k) {
        __stcg(slot(tile, 0) - warp * 32 + Warp0Share<Cfg::kHeadDim>::offset(warp, k), share[k]);
      }
    }
    named_barrier_sync(barrier, kWarpgroupThreads);
    const float4* mine = slot(tile, 0);
#pragma unroll
    for (int i = 0; i < Slot::kOAccum / 4; ++i) {
      const float4 v = load_if(mine + i * kWarpgroupThreads, live);
      o[4 * i] = v.x, o[4 * i + 1] = v.y, o[4 * i + 2] = v.z, o[4 * i + 3] = v.w;
    }
    // Warp 0's lanes merged their own rows' L; the other warps' is a lane of warp 0's.
#pragma unroll
    for (int h = 0; h < 2; ++h) lse[h] = live ? lse[h] : -INFINITY;
  }
  static constexpr bool kTwoLevels = sm90_merges_in_two_levels(Cfg::kHeadDim);
  // The whole warpgroup merging warp 0's rows: head dims up to 128 (decode's).
  static constexpr bool kWarp0Merge = Cfg::kHeadDim <= 128;
};

// Counts a launch whose tiles were split by keys (kernel_choice.h, sm90_key_split_launches).
void count_key_split_launch();
// Counts a launch whose pieces the combine kernel merged (kernel_choice.h, sm90_split_combine_launches).
void count_split_combine_launch();

}  // namespace sm90
}  // namespace flashattn

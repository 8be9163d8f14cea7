// The split tail of the static schedule (KernelConfig::kHasTailKernel, TailKernelConfig). With
// equal tiles (unmasked, one length) a persistent grid of G CTAs runs T tiles in ceil(T / G)
// waves, and the last wave holds only T mod G of them: at the protocol's shapes 2048 tiles (d128)
// or 1024 (d256) on 132 SMs, so 68 of 132 CTAs (or 100) run one tile more than the rest and the
// others wait about 3% of the kernel. Here the kernel runs the whole waves alone, and a second
// kernel, the tail kernel, the last T mod G tiles cut by keys: their key blocks (units, tile by
// tile) are shared out evenly, CTA c taking units [c U / G, (c + 1) U / G) of the
// U = (T mod G) x blocks, so every CTA ends within a block of the others (Stream-K's tail, on the
// attention's key loop). Each of its CTAs starts as soon as one of the first kernel's leaves its
// SM (programmatic dependent launch, launch.h). Session 31 had both in one kernel: the split's
// code moved ptxas's schedule of the key loop and lost 2-3% where nothing was split.
//
// A piece (key blocks [n_lo, n_hi) of one tile) is a short tile: its own Q load, first S,
// softmax state and normalised O with its logsumexp. A tile's pieces meet in global memory:
// each warpgroup writes its O and L (fp32, in its fragment layout) to its CTA's slot, then counts
// itself in the tile's counter; the last to arrive reads the others, merges them
//   L = log(sum_i exp(L_i)),  O = sum_i exp(L_i - L) O_i
// and stores the tile as a whole one. Nobody waits for anybody (no co-residency assumed), and
// the last arrival resets the counter for the next launch. A CTA's range is shorter than a tile
// (T mod G < G), so it holds at most two pieces: slot 0 for the first, 1 for the second.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/sm90/config.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/piece_merge.h"
#include "cuda/sm90/ptx.h"
#include "cuda/sm90/tile_scheduler.h"
#include "problem.h"

namespace flashattn {
namespace sm90 {

// The first unit of CTA `cta`'s share of the tail (the grid's: its last unit + 1). In 32 bits
// (the launch splits only where units x grid does not overflow them): a 64-bit division is a
// call, around which the d256 kernel spilled.
__device__ __forceinline__ int tail_unit(const KernelParams& p, int cta, int grid) {
  return int(uint32_t(cta) * uint32_t(p.tail_units) / uint32_t(grid));
}
// The CTA whose share holds unit u (the largest c with tail_unit(c) <= u).
__device__ __forceinline__ int tail_owner(const KernelParams& p, int u, int grid) {
  return int((uint32_t(u + 1) * uint32_t(grid) - 1u) / uint32_t(p.tail_units));
}

// The key-block bound of a whole tile (no piece's).
constexpr int kWholeTile = 0x7fffffff;

// The first unit of this CTA's piece k of the tail (its first piece starts its share, each
// later one a tile), or -1 past its share. Everything is read afresh from the step count alone,
// so a loop over pieces keeps one counter live (the producer has 24 registers).
__device__ __forceinline__ int nth_tail_unit(const KernelParams& p, int k) {
  const int grid = grid_size_reread(), cta = cta_index_reread();
  const int first = tail_unit(p, cta, grid);
  const int u = k == 0 ? first : (first / p.tail_blocks + k) * p.tail_blocks;
  return u < tail_unit(p, cta + 1, grid) ? u : -1;
}
// The tile of this CTA's piece k of the tail, or p.num_tiles past its share.
__device__ __forceinline__ int tail_tile_of_step(const KernelParams& p, int k) {
  const int u = nth_tail_unit(p, k);
  return u < 0 ? p.num_tiles : p.tail_first + u / p.tail_blocks;
}

// One piece of the tail: key blocks [n_lo, n_hi) of tile `index`.
struct TailPiece {
  int index, n_lo, n_hi;
};
// The piece that starts at unit u of a CTA whose share ends at `end`.
__device__ __forceinline__ TailPiece tail_piece_at(const KernelParams& p, int u, int end) {
  const int tile = u / p.tail_blocks;
  TailPiece piece;
  piece.index = p.tail_first + tile;
  piece.n_lo = u - tile * p.tail_blocks;
  piece.n_hi = min(p.tail_blocks, piece.n_lo + end - u);
  return piece;
}
// The same for this CTA, from the consumers (the loading thread reads the CTA index and the grid
// afresh instead).
__device__ __forceinline__ TailPiece tail_piece_of_this_cta(const KernelParams& p, int u) {
  return tail_piece_at(p, u, tail_unit(p, int(blockIdx.x) + 1, int(gridDim.x)));
}

// Where a warpgroup's pieces meet (see the top of the file; piece_merge.h).
template <class Cfg>
struct TailMerge {
  using Slot = PieceSlot<Cfg::kHeadDim>;
  static constexpr int kOAccum = Slot::kOAccum;
  static constexpr int kSlotVectors = Slot::kSlotVectors;

  const KernelParams& p;
  int wg, thread;

  __device__ __forceinline__ float4* slot(int cta, int which) const {
    return reinterpret_cast<float4*>(p.tail_partials) +
           int64_t((2 * cta + which) * Cfg::kConsumerWarpgroups + wg) * kSlotVectors + thread;
  }

  // The piece that starts at unit u has left its normalised O and L (this warpgroup's rows) in
  // o and lse. Returns true where this warpgroup arrived last: o and lse then hold the whole tile.
  __device__ bool merge(float (&o)[kOAccum], float (&lse)[2], int u) const {
    const int grid = int(gridDim.x), cta = int(blockIdx.x);
    const int tile = u / p.tail_blocks;
    const int first_unit = tile * p.tail_blocks;
    const int first_cta = tail_owner(p, first_unit, grid);
    const int last_cta = tail_owner(p, first_unit + p.tail_blocks - 1, grid);
    int* counter = p.tail_counters + tile * Cfg::kConsumerWarpgroups + wg;
    const int barrier = Cfg::kEpilogueBarrier0 + wg;
    // The piece with the tile's first key block ends its CTA's share (a share is shorter than a
    // tile), so it is as a rule the last of its tile's pieces to end: where the others have all
    // arrived it merges at once, without writing its own partial first (session 32's timeline:
    // the write, the fence and the count took 4-5 us at d256, at the tail's end).
    bool others_in = false;
    if (u == first_unit) {
      if (thread == 0) {
        others_in = atomicAdd(counter, 0) == last_cta - first_cta;
        __threadfence();
      }
      // A vote, as in count_piece_in.
      others_in = __any_sync(0xffffffffu, named_barrier_any(barrier, kWarpgroupThreads, others_in));
    }
    if (!others_in) {
      Slot::write(slot(cta, u == tail_unit(p, cta, grid) ? 0 : 1), o, lse);
      if (!count_piece_in(counter, last_cta - first_cta, barrier, thread)) return false;
    }
    if (thread == 0) *counter = 0;  // every piece has arrived: clean for the next launch
    // Merged in the order of the CTAs. Another CTA's piece of this tile: only the first CTA's
    // share can have begun in an earlier tile (shares are contiguous), and then the piece is in
    // its second slot. Found once here, not by a division per piece and pass.
    const int first_cta_slot = tail_unit(p, first_cta, grid) < first_unit ? 1 : 0;
    merge_pieces<Cfg::kHeadDim>(o, lse, first_cta, last_cta, cta,
                                [&](int c) { return slot(c, c == first_cta ? first_cta_slot : 0); });
    return true;
  }
};

// Workspaces made inside a graph being captured (split_tail_workspace): allocated and their
// counters zeroed by nodes of the graph ahead of the launch, and freed by a node after it
// (free_after_launch), so that the graph owns them, they are zeroed at every replay, and nothing
// outlives the graph. Memory nodes bind the graph: it cannot be a child graph, and one
// instantiation lives at a time (FLASHATTN_SM90_CAPTURED_SPLITS=0 keeps capture unsplit).
// A persistent workspace cannot serve a graph: a replay may run on another stream beside eager
// launches, and a later, larger launch would free what the graph still points at.
class CapturedWorkspaces {
 public:
  CapturedWorkspaces() = default;
  CapturedWorkspaces(const CapturedWorkspaces&) = delete;
  CapturedWorkspaces& operator=(const CapturedWorkspaces&) = delete;
  // Frees what free_after_launch did not (a launch that returned early); errors are dropped, as
  // the capture has then failed anyway.
  ~CapturedWorkspaces();
  // Frees every workspace made for this launch, ordered after the launch's kernels on `stream`.
  Status free_after_launch();
  // Allocates `bytes` on the captured `stream` (a node of the graph).
  Status allocate(void* stream, size_t bytes, void** base);

 private:
  void* stream_ = nullptr;
  void* blocks_[2] = {nullptr, nullptr};  // a launch needs at most two (launch.h)
  int count_ = 0;
};

// The workspace of the split tail and of the key splits (split_keys.h) on `stream` of `device`
// (split_tail.cu; launches on one stream take turns with it): at least the bytes
// asked for, counters zeroed when first made. Kept per (device, stream) for the process's life,
// so that launches on different streams never share one. On a stream being captured into a
// graph the workspace is the graph's own instead (CapturedWorkspaces, in `captured`), or none
// (both pointers null: the launch splits nothing) where the device has no stream-ordered
// allocation or FLASHATTN_SM90_CAPTURED_SPLITS=0.
Status split_tail_workspace(int device, void* stream, size_t counter_bytes, size_t slot_bytes,
                            CapturedWorkspaces& captured, int** counters, float** slots);
// Counts a launch that splits its tail (kernel_choice.h, sm90_split_tail_launches).
void count_split_tail_launch();

}  // namespace sm90
}  // namespace flashattn

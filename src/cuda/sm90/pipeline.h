// The shared-memory handshakes of the kernel. Each K/V stage has a "full" mbarrier (the producer's
// expect-tx arrival plus the TMA bytes) and an "empty" one (one arrival per consumer warp once its
// wgmma reading the stage has completed). Q has the same pair; its empty side completes when every
// consumer warp has retired the tile's last S = Q K^T.
#pragma once

#include <cstdint>

#include "cuda/sm90/config.h"
#include "cuda/sm90/ptx.h"

namespace flashattn {
namespace sm90 {

// Position in a ring of kStages slots; the phase bit flips each time the ring wraps.
template <int kStages>
struct PipelineState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
};

template <class Cfg>
struct SharedBarriers {
  uint32_t base;  // shared address of the first mbarrier
  __device__ __forceinline__ uint32_t q_full() const { return base; }
  __device__ __forceinline__ uint32_t q_empty() const { return base + 8; }
  __device__ __forceinline__ uint32_t k_full(int s) const { return base + 16 + 8 * s; }
  __device__ __forceinline__ uint32_t k_empty(int s) const { return base + 16 + 8 * (Cfg::kStages + s); }
  __device__ __forceinline__ uint32_t v_full(int s) const { return base + 16 + 8 * (2 * Cfg::kStages + s); }
  __device__ __forceinline__ uint32_t v_empty(int s) const { return base + 16 + 8 * (3 * Cfg::kStages + s); }

  // The tile mailbox's barriers (dynamic schedule): full, then empty, of each of its
  // kMailboxSlots slots (see TileRing).
  __device__ __forceinline__ uint32_t tile_mailbox() const { return base + 16 + 8 * (4 * Cfg::kStages); }
  // The V-tail zeroing job (mainloop_load.h): full (the loading thread's arrival plus the staged
  // V block's TMA bytes), then empty (the zeroing warp's arrival once the job is done).
  __device__ __forceinline__ uint32_t zero_job() const {
    return base + 16 + 8 * (4 * Cfg::kStages + 2 * kMailboxSlots);
  }

  __device__ __forceinline__ void init() const {
    for (int slot = 0; slot < kMailboxSlots; ++slot) {
      mbarrier_init(tile_mailbox() + 16 * slot, 1);
      mbarrier_init(tile_mailbox() + 16 * slot + 8, Cfg::kConsumerWarps + 1);
    }
    mbarrier_init(zero_job(), 1);
    mbarrier_init(zero_job() + 8, 1);
    mbarrier_init(q_full(), 1);
    mbarrier_init(q_empty(), Cfg::kConsumerWarps);
    // Cluster pairs: the consumer warps of both CTAs release each K/V stage.
    constexpr uint32_t kKvReleases = Cfg::kConsumerWarps * (Cfg::kClusterPairs ? 2 : 1);
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(k_full(s), 1);
      mbarrier_init(k_empty(s), kKvReleases);
      mbarrier_init(v_full(s), 1);
      mbarrier_init(v_empty(s), kKvReleases);
    }
    fence_barrier_init();
  }
};

// Shared-memory addresses of the tiles (all 1024-byte aligned, see config.h).
template <class Cfg>
struct SharedTiles {
  uint32_t base;
  __device__ __forceinline__ uint32_t q_column(int c) const { return base + Cfg::kQOffset + c * Cfg::kQColumnBytes; }
  __device__ __forceinline__ uint32_t k_column(int stage, int c) const {
    return base + Cfg::kKOffset + stage * Cfg::kKVStageBytes + c * Cfg::kKVColumnBytes;
  }
  __device__ __forceinline__ uint32_t o_column(int c) const { return base + Cfg::kOOffset + c * Cfg::kQColumnBytes; }
  __device__ __forceinline__ uint32_t v_column(int stage, int c) const {
    return base + Cfg::kVOffset + stage * Cfg::kKVStageBytes + c * Cfg::kKVColumnBytes;
  }
  // All ones (Cfg::kRowSumByTensor): B of P V's ones column.
  __device__ __forceinline__ uint32_t ones() const { return base + Cfg::kOnesOffset; }
  // The LSE of tile row r (Cfg::kLseTile).
  __device__ __forceinline__ uint32_t lse_row(int r) const { return base + Cfg::kLseOffset + 4 * r; }
};

}  // namespace sm90
}  // namespace flashattn

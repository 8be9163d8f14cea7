// Static persistent schedule: the grid is at most one CTA per SM; in wave w (tiles w * grid to
// w * grid + grid - 1) CTA c takes tile c when w is even and grid - 1 - c when w is odd. With the
// tiles sorted longest first, that snake gives every CTA about the same work. Producer and
// consumers walk the same sequence independently, so the schedule needs no communication.
#pragma once

#include "cuda/sm90/params.h"

namespace flashattn {
namespace sm90 {

struct TileCoord {
  int m_block = 0, head = 0, batch = 0;
};

// Tile of this CTA in wave `wave` (tiles first .. first + grid - 1). Written as plain arithmetic
// on the loop counters: a search loop here (v2's TileWalk) made the compiler treat the consumers'
// pipeline state as non-uniform, moving the wgmma descriptors out of uniform registers (an R2UR
// before every HGMMA, about 8% slower).
__device__ __forceinline__ int snake_tile(int wave, int first) {
  return first + ((wave & 1) ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x));
}

__device__ __forceinline__ TileCoord tile_coord(const KernelParams& p, int index) {
  const int heads = p.batch * p.nheads_q;
  TileCoord t;
  int bh;
  if (p.longest_first) {
    // Causal: the last query blocks see the most keys; running them first keeps the tail short.
    t.m_block = p.num_m_blocks - 1 - index / heads;
    bh = index % heads;
  } else {
    // Consecutive tiles share a head, so the CTAs running at once reuse its K and V from L2.
    t.m_block = index % p.num_m_blocks;
    bh = index / p.num_m_blocks;
  }
  t.head = bh % p.nheads_q;
  t.batch = bh / p.nheads_q;
  return t;
}

}  // namespace sm90
}  // namespace flashattn

// Static persistent schedule: the grid is at most one CTA per SM and CTA c takes tiles c, c + grid,
// c + 2 grid, ... Producer and consumers walk the same sequence independently, so the schedule
// needs no communication between them.
#pragma once

#include "cuda/sm90/params.h"

namespace flashattn {
namespace sm90 {

struct TileCoord {
  int m_block = 0, head = 0, batch = 0;
};

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

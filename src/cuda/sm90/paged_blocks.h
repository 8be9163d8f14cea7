// Paged K/V (AttentionParams::block_table) in the packed kernel's producer: key block n of
// sequence b lies inside one page (the launch takes page sizes that are multiples of kBlockN
// only), so its TMA coordinates are a row inside that page and the page as the map's batch
// index. The maps over k and v are then (dim, page_size, heads, num_pages) (launch.h). A page
// index the table names outside [0, num_pages) acts as its bound, as in the sm80 kernel: the API
// launches before it has read the entries back (and then raises on them), and a caller who
// vouched for them (indices_checked) gets the bound's page, never memory past the pool.
#pragma once

#include "cuda/sm90/params.h"

namespace flashattn {
namespace sm90 {

// Whether Cfg's kernel carries the page code (KernelParams::block_table, set at run time): the
// packed kernel only, which decode steps reach (sm90_forward.cu), at every head dim. Above 128
// the table read made ptxas spill in the 24-register loading thread (CUDA 13.0: 4 bytes stored,
// 24 loaded, on the path of every key block); those kernels' producer takes 32
// (KernelConfig::kProducerRegisters; session 84).
template <class Cfg>
__host__ __device__ constexpr bool reads_pages() {
  return Cfg::kPackGqa && !Cfg::kClusterPairs;
}

// The row inside its page (k_row) and the page (kv_batch) of key block n of sequence `batch`.
// The table read is issued here, before the caller waits for a free stage, so its latency
// hides under that wait.
template <int kBlockN>
__device__ __forceinline__ void place_paged_block(const KernelParams& p, int batch, int n, int& k_row, int& kv_batch) {
  int block_in_page;
  const int entry = p.page_blocks.divide(n, block_in_page);
  kv_batch = min(max(__ldg(p.block_table + batch * p.block_table_stride + entry), 0), p.num_pages - 1);
  k_row = block_in_page * kBlockN;
}

}  // namespace sm90
}  // namespace flashattn

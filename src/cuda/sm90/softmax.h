// Online softmax over one consumer thread's two rows of S, in base 2 with the scale folded into
// one multiply-add per element. Row sums stay per-thread partial sums until the end (every
// thread of a row rescales by the same factor), so the loop needs shuffles only for the max.
#pragma once

#include <cmath>

#include "cuda/common/mask_bits.h"
#include "cuda/sm90/block_range.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/ptx.h"

namespace flashattn {
namespace sm90 {

// kTreeRowMax: the row max of a block as a tree of pairwise fmax (KernelConfig::kTreeRowMax);
// false: two chains, as up to session 15.
// kMaxSlack: the running max a row's exp2s subtract stays where it is until a block's max passes
// it by more than kMaxSlack in log2 units (KernelConfig::kMaxSlack); 0: it follows every rise.
// kMaxByVote (with a slack): a warp whose threads' own maxes all stay within the slack skips the
// shuffles that make a row's max (KernelConfig::kMaxByVote).
// kKeptMaxUnitRescale (with the vote): where the vote keeps every row's max, the rescale factor
// is set to 1 instead of computed as exp2(0) (KernelConfig::kKeptMaxUnitRescale).
// kRowSumByTensor: no sums here; P V's ones column sums each row into O's last four accumulators
// (KernelConfig::kRowSumByTensor), which the rescales of O scale alike.
// Checked max (keep_row_maxes, exponentiate_block, kept_max_held; KernelConfig::kCheckedMax): after a tile's first block the
// exp2s subtract the kept max without a look at the block's scores, and the sums check them after.
// kWithoutExp2: the harness's timing without the key loop's exp2s (KernelConfig::kTimingWithoutExp2,
// wrong output on purpose): each keeps the value it would have exponentiated.
template <int kBlockN, bool kTreeRowMax = false, int kMaxSlack = 0, bool kMaxByVote = false,
          bool kKeptMaxUnitRescale = false, bool kRowSumByTensor = false, bool kWithoutExp2 = false>
struct OnlineSoftmax {
  static constexpr bool kVote = kMaxSlack > 0 && kMaxByVote;
  static constexpr int kAccum = kBlockN / 2;
  float row_max[2];  // of the transformed score (dot, or tanh of it), before the log2 scale:
                     // the max the exp2s subtract, which with kMaxSlack may trail the true one
  float row_sum[2];  // this thread's share of the row's sum of exp2
  float rescale[2];  // factor for O after the last update

  // max of v[kLo .. kLo + kN), halves first (compile-time indices: v stays in registers).
  template <int kLo, int kN, int kSize>
  __device__ __forceinline__ static float range_max(const float (&v)[kSize]) {
    if constexpr (kN == 1) {
      return v[kLo];
    } else {
      return fmaxf(range_max<kLo, kN / 2>(v), range_max<kLo + kN / 2, kN - kN / 2>(v));
    }
  }

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int h = 0; h < 2; ++h) row_max[h] = -INFINITY, row_sum[h] = 0.0f, rescale[h] = 1.0f;
  }

  // Soft cap: s = tanh(dot * scale / cap); the cap and log2(e) are in score_log2.
  __device__ __forceinline__ static void apply_softcap(float (&s)[kAccum], float score_pre) {
#pragma unroll
    for (int i = 0; i < kAccum; ++i) s[i] = tanhf(s[i] * score_pre);
  }

  // Sets the masked scores of fragment row h (query row `row` of the sequence) to -inf. Row and
  // column of register 4i + 2h + e: see fragment.h. Bounds relative to the thread's first column,
  // so that each test compares with the constant 8 i + e: absolute columns for all kBlockN / 4
  // registers made ptxas keep (and at kBlockN 176 spill) that many column values. Without a left
  // window (causal, a right window, a partial last block) only the upper bound is tested: one
  // compare a score instead of two (the lower one cannot hold; at hdim 64 causal 512 the second
  // compare was 2.1 M of the kernel's 61 M instructions, session 8's ncu).
  // kByBits: the bounds become one word of kept columns per 32 scores of the row
  // (cuda/common/mask_bits.h), and each score tests its bit (config.h kMaskByBits): the tests of
  // seven constant bit positions of one register are one R2P, where the compares took one ISETP a
  // score (cuDNN issued 2.5x fewer ISETP on the diagonal block, session 11's ncu).
  // kChunks: the 8-column groups looked at (fewer for a narrowed block, whose later columns are
  // not used).
  template <int kChunks = kBlockN / 8, bool kByBits = false>
  __device__ __forceinline__ static void mask_row(float (&s)[kAccum], const KernelParams& p, const SequenceInfo& seq,
                                                  int row, int h, int n_block, FragmentPosition pos) {
    const int col0 = n_block * kBlockN + pos.col0;
    int hi = seq.len_k - col0;
    if (p.window_right >= 0) hi = min(hi, row + seq.diag() + p.window_right + 1 - col0);
    if constexpr (kByBits) {
#pragma unroll
      for (int w = 0; w < (2 * kChunks + 31) / 32; ++w) {
        uint32_t keep = columns_below(hi, w);
        if (p.window_left >= 0) keep &= ~columns_below(row + seq.diag() - p.window_left - col0, w);
#pragma unroll
        for (int k = 32 * w; k < 2 * kChunks && k < 32 * w + 32; ++k) {
          if (!((keep >> (k - 32 * w)) & 1u)) s[4 * (k >> 1) + 2 * h + (k & 1)] = -INFINITY;
        }
      }
    } else if (p.window_left >= 0) {
      const int lo = row + seq.diag() - p.window_left - col0;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (8 * i + e >= hi || 8 * i + e < lo) s[4 * i + 2 * h + e] = -INFINITY;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (8 * i + e >= hi) s[4 * i + 2 * h + e] = -INFINITY;
        }
      }
    }
  }

  // Masks the thread's two fragment rows of a tile whose rows start at query row tile_row0.
  template <int kChunks = kBlockN / 8, bool kByBits = false>
  __device__ __forceinline__ static void apply_mask(float (&s)[kAccum], const KernelParams& p,
                                                    const SequenceInfo& seq, int tile_row0, int n_block,
                                                    FragmentPosition pos) {
#pragma unroll
    for (int h = 0; h < 2; ++h) mask_row<kChunks, kByBits>(s, p, seq, tile_row0 + pos.row0 + 8 * h, h, n_block, pos);
  }

  // The same with the query row of each of the thread's two fragment rows given (GQA packing:
  // tile row r is query row r / G, pack_gqa.h).
  template <bool kByBits = false>
  __device__ __forceinline__ static void apply_mask_rows(float (&s)[kAccum], const KernelParams& p,
                                                         const SequenceInfo& seq, const int (&rows)[2], int n_block,
                                                         FragmentPosition pos) {
#pragma unroll
    for (int h = 0; h < 2; ++h) mask_row<kBlockN / 8, kByBits>(s, p, seq, rows[h], h, n_block, pos);
  }

  // Turns S into unnormalised probabilities exp2(s * score_log2 - max * score_log2), updating the
  // running max and sums; rescale[] is what O, built against the old max, must be multiplied by.
  // Only the first kChunks 8-column groups (a narrowed block's columns; the rest stay as they are).
  // Row by row (max, then exp2s): settle_max then exponentiate would compute the same values in
  // another order, and another schedule; with the vote, both maxes first.
  template <int kChunks = kBlockN / 8>
  __device__ __forceinline__ void update(float (&s)[kAccum], float score_log2) {
    if constexpr (kVote) {
      // Both rows' maxes first: the vote covers the warp's 16 rows at once.
      float m_scaled[2];
      settle_max<kChunks>(s, score_log2, m_scaled);
      exponentiate<kChunks>(s, score_log2, m_scaled);
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        exponentiate_row<kChunks>(s, h, score_log2, settle_row_max(thread_row_max<kChunks>(s, h), h, score_log2));
      }
    }
  }

  // update for fragment row 0 alone, where row 1 holds no query row (MainloopMma::
  // second_rows_rowless: a packed decode tile's live rows are its first eight or fewer). Row 1's
  // scores become 0, so its P V adds 0 to an O nobody stores, and its max, sum and rescale stay as
  // reset (max_moved reads rescale[1] == 1).
  template <int kChunks = kBlockN / 8>
  __device__ __forceinline__ void update_first_row(float (&s)[kAccum], float score_log2) {
    static_assert(!kVote, "the vote settles both rows' maxes at once");
    exponentiate_row<kChunks>(s, 0, score_log2, settle_row_max(thread_row_max<kChunks>(s, 0), 0, score_log2));
#pragma unroll
    for (int i = 0; i < kChunks; ++i) s[4 * i + 2] = s[4 * i + 3] = 0.0f;
  }

  // update in two halves, for turns around the exp2s (KernelConfig::kTurns): first both rows'
  // max, then both rows' exp2s (m_scaled carries the max from one to the other).
  template <int kChunks = kBlockN / 8>
  __device__ __forceinline__ void settle_max(const float (&s)[kAccum], float score_log2, float (&m_scaled)[2]) {
    if constexpr (kVote) {
      float m[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) m[h] = thread_row_max<kChunks>(s, h);
      // A row's max passes the slack only if one of its four threads' does; where no thread of
      // the warp sees that, every row keeps its max and the shuffles are not needed (the same
      // values as settle_row_max, which would keep them too).
      bool passes = false;
#pragma unroll
      for (int h = 0; h < 2; ++h) passes |= passes_slack(m[h], h, score_log2);
      if (!__any_sync(0xffffffffu, passes)) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          m_scaled[h] = kKeptMaxUnitRescale ? keep_row_max(h, score_log2) : set_row_max(row_max[h], h, score_log2);
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) m_scaled[h] = settle_row_max(m[h], h, score_log2);
      }
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) m_scaled[h] = settle_row_max(thread_row_max<kChunks>(s, h), h, score_log2);
    }
  }
  template <int kChunks = kBlockN / 8>
  __device__ __forceinline__ void exponentiate(float (&s)[kAccum], float score_log2, const float (&m_scaled)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) exponentiate_row<kChunks>(s, h, score_log2, m_scaled[h]);
  }

  // This thread's max of fragment row h: its kChunks * 2 scores and the running max.
  template <int kChunks>
  __device__ __forceinline__ float thread_row_max(const float (&s)[kAccum], int h) const {
    if constexpr (kTreeRowMax) {
      // Pairwise, as a tree: log2(2 kChunks) dependent fmax instead of kChunks (cuDNN's
      // order, session 15's reading of its SASS); the exp2s wait for this max.
      float v[2 * kChunks];
#pragma unroll
      for (int i = 0; i < kChunks; ++i) v[2 * i] = s[4 * i + 2 * h], v[2 * i + 1] = s[4 * i + 2 * h + 1];
      return fmaxf(row_max[h], range_max<0, 2 * kChunks>(v));
    } else {
      // Two independent chains halve the dependent fmax latency.
      float m = row_max[h], m_odd = -INFINITY;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        m = fmaxf(m, s[4 * i + 2 * h]);
        m_odd = fmaxf(m_odd, s[4 * i + 2 * h + 1]);
      }
      return fmaxf(m, m_odd);
    }
  }

  // Whether max m of row h passes the running max by more than the slack.
  __device__ __forceinline__ bool passes_slack(float m, int h, float score_log2) const {
    return m * score_log2 > fmaf(row_max[h], score_log2, float(kMaxSlack));
  }

  // The new running max of fragment row h from this thread's (the quad's max, held back by the
  // slack) and its rescale factor; returns the max times score_log2 (0 for a row that has seen
  // only masked keys).
  __device__ __forceinline__ float settle_row_max(float m, int h, float score_log2) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    if constexpr (kMaxSlack > 0) {
      // Exact either way: P, the sums and O all carry the same max, and finalize divides it out
      // (and writes L from it). A kept max leaves each exp2 at most 2^kMaxSlack, far inside fp32
      // and the 16-bit P; O's multiplies are then skipped (max_moved) on almost every block after
      // the first, where a max that follows every rise moves some row of a warp on most blocks
      // (FlashAttention-4's rescale threshold). The four threads of a row hold the same m and
      // row_max, so they decide alike. A first finite max always passes -inf + kMaxSlack.
      if (!passes_slack(m, h, score_log2)) m = row_max[h];
    }
    return set_row_max(m, h, score_log2);
  }

  // Row h's running max becomes m (the rescale factor from the old one); returns m * score_log2.
  __device__ __forceinline__ float set_row_max(float m, int h, float score_log2) {
    // A row that has seen only masked keys keeps max -inf; subtracting 0 instead keeps exp2 at
    // exp2(-inf) = 0 rather than NaN.
    const float m_scaled = m == -INFINITY ? 0.0f : m * score_log2;
    rescale[h] = fast_exp2(row_max[h] * score_log2 - m_scaled);
    row_max[h] = m;
    return m_scaled;
  }

  // Row h keeps its running max: O needs no rescale (the two MUFU slots of exp2(0) saved, on most
  // blocks after a row's first). Returns the max times score_log2, as set_row_max.
  __device__ __forceinline__ float keep_row_max(int h, float score_log2) {
    rescale[h] = 1.0f;
    return row_max[h] == -INFINITY ? 0.0f : row_max[h] * score_log2;
  }

  // The exp2s of fragment row h (the SM's MUFU pipe); returns their sum (dead code where
  // kRowSumByTensor takes the sums from P V).
  template <int kChunks>
  __device__ __forceinline__ static float exp2_row(float (&s)[kAccum], int h, float score_log2, float m_scaled) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * i + 2 * h + e];
        const float y = fmaf(x, score_log2, -m_scaled);
        x = kWithoutExp2 ? y : fast_exp2(y);
        sum += x;
      }
    }
    return sum;
  }

  // The exp2s of fragment row h and its running sum.
  template <int kChunks>
  __device__ __forceinline__ void exponentiate_row(float (&s)[kAccum], int h, float score_log2, float m_scaled) {
    const float sum = exp2_row<kChunks>(s, h, score_log2, m_scaled);
    if constexpr (!kRowSumByTensor) row_sum[h] = row_sum[h] * rescale[h] + sum;
  }

  // The checked max's pieces (MainloopMma::checked_probabilities). Each row keeps its max: O
  // needs no rescale; returns the maxes times score_log2 as settle_max does.
  __device__ __forceinline__ void keep_row_maxes(float score_log2, float (&m_scaled)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) m_scaled[h] = keep_row_max(h, score_log2);
  }

  // The exp2s of both rows against m_scaled, and each row's sum of them in block_sum (not yet
  // added to the row's: add_block_sums, once the block is taken).
  template <int kChunks = kBlockN / 8>
  __device__ __forceinline__ void exponentiate_block(float (&s)[kAccum], float score_log2, const float (&m_scaled)[2],
                                                     float (&block_sum)[2]) const {
    static_assert(!kRowSumByTensor, "the checked max reads the row sums before P V");
#pragma unroll
    for (int h = 0; h < 2; ++h) block_sum[h] = exp2_row<kChunks>(s, h, score_log2, m_scaled[h]);
  }

  __device__ __forceinline__ void add_block_sums(const float (&block_sum)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) row_sum[h] = row_sum[h] * rescale[h] + block_sum[h];
  }

  // Warp-uniform: whether every row of the warp has seen a key (a finite max), as the kept max
  // needs: a row without one has nothing to keep, and its first exp2s need the block's max.
  __device__ __forceinline__ bool every_row_has_max() const {
    return __all_sync(0xffffffffu, row_max[0] != -INFINITY && row_max[1] != -INFINITY);
  }

  // Warp-uniform: whether each thread's sum of each row's exp2s of the block is within `bound`
  // (so every exp2 is: P stays finite in the 16-bit type, MainloopMma::kKeptSumBound). Inf and
  // NaN fail.
  __device__ __forceinline__ static bool kept_max_held(const float (&block_sum)[2], float bound) {
    return __all_sync(0xffffffffu, sums_within(block_sum, bound));
  }
  // This thread's part of that test (MainloopMma::kHeldCheckPerTile keeps it in a flag a tile).
  __device__ __forceinline__ static bool sums_within(const float (&block_sum)[2], float bound) {
    return block_sum[0] <= bound && block_sum[1] <= bound;
  }

  // Warp-uniform: true when some row of the warp needs O rescaled after the last update.
  __device__ __forceinline__ bool max_moved() const {
    return __any_sync(0xffffffffu, rescale[0] != 1.0f || rescale[1] != 1.0f);
  }

  template <int kOAccum>
  __device__ __forceinline__ void rescale_output(float (&o)[kOAccum]) const {
#pragma unroll
    for (int i = 0; i < kOAccum / 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        o[4 * i + 2 * h] *= rescale[h];
        o[4 * i + 2 * h + 1] *= rescale[h];
      }
    }
  }

  // O rescaled where some row of the warp needs it: once the running max has settled, most blocks
  // leave it unchanged, and the multiplies are skipped.
  template <int kOAccum>
  __device__ __forceinline__ void rescale_output_where_moved(float (&o)[kOAccum]) const {
    if (max_moved()) rescale_output(o);
  }

  // Completes the row sums across the quad, applies the single final 1/l to O and returns the
  // natural-log logsumexp per row (-inf for a row that saw no key; its O is 0).
  // With kRowSumByTensor each thread holds its rows' whole sums: every column of the ones group
  // (O's last four accumulators: rows h = 0, 1, two columns each) is the row's sum.
  template <int kOAccum>
  __device__ __forceinline__ void finalize(float (&o)[kOAccum], float score_log2, float (&lse)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l;
      if constexpr (kRowSumByTensor) {
        l = o[kOAccum - 4 + 2 * h];
      } else {
        l = row_sum[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
      }
      const bool seen = l > 0.0f;
      rescale[h] = seen ? 1.0f / l : 0.0f;
      lse[h] = seen ? (row_max[h] * score_log2 + __log2f(l)) * 0.6931471805599453f : -INFINITY;
    }
    rescale_output(o);
  }
};

}  // namespace sm90
}  // namespace flashattn

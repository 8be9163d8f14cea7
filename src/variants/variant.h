// The attention variants as small policy types, shared by the CPU and CUDA backends so that
// every backend computes the same function by construction.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FA_HD __host__ __device__ __forceinline__
#else
#define FA_HD inline
#endif

namespace flashattn {

// Which keys a query row sees. Causal is folded in as window_right = 0. Both sides are measured
// from the bottom-right aligned diagonal j = i + (seqlen_k - seqlen_q).
struct MaskPolicy {
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded

  FA_HD bool has_mask() const { return window_left >= 0 || window_right >= 0; }
  // A right bound only (causal, possibly shifted): the longer a query row, the more keys it sees.
  FA_HD bool right_bound_only() const { return window_right >= 0 && window_left < 0; }

  // First key visible from query row i (may be <= 0).
  FA_HD int64_t key_begin(int64_t i, int64_t diag_offset) const {
    return window_left < 0 ? 0 : i + diag_offset - window_left;
  }
  // One past the last key visible from query row i (may exceed seqlen_k).
  FA_HD int64_t key_end(int64_t i, int64_t diag_offset, int64_t seqlen_k) const {
    return window_right < 0 ? seqlen_k : i + diag_offset + window_right + 1;
  }
  FA_HD bool visible(int64_t i, int64_t j, int64_t diag_offset, int64_t seqlen_k) const {
    return j >= key_begin(i, diag_offset) && j < key_end(i, diag_offset, seqlen_k);
  }
};

// s = scale * q.k, then the optional tanh soft cap.
struct ScoreTransform {
  float scale = 1.0f;
  float softcap = 0.0f;  // 0: off

  template <typename T>
  FA_HD T apply(T raw_dot) const {
    T s = raw_dot * T(scale);
    if (softcap > 0.0f) s = T(softcap) * tanh(s / T(softcap));
    return s;
  }
  // The sm90 kernels' base-2 exponent of the score: exp2(log2_factor() * tanh(raw_dot *
  // tanh_input_scale())) with softcap, exp2(log2_factor() * raw_dot) without (tanh_input_scale()
  // is then 0, which the kernels test).
  FA_HD float tanh_input_scale() const { return softcap > 0.0f ? scale / softcap : 0.0f; }
  FA_HD float log2_factor() const { return (softcap > 0.0f ? softcap : scale) * 1.4426950408889634f; }
  // d s / d raw_dot expressed through the transformed score s (what the backward has at hand).
  template <typename T>
  FA_HD T derivative_from_score(T s) const {
    if (softcap > 0.0f) {
      T t = s / T(softcap);
      return T(scale) * (T(1) - t * t);
    }
    return T(scale);
  }
};

// ALiBi: a linear penalty on the distance to the bottom-right aligned diagonal.
FA_HD float alibi_bias(float slope, int64_t i, int64_t j, int64_t diag_offset) {
  int64_t dist = i + diag_offset - j;
  return -slope * static_cast<float>(dist < 0 ? -dist : dist);
}

}  // namespace flashattn

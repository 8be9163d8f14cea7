// One attention test "case": shapes, options, random inputs and the parameters to run it, plus
// the oracles and metrics the tests compare with. Host memory only, so CPU and GPU tests share it
// (a GPU test copies storage() of each tensor to the device and calls view_at on the copy).
//
//   CaseSpec spec;  spec.batch = 2; spec.seqlen_q = 300; spec.causal = true; ...
//   AttnCase c = make_case(spec);                     // q, k, v, dout ~ N(0, std^2), never zeros
//   ForwardResult f = run_forward(c, Backend::kCPU);  // outputs poisoned with NaN beforehand
//   BackwardResult g = run_backward(c, Backend::kCPU, f);
//   rel_l2(f.out, ref.out);  lse_error(f.lse, ref.lse);
//   NaiveResult n = naive_attention(c, DType::kFloat16, true);  // the same-dtype naive baseline
//
// Variable length: set seqlens_q / seqlens_k (one per sequence, zeros allowed); q is then
// (total_q + extra_rows, nheads_q, headdim) and cu_seqlens are built from the lengths.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/host_tensor.h"

namespace fa_test {

using flashattn::AttentionParams;
using flashattn::Backend;
using flashattn::Status;

enum class Alibi { kNone = 0, kPerHead = 1, kPerBatchHead = 2 };

struct CaseSpec {
  uint64_t seed = 1;
  DType dtype = DType::kFloat32;
  int batch = 1;
  int seqlen_q = 1, seqlen_k = 1;         // fixed length (ignored when varlen)
  std::vector<int> seqlens_q, seqlens_k;  // variable length: one entry per sequence
  // seqused (either, both or neither): one used length per sequence, at most its span; the rows
  // past it take no part and must be left untouched.
  std::vector<int> seqused_q, seqused_k;
  // K and V rows that no sequence uses (varlen rows past cu_seqlens_k[batch], rows past seqused_k)
  // hold NaN instead of random values: a kernel that lets them into P V turns the output NaN.
  bool nan_in_unused_kv = false;
  int extra_rows = 0;                     // varlen: rows past cu_seqlens[batch] that no sequence uses
  int extra_rows_q = 0;                   // varlen: more such rows in q, out and dout only
  int nheads_q = 1, nheads_kv = 1, headdim = 8;
  float softmax_scale = 0.0f;  // 0: 1/sqrt(headdim)
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  Alibi alibi = Alibi::kNone;
  float alibi_max_slope = 0.5f;
  bool deterministic = false;
  int64_t pad = 0;  // extra elements in every stride but the last, for all of q, k, v, out, dout, grads
  float q_std = 1.0f, k_std = 1.0f, v_std = 1.0f, dout_std = 1.0f;
  int num_threads = 0;
  int num_splits = 0;  // AttentionParams::num_splits (CUDA forward: key pieces; 0 the library's choice)

  bool varlen() const { return !seqlens_q.empty(); }
  int batch_size() const { return varlen() ? static_cast<int>(seqlens_q.size()) : batch; }
  // Rows of sequence b in the tensors.
  int span_q(int b) const { return varlen() ? seqlens_q[static_cast<size_t>(b)] : seqlen_q; }
  int span_k(int b) const { return varlen() ? seqlens_k[static_cast<size_t>(b)] : seqlen_k; }
  // Rows that take part: the span, or seqused where given. Masks align to these.
  int len_q(int b) const { return seqused_q.empty() ? span_q(b) : seqused_q[static_cast<size_t>(b)]; }
  int len_k(int b) const { return seqused_k.empty() ? span_k(b) : seqused_k[static_cast<size_t>(b)]; }
  bool has_seqused() const { return !seqused_q.empty() || !seqused_k.empty(); }
  // Every field, so that a failure message alone reproduces the case.
  std::string describe() const;
};

// A fixed-length case of these sizes, every other field at its default.
CaseSpec sized_spec(uint64_t seed, DType dtype, int batch, int seqlen_q, int seqlen_k, int nheads_q, int nheads_kv,
                    int headdim);

struct AttnCase {
  CaseSpec spec;
  HostTensor q, k, v, dout;
  HostTensor alibi_slopes;              // float32 (nheads_q) or (batch, nheads_q), or undefined
  HostTensor cu_seqlens_q, cu_seqlens_k;  // int32 (batch + 1), varlen only
  HostTensor seqused_q, seqused_k;        // int32 (batch), where the spec gives them
  std::vector<int32_t> cu_q, cu_k;      // the same, for host-side loops (fixed length: b * seqlen)

  AttentionParams params(Backend backend) const;
  int64_t total_q() const { return q.size(0) * (spec.varlen() ? 1 : q.size(1)); }
  std::vector<int64_t> out_shape() const { return q.shape(); }
  std::vector<int64_t> lse_shape() const;
  // Linear index of (sequence b, head h, row i of that sequence) in an lse of lse_shape().
  int64_t lse_index(int b, int h, int64_t i) const;
  // Linear index of element d of (sequence b, row i, head h) in a q/out-shaped (or k-shaped) tensor.
  int64_t q_index(int b, int64_t i, int h, int d) const;
  int64_t k_index(int b, int64_t j, int hk, int d) const;
  float scale() const;

  // The part of a q-, k- or lse-shaped tensor that belongs to some sequence: varlen rows past
  // cu_seqlens[batch] are no sequence's, and the library leaves them untouched. A view, except
  // with seqused: then a copy in which the rows past each sequence's used length read 0.
  enum class Role { kQ, kK, kLse };
  HostTensor used_part(const HostTensor& t, Role role) const;
  // Elements of rows inside a sequence's span but past its used length (seqused) that no longer
  // hold the poison (NaN) they were filled with: the library must not write there.
  int64_t written_unused(const HostTensor& t, Role role) const;
  // Calls f with the linear index of every such element, in the whole tensor or, with
  // `in_used_part`, in the tensor used_part() returns.
  void for_each_unused(Role role, bool in_used_part, const std::function<void(int64_t)>& f) const;
};

// Draws the inputs of `spec` from its seed.
AttnCase make_case(const CaseSpec& spec);
// The same case with every tensor converted to `dtype` (values rounded to it).
AttnCase convert_case(const AttnCase& c, DType dtype);

struct ForwardResult {
  Status status;
  HostTensor out, lse;
};
struct BackwardResult {
  Status status;
  HostTensor dq, dk, dv;
};

// Allocates outputs laid out like the inputs (same padding), poisons them, runs the library.
ForwardResult run_forward(const AttnCase& c, Backend backend, bool with_lse = true);
BackwardResult run_backward(const AttnCase& c, Backend backend, const ForwardResult& fwd);

// Naive attention written from the documented semantics, with every intermediate (scores,
// probabilities, products) rounded to `rounding` as a same-dtype framework implementation would
// (float32: no rounding beyond float arithmetic). Outputs are float32 tensors of the library's
// shapes. Used as the fp16/bf16 error baseline and as a second, independent check of the oracle.
// With `with_magnitudes`, dq_mag, dk_mag and dv_mag hold the same sums over absolute values of
// every term (dS taken as P * (|dP| + |D|)): the scale that rounding errors are relative to
// when the exact gradient cancels to almost nothing.
struct NaiveResult {
  HostTensor out, lse, dq, dk, dv;
  HostTensor dq_mag, dk_mag, dv_mag;
};
NaiveResult naive_attention(const AttnCase& c, DType rounding, bool with_backward, bool with_magnitudes = false);

// Whether query row i sees key j, from the comment at the top of flashattn.h.
bool key_visible(const CaseSpec& s, int64_t i, int64_t j, int64_t len_q, int64_t len_k);

// ||a - ref|| / ||ref|| over logical elements; infinite when either holds a non-finite value.
// A zero reference gives the absolute norm of a.
double rel_l2(const HostTensor& a, const HostTensor& ref);
// Max |a - ref| / (1 + |ref|) over an lse, where -inf must match -inf exactly.
double lse_error(const HostTensor& a, const HostTensor& ref);
// Max |a - ref| over logical elements.
double max_abs_diff(const HostTensor& a, const HostTensor& ref);

// A seeded random spec: sizes log-uniform up to the limits, every option drawn independently.
struct RandomLimits {
  int max_batch = 4;
  int max_seqlen = 1000;
  int max_headdim = 256;
  int max_heads = 4;
  double max_work = 3e7;  // batch * nheads_q * seqlen_q * seqlen_k * headdim, to bound the oracle's time
  bool allow_varlen = true;
  bool allow_options = true;
};
CaseSpec random_spec(uint64_t seed, const RandomLimits& limits);

// Test name of a seqused case: "fixed" or "varlen", then "_q" / "_k" for which of seqused_q
// (bit 1 of `which`) and seqused_k (bit 2) are given, then "_causal".
std::string seqused_case_name(bool varlen, int which, bool causal);

// The three sequences the GPU seqused cases start from (GQA 4 / 2, NaN in the key rows no sequence
// uses): fixed length 190 x 260, or variable length {130, 1, 257} x {200, 64, 300} with 3 rows past
// the last sequence; no seqused yet.
CaseSpec three_sequences_spec(uint64_t seed, DType dtype, int headdim, bool varlen, bool causal);

// FLASHATTN_TEST_SEED (default 0) shifts every seeded sweep, to explore beyond the default set;
// the failing case's describe() carries the seed that reproduces it.
uint64_t test_seed_base();

}  // namespace fa_test

// decode_heads_as_rows (src/decode_heads_as_rows.h): a GQA decode step's query heads of one KV
// head as that head's query rows. The fp64 oracle run on the rewritten problem must write, bit
// for bit, the out and lse it writes on the original (each row's arithmetic is the same, only
// the strides that reach it differ), with causal, softcap, seqused_k and padded strides; and the
// rewrite must decline where rows would see different keys.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends.h"
#include "decode_heads_as_rows.h"

namespace flashattn {
namespace {

struct DecodeStep {
  int batch = 3, nheads_q = 8, nheads_kv = 2, headdim = 16, seqlen_k = 37;
  int64_t pad = 0;  // extra elements in q's, out's and lse's strides
  std::vector<float> q, k, v, out, lse;
  std::vector<int32_t> used_k;
  AttentionProblem p;

  void build(uint64_t seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> normal;
    const int64_t q_head = headdim + pad, q_row = nheads_q * q_head + pad, q_batch = q_row + pad;
    q.resize(static_cast<size_t>(batch * q_batch));
    out.assign(q.size(), -7.0f);  // poison: every element a row owns is written
    for (float& x : q) x = normal(rng);
    const int64_t kv_row = nheads_kv * headdim, kv_batch = seqlen_k * kv_row;
    k.resize(static_cast<size_t>(batch * kv_batch));
    v.resize(k.size());
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    const int64_t lse_head = 1 + pad, lse_batch = nheads_q * lse_head + pad;
    lse.assign(static_cast<size_t>(batch * lse_batch), -7.0f);
    p.dtype = DType::kFloat32;
    p.batch = batch, p.nheads_q = nheads_q, p.nheads_kv = nheads_kv, p.headdim = headdim;
    p.seqlen_q = 1, p.seqlen_k = seqlen_k;
    p.total_q = batch, p.total_k = static_cast<int64_t>(batch) * seqlen_k;
    p.q = {q.data(), q_batch, q_row, q_head};
    p.out = {out.data(), q_batch, q_row, q_head};
    p.k = {k.data(), kv_batch, kv_row, headdim};
    p.v = {v.data(), kv_batch, kv_row, headdim};
    p.lse = lse.data();
    p.lse_batch_stride = lse_batch, p.lse_head_stride = lse_head, p.lse_row_stride = 1;
    p.score.scale = 0.25f;
    p.num_threads = 1;
  }
};

// The oracle's out and lse on the problem as given and rewritten.
void expect_same_as_rewritten(DecodeStep& s) {
  ASSERT_TRUE(decode_heads_as_rows_apply(s.p));
  ASSERT_TRUE(cpu_reference_forward(s.p).ok());
  const std::vector<float> out = s.out, lse = s.lse;
  std::fill(s.out.begin(), s.out.end(), -7.0f);
  std::fill(s.lse.begin(), s.lse.end(), -7.0f);
  const AttentionProblem rows = decode_heads_as_rows(s.p);
  EXPECT_EQ(rows.nheads_q, s.p.nheads_kv);
  EXPECT_EQ(rows.seqlen_q, s.p.nheads_q / s.p.nheads_kv);
  ASSERT_TRUE(cpu_reference_forward(rows).ok());
  EXPECT_EQ(std::memcmp(out.data(), s.out.data(), out.size() * sizeof(float)), 0) << "out";
  EXPECT_EQ(std::memcmp(lse.data(), s.lse.data(), lse.size() * sizeof(float)), 0) << "lse";
  // Something was computed: no poison left in a head's row of the first sequence.
  for (int h = 0; h < s.nheads_q; ++h) EXPECT_NE(lse[static_cast<size_t>(h * s.p.lse_head_stride)], -7.0f) << h;
}

TEST(DecodeHeadsAsRows, OracleWritesTheSameOutAndLse) {
  DecodeStep plain;
  plain.build(1);
  expect_same_as_rewritten(plain);

  DecodeStep padded;  // GQA with padded strides
  padded.nheads_q = 12, padded.nheads_kv = 3, padded.pad = 5;
  padded.build(4);
  expect_same_as_rewritten(padded);

  DecodeStep options;  // causal (one row sees every key), softcap, seqused_k with an empty sequence, MQA
  options.nheads_kv = 1, options.nheads_q = 6, options.pad = 3;
  options.build(2);
  options.p.mask.window_right = 0;
  options.p.score.softcap = 2.0f;
  options.used_k = {37, 0, 12};
  options.p.seqused_k = options.used_k.data();
  expect_same_as_rewritten(options);
}

TEST(DecodeHeadsAsRows, DeclinesWhereRowsWouldSeeDifferentKeys) {
  DecodeStep s;
  s.build(3);
  ASSERT_TRUE(decode_heads_as_rows_apply(s.p));
  AttentionProblem p = s.p;
  p.mask.window_left = 5;  // a left window
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  p = s.p;
  const std::vector<float> slopes(static_cast<size_t>(s.nheads_q), 0.5f);
  p.alibi_slopes = slopes.data();  // per query head
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  p = s.p;
  p.seqlen_q = 2;  // two query rows
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  p = s.p;
  p.nheads_kv = 3;  // 8 query heads do not share 3 KV heads evenly
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  p = s.p;
  p.nheads_kv = p.nheads_q;  // MHA: nothing shared
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  p = s.p;
  const std::vector<int32_t> cu = {0, 1, 2, 3};
  p.cu_seqlens_q = cu.data(), p.cu_seqlens_k = cu.data();  // variable length
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  p = s.p;
  const std::vector<int32_t> used = {1, 1, 0};
  p.seqused_q = used.data();
  EXPECT_FALSE(decode_heads_as_rows_apply(p));
  // Declined, the problem comes back unchanged.
  EXPECT_EQ(decode_heads_as_rows(p).nheads_q, p.nheads_q);
  EXPECT_EQ(decode_heads_as_rows(p).q.row_stride, p.q.row_stride);
}

}  // namespace
}  // namespace flashattn

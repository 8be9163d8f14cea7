// Index entries the library does not read back (AttentionParams::indices_checked, CUDA graph
// capture) that break the caller's promise: the kernels clamp them (variants/sequence.h, the sm80
// paged loads), so an entry out of range acts as its nearest bound instead of moving reads and
// writes outside the tensors. Each call with bad entries must give the bytes of the same call
// with the entries clamped by hand, and that call matches the fp64 oracle. Run under
// compute-sanitizer memcheck too (scripts/device_session.sh): without the clamps these calls read
// (and with cu_seqlens_q write) outside their allocations.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/attn_case.h"
#include "common/checks.h"
#include "common/paged_kv.h"
#include "gpu/sm80_device_run.h"

namespace fa_test {
namespace {

constexpr int32_t kFarPast = 1 << 30;

CallMode checked_indices() {
  CallMode m;
  m.indices_checked = true;
  return m;
}

const char* mode_name(const CallMode& m) { return m.graph_replays > 0 ? "graph capture" : "indices_checked"; }

// The call on `bad` (c with some index tensors replaced) against the call on c.
void expect_same_as_clamped(const AttnCase& c, const AttnCase& bad, CallMode mode) {
  SCOPED_TRACE(std::string(mode_name(mode)) + ", " + c.spec.describe());
  const Reference ref = reference(c, false);
  const ForwardResult good = gpu_forward(c, true, mode);
  ASSERT_TRUE(good.status.ok()) << good.status.message;
  EXPECT_TRUE(forward_written(c, good));
  EXPECT_TRUE(within_twice_naive(c, ref, good, nullptr));
  const ForwardResult r = gpu_forward(bad, true, mode);
  ASSERT_TRUE(r.status.ok()) << r.status.message;
  EXPECT_TRUE(same_bytes(r.out, good.out)) << "out differs from the call with the entries clamped";
  EXPECT_TRUE(same_bytes(r.lse, good.lse)) << "lse differs from the call with the entries clamped";
}

// seqused_q / seqused_k entries below 0 and past their sequence's span (by a little and by 2^30).
TEST(UntrustedIndices, SequsedOutOfRangeActsAsItsBound) {
  SM80_SKIP_WITHOUT_GPU();
  uint64_t seed = 5200;
  for (bool varlen : {false, true}) {
    for (bool causal : {false, true}) {
      CaseSpec s = three_sequences_spec(++seed, DType::kBFloat16, causal ? 64 : 128, varlen, causal);
      s.seqused_q = {0, s.span_q(1), s.span_q(2) - 77};
      s.seqused_k = {s.span_k(0), 0, 131};
      const AttnCase c = make_case(s);
      AttnCase bad = c;  // shares the tensors; the index tensors below are new
      bad.seqused_q = int32_tensor({-1, s.span_q(1) + 500, s.span_q(2) - 77});
      bad.seqused_k = int32_tensor({kFarPast, -5, 131});
      expect_same_as_clamped(c, bad, checked_indices());
      expect_same_as_clamped(c, bad, CallMode{1});
    }
  }
}

// Under graph capture cu_seqlens are not read back either: a first entry below 0 and a last one
// past the tensor's rows (q's, and far past k's) act as 0 and as the rows.
TEST(UntrustedIndices, CuSeqlensPastTheTensorActAsItsEnd) {
  SM80_SKIP_WITHOUT_GPU();
  uint64_t seed = 5300;
  for (int headdim : {64, 128}) {
    for (bool causal : {false, true}) {
      CaseSpec s;
      s.seed = ++seed;
      s.dtype = headdim == 64 ? DType::kFloat16 : DType::kBFloat16;
      s.nheads_q = 4;
      s.nheads_kv = 2;
      s.headdim = headdim;
      s.causal = causal;
      s.seqlens_q = {50, 0, 130};
      s.seqlens_k = {70, 20, 200};
      const AttnCase c = make_case(s);
      ASSERT_EQ(c.q.size(0), 180) << "the case's q has rows past its last sequence";
      ASSERT_EQ(c.k.size(0), 290) << "the case's k has rows past its last sequence";
      AttnCase bad = c;
      bad.cu_seqlens_q = int32_tensor({-9, 50, 50, 180 + 1000});
      bad.cu_seqlens_k = int32_tensor({-3, 70, 90, 290 + kFarPast});
      expect_same_as_clamped(c, bad, CallMode{1});
    }
  }
}

HostTensor copy_of(const HostTensor& t) {
  HostTensor r(t.dtype(), t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
  return r;
}

// Paged k / v (the sm80 kernel reads the pages): table entries below 0 and past the last page,
// and a seqused_k past the table's reach, with the indices checked by the caller.
TEST(UntrustedIndices, PageEntriesOutOfRangeActAsTheirBound) {
  SM80_SKIP_WITHOUT_GPU();
  uint64_t seed = 5400;
  for (int splits : {0, 3}) {
    CaseSpec s = paged_spec(++seed, DType::kBFloat16, 128, 128, 1, true);
    s.num_splits = splits;
    s.seqused_k = {s.seqlen_k, 0, s.seqused_k[2]};
    SCOPED_TRACE(s.describe() + " num_splits " + std::to_string(splits));
    const AttnCase c = make_case(s);
    const PagedKV pages = paginate(c, 128, 2, s.seed);
    const int64_t width = pages.block_table.size(1), num_pages = pages.k.size(0);
    PagedKV clamped = pages, bad = pages;
    clamped.block_table = copy_of(pages.block_table);
    bad.block_table = copy_of(pages.block_table);
    bad.block_table.set(0, -4);  // sequence 0's first page
    clamped.block_table.set(0, 0);
    bad.block_table.set(2 * width + 1, static_cast<float>(num_pages + 100));  // sequence 2's second
    clamped.block_table.set(2 * width + 1, static_cast<float>(num_pages - 1));
    AttnCase bad_case = c;
    bad_case.seqused_k = int32_tensor({kFarPast, 0, s.seqused_k[2]});
    const ForwardResult good = gpu_paged_forward(c, clamped, checked_indices());
    ASSERT_TRUE(good.status.ok()) << good.status.message;
    const ForwardResult r = gpu_paged_forward(bad_case, bad, checked_indices());
    ASSERT_TRUE(r.status.ok()) << r.status.message;
    EXPECT_TRUE(same_bytes(r.out, good.out)) << "out differs from the call with the entries clamped";
    EXPECT_TRUE(same_bytes(r.lse, good.lse)) << "lse differs from the call with the entries clamped";
    // The unclamped table is the case's own keys: the oracle's.
    const ForwardResult plain = gpu_paged_forward(c, pages, checked_indices());
    ASSERT_TRUE(plain.status.ok()) << plain.status.message;
    EXPECT_TRUE(within_twice_naive(c, reference(c, false), plain, nullptr));
  }
}

}  // namespace
}  // namespace fa_test

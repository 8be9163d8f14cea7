// Paged k / v (AttentionParams::block_table) on the CPU backends: a paged forward must give what
// the same backend gives on the contiguous keys the pages hold (bit for bit where it walks the
// same key tiles), whatever order the pages lie in, with NaN in the spare pages and past each
// sequence's used keys (which must not be read). Bad tables are refused by name; the backward
// refuses pages.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/attn_case.h"
#include "common/checks.h"
#include "common/paged_kv.h"

namespace fa_test {
namespace {

// Elements of a that are not the same value as in b (-inf == -inf; NaN differs from everything).
int64_t differing(const HostTensor& a, const HostTensor& b) {
  if (a.numel() != b.numel()) return -1;
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += a.get(i) == b.get(i) ? 0 : 1;
  return n;
}

// How far two tilings of the same forward may differ: float32 rounding, or for bf16 output its
// rounding.
Tolerance rounding_of(DType dtype) {
  Tolerance t;
  if (dtype != DType::kFloat32) {
    t.out = 1e-2;
    t.lse = 1e-4;
  }
  return t;
}

// (page_size, seqused_k, causal, variable length). Variable length over pages is
// flash_attn_varlen_func's block_table: cu_seqlens_k gives each sequence's length only.
class PagedForward : public ::testing::TestWithParam<std::tuple<int, bool, bool, bool>> {};

TEST_P(PagedForward, EqualsTheContiguousKeysOnEachCpuBackend) {
  const auto [page_size, used_k, causal, varlen] = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const CaseSpec spec =
        varlen ? paged_varlen_spec(test_seed_base() + 48000 + page_size, dtype, 40, page_size, causal, used_k)
               : paged_spec(test_seed_base() + 47000 + page_size, dtype, 40, page_size, causal ? 5 : 1, used_k);
    SCOPED_TRACE(spec.describe());
    const AttnCase c = make_case(spec);
    for (int64_t table_pad : {0, 3}) {  // 3: a table sliced from a wider one
      const PagedKV pages = paginate(c, page_size, 3, spec.seed, table_pad);
      for (Backend backend : {Backend::kCPUReference, Backend::kCPU}) {
        SCOPED_TRACE(std::string(backend == Backend::kCPU ? "cpu" : "cpu_reference") + " table_pad " +
                     std::to_string(table_pad));
        const ForwardResult contiguous = run_forward(c, backend);
        const ForwardResult paged = run_paged_forward(c, pages, backend);
        ASSERT_TRUE(contiguous.status.ok()) << contiguous.status.message;
        ASSERT_TRUE(paged.status.ok()) << paged.status.message;
        EXPECT_EQ(c.used_part(paged.out, AttnCase::Role::kQ).count_nonfinite(), 0);
        EXPECT_EQ(differing(paged.out, contiguous.out), 0);
        EXPECT_EQ(differing(paged.lse, contiguous.lse), 0);
      }
    }
  }
}

std::string paged_name(const ::testing::TestParamInfo<PagedForward::ParamType>& info) {
  const auto [page_size, used_k, causal, varlen] = info.param;
  return std::string(varlen ? "varlen_" : "") + "page" + std::to_string(page_size) + (used_k ? "_seqused" : "_full") +
         (causal ? "_causal" : "_decode");
}

// The oracle copies every page; the flash backend copies pages of 1 row and reads the others in
// place, its key tiles (256 keys on bf16 products) packed from one page or staged across pages: these GQA
// cases take its packed path, whose tiles are contiguous keys' tiles, so the same bits.
INSTANTIATE_TEST_SUITE_P(All, PagedForward,
                         ::testing::Combine(::testing::Values(1, 16, 48, 128), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()),
                         paged_name);

// Pages whose rows and heads lie apart (padded strides): the copy takes them head row by head row
// (pages of 2), the flash backend reads them in place (128); the same bits as contiguous keys.
TEST(PagedForwardInPlace, StridedPagesEqualTheContiguousKeys) {
  for (int page_size : {2, 128}) {
    CaseSpec spec = paged_spec(test_seed_base() + 47600 + page_size, DType::kBFloat16, 40, page_size, 3, true);
    spec.pad = 8;
    SCOPED_TRACE(spec.describe());
    const AttnCase c = make_case(spec);
    const PagedKV pages = paginate(c, page_size, 2, spec.seed);
    ASSERT_NE(pages.k.stride(1), spec.nheads_kv * spec.headdim);
    for (Backend backend : {Backend::kCPUReference, Backend::kCPU}) {
      const ForwardResult contiguous = run_forward(c, backend);
      const ForwardResult paged = run_paged_forward(c, pages, backend);
      ASSERT_TRUE(paged.status.ok()) << paged.status.message;
      EXPECT_EQ(c.used_part(paged.out, AttnCase::Role::kQ).count_nonfinite(), 0);
      EXPECT_EQ(differing(paged.out, contiguous.out), 0);
      EXPECT_EQ(differing(paged.lse, contiguous.lse), 0);
    }
  }
}

// A left window starts a query's keys off a multiple of the key tile, so even 128-row pages put
// tiles across two pages: staged, they are still contiguous keys' tiles (the same bits).
TEST(PagedForwardInPlace, TilesAcrossPagesUnderALeftWindowAreStaged) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    CaseSpec spec = paged_spec(test_seed_base() + 47500, dtype, 64, 128, 70, true);
    spec.window_left = 200;
    SCOPED_TRACE(spec.describe());
    const AttnCase c = make_case(spec);
    const PagedKV pages = paginate(c, 128, 3, spec.seed);
    const ForwardResult contiguous = run_forward(c, Backend::kCPU);
    const ForwardResult paged = run_paged_forward(c, pages, Backend::kCPU);
    ASSERT_TRUE(paged.status.ok()) << paged.status.message;
    EXPECT_EQ(paged.out.count_nonfinite(), 0);
    EXPECT_EQ(differing(paged.out, contiguous.out), 0);
    EXPECT_EQ(differing(paged.lse, contiguous.lse), 0);
  }
}

// The direct path (MHA decode: one query a kv head) reads rows where they lie, so its tiles end
// at page ends: 128-row pages keep contiguous keys' tiles (the same bits), 16- and 48-row pages
// round differently (within float32's rounding of the contiguous call, and of the fp64 oracle).
TEST(PagedForwardInPlace, DirectPathTilesEndAtPageEnds) {
  for (int page_size : {16, 48, 128}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      CaseSpec spec = paged_spec(test_seed_base() + 47700 + page_size, dtype, 64, page_size, 1, true);
      spec.nheads_kv = spec.nheads_q;
      SCOPED_TRACE(spec.describe());
      const AttnCase c = make_case(spec);
      const PagedKV pages = paginate(c, page_size, 2, spec.seed);
      const ForwardResult contiguous = run_forward(c, Backend::kCPU);
      const ForwardResult paged = run_paged_forward(c, pages, Backend::kCPU);
      ASSERT_TRUE(paged.status.ok()) << paged.status.message;
      EXPECT_EQ(paged.out.count_nonfinite(), 0);
      if (page_size % 128 == 0) {
        EXPECT_EQ(differing(paged.out, contiguous.out), 0);
      } else {
        EXPECT_TRUE(forward_close(c, paged, contiguous, rounding_of(dtype)));
      }
      if (dtype == DType::kFloat32) EXPECT_TRUE(forward_close(c, paged, run_forward(c, Backend::kCPUReference)));
    }
  }
}

// ---- validation ----------------------------------------------------------------------------

::testing::AssertionResult refused(const Status& s, const std::string& arg, const std::string& also) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted";
  if (s.message.find("'" + arg + "'") == std::string::npos || s.message.find(also) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << arg << "' or '" << also << "': " << s.message;
  }
  return ::testing::AssertionSuccess() << s.message;
}

struct SmallPaged {
  AttnCase c = make_case(paged_spec(11, DType::kFloat32, 40, 4, 1, true));
  PagedKV pages = paginate(c, 4, 1, 11);
  HostTensor out{DType::kFloat32, c.q.shape()};
  flashattn::ForwardArgs args;
  AttentionParams params = c.params(Backend::kCPU);
  SmallPaged() {
    out.poison();
    args.q = c.q.view();
    args.k = pages.k.view();
    args.v = pages.v.view();
    args.out = out.view();
    params.block_table = pages.block_table.view();
  }
  Status run() const { return flashattn::forward(args, params); }
};

TEST(PagedValidation, AcceptsTheSmallCase) {
  SmallPaged sp;
  const Status s = sp.run();
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(sp.out.count_nonfinite(), 0);
}

TEST(PagedValidation, PagesOutsideKAreRefusedWhereReached) {
  {
    SmallPaged sp;  // sequence 0 reaches entries 0-2 of its row (seqused_k 10, pages of 4)
    sp.pages.block_table.set(1, static_cast<float>(sp.pages.k.size(0)));
    EXPECT_TRUE(refused(sp.run(), "block_table", "names page"));
    EXPECT_EQ(sp.out.count_nonfinite(), sp.out.numel()) << "out was written";
    sp.pages.block_table.set(1, -2.0f);
    EXPECT_TRUE(refused(sp.run(), "block_table", "names page"));
  }
  {
    SmallPaged sp;  // an entry past the reached pages is not read: any value goes
    sp.pages.block_table.set(4, 1e6f);
    const Status s = sp.run();
    EXPECT_TRUE(s.ok()) << s.message;
  }
}

// indices_checked spares only GPU entries the read-back: CPU ones cost nothing to check.
TEST(PagedValidation, CpuEntriesAreCheckedEvenWhenTheCallerSaysChecked) {
  SmallPaged sp;
  sp.params.indices_checked = true;
  sp.pages.block_table.set(1, static_cast<float>(sp.pages.k.size(0)));
  EXPECT_TRUE(refused(sp.run(), "block_table", "names page"));
  SmallPaged used;
  used.params.indices_checked = true;
  used.c.seqused_k.set(0, static_cast<float>(used.c.spec.seqlen_k + 1));
  EXPECT_TRUE(refused(used.run(), "seqused_k", "entry 0"));
  EXPECT_EQ(used.out.count_nonfinite(), used.out.numel()) << "out was written";
}

// A varlen sequence longer than its table row reaches is refused, naming cu_seqlens_k; an entry a
// varlen sequence reaches must name a page, one past its length may be anything.
TEST(PagedValidation, VarlenSequencesMustFitTheirTable) {
  const AttnCase c = make_case(paged_varlen_spec(13, DType::kFloat32, 40, 4, false, false));
  PagedKV pages = paginate(c, 4, 1, 13);
  const ForwardResult fits = run_paged_forward(c, pages, Backend::kCPU);
  EXPECT_TRUE(fits.status.ok()) << fits.status.message;
  // Sequence 2 has 15 keys (entries 0-3 of its row of 5); entry 4 is -1 and never read.
  pages.block_table.set(2 * 5 + 3, -1.0f);
  const ForwardResult bad_entry = run_paged_forward(c, pages, Backend::kCPU);
  EXPECT_TRUE(refused(bad_entry.status, "block_table", "row 2 names page -1"));
  EXPECT_EQ(bad_entry.out.count_nonfinite(), bad_entry.out.numel()) << "out was written";
  PagedKV narrow = paginate(c, 4, 1, 13);
  narrow.block_table = HostTensor(DType::kInt32, {4, 3});  // reaches 12 keys; sequence 2 has 15
  for (int64_t i = 0; i < narrow.block_table.numel(); ++i) narrow.block_table.set(i, 0.0f);
  EXPECT_TRUE(refused(run_paged_forward(c, narrow, Backend::kCPU).status, "cu_seqlens_k", "block_table reaches 12"));
}

TEST(PagedValidation, BadTablesAndModesAreRefusedByName) {
  {
    SmallPaged sp;
    const HostTensor floats(DType::kFloat32, {3, 4});
    sp.params.block_table = floats.view();
    EXPECT_TRUE(refused(sp.run(), "block_table", "int32"));
  }
  {
    SmallPaged sp;
    const HostTensor two_rows(DType::kInt32, {2, 4});
    sp.params.block_table = two_rows.view();
    EXPECT_TRUE(refused(sp.run(), "block_table", "one per sequence"));
  }
  {
    SmallPaged sp;
    const HostTensor flat = int32_tensor({0, 1, 2});
    sp.params.block_table = flat.view();
    EXPECT_TRUE(refused(sp.run(), "block_table", "dimensions"));
  }
  {
    SmallPaged sp;
    const HostTensor empty_pages(DType::kFloat32, {5, 0, 2, 40});
    sp.args.k = empty_pages.view();
    sp.args.v = empty_pages.view();
    EXPECT_TRUE(refused(sp.run(), "k", "page_size"));
  }
  {
    CaseSpec s = paged_spec(12, DType::kFloat32, 40, 4, 1, false);
    s.batch = 0;
    s.seqlens_q = {1, 1};
    s.seqlens_k = {8, 8};
    const AttnCase c = make_case(s);
    HostTensor out(DType::kFloat32, c.q.shape());
    flashattn::ForwardArgs args;
    args.q = c.q.view();
    args.k = c.k.view();
    args.v = c.v.view();
    args.out = out.view();
    AttentionParams params = c.params(Backend::kCPU);
    const HostTensor table(DType::kInt32, {2, 2});
    params.block_table = table.view();
    // Varlen k of rows (total_k, heads, dim) beside a table: pages are 4-D whatever q is.
    EXPECT_TRUE(refused(flashattn::forward(args, params), "k", "has 3 dimensions"));
  }
}

TEST(PagedValidation, TheBackwardRefusesPages) {
  SmallPaged sp;
  const AttnCase& c = sp.c;
  const ForwardResult f = run_forward(c, Backend::kCPU);
  ASSERT_TRUE(f.status.ok());
  HostTensor dq(DType::kFloat32, c.q.shape()), dk(DType::kFloat32, c.k.shape()), dv(DType::kFloat32, c.v.shape());
  flashattn::BackwardArgs args;
  args.q = c.q.view();
  args.k = c.k.view();
  args.v = c.v.view();
  args.out = f.out.view();
  args.lse = f.lse.view();
  args.dout = c.dout.view();
  args.dq = dq.view();
  args.dk = dk.view();
  args.dv = dv.view();
  EXPECT_TRUE(refused(flashattn::backward(args, sp.params), "block_table", "forward only"));
}

}  // namespace
}  // namespace fa_test

// The IO model: the tile-by-tile counts agree with the closed forms, and the reduction behaves as
// the algebra says (grows with N while one Q tile covers the sequence, then levels off at 2 Br / d).
#include <gtest/gtest.h>

#include <cmath>

#include "flashattn/iomodel.h"

namespace flashattn {
namespace {

IoShape shape(int64_t nq, int64_t nk, int64_t d, int64_t br = 128, int64_t bc = 64, bool causal = false) {
  IoShape s;
  s.batch = 2;
  s.nheads = 3;
  s.seqlen_q = nq;
  s.seqlen_k = nk;
  s.headdim = d;
  s.block_q = br;
  s.block_k = bc;
  s.causal = causal;
  return s;
}

void expect_equal(const IoTraffic& a, const IoTraffic& b) {
  EXPECT_EQ(a.read_bytes, b.read_bytes);
  EXPECT_EQ(a.write_bytes, b.write_bytes);
}

TEST(IoModel, CountedMatchesFormulaNonCausal) {
  const IoShape shapes[] = {
      shape(1024, 1024, 128),       shape(1000, 1000, 64),   // ragged last Q and K tiles
      shape(1, 1, 8),               shape(300, 777, 256),    // seqlen_q != seqlen_k
      shape(777, 300, 96, 100, 48), shape(4096, 4096, 64, 256, 128), shape(5, 3000, 128, 1, 1),
  };
  for (const IoShape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.seqlen_q << "x" << s.seqlen_k << " d" << s.headdim);
    const IoReport r = io_report(s);
    EXPECT_TRUE(r.formula_exact);
    expect_equal(r.naive_counted, r.naive_formula);
    expect_equal(r.tiled_counted, r.tiled_formula);
    EXPECT_DOUBLE_EQ(r.reduction_counted(), r.reduction_formula());
  }
}

TEST(IoModel, SquareFormulaIsTheSeedsOne) {
  IoShape s = shape(1024, 1024, 64, 128, 64);
  s.batch = s.nheads = 1;
  s.element_bytes = 1;
  const int64_t n = 1024, d = 64;
  const IoTraffic naive = count_naive_io(s);
  EXPECT_EQ(naive.read_bytes, 3 * n * d + 2 * n * n);
  EXPECT_EQ(naive.write_bytes, 2 * n * n + n * d);
  const IoTraffic tiled = count_tiled_io(s);
  EXPECT_EQ(tiled.read_bytes, n * d + 2 * n * d * (n / 128));
  EXPECT_EQ(tiled.write_bytes, n * d + 4 * n);
}

TEST(IoModel, CausalCountIsCloseToFormulaAndExactOnAlignedSquares) {
  // Square, Br a multiple of Bc, N a multiple of Br: the halved formula has no rounding to miss.
  IoReport aligned = io_report(shape(2048, 2048, 128, 128, 64, true));
  EXPECT_FALSE(aligned.formula_exact);
  expect_equal(aligned.tiled_counted, aligned.tiled_formula);
  expect_equal(aligned.naive_counted, aligned.naive_formula);

  const IoShape ragged[] = {shape(1000, 1000, 64, 128, 48, true), shape(300, 900, 128, 64, 64, true),
                            shape(900, 300, 128, 64, 64, true)};
  for (const IoShape& s : ragged) {
    const IoReport r = io_report(s);
    const double rel = std::abs(static_cast<double>(r.tiled_counted.total_bytes() - r.tiled_formula.total_bytes())) /
                       static_cast<double>(r.tiled_counted.total_bytes());
    EXPECT_LT(rel, 0.15) << s.seqlen_q << "x" << s.seqlen_k;
  }
}

TEST(IoModel, CausalSkipsMaskedTiles) {
  const IoShape full = shape(4096, 4096, 128, 128, 128, false);
  IoShape causal = full;
  causal.causal = true;
  const double kv_full = static_cast<double>(count_tiled_io(full).read_bytes);
  const double kv_causal = static_cast<double>(count_tiled_io(causal).read_bytes);
  EXPECT_NEAR(kv_causal / kv_full, 0.5, 0.03);
  // A query tile that sees no key (seqlen_q > seqlen_k, bottom-right aligned) loads nothing.
  IoShape blind = shape(512, 128, 64, 128, 128, true);
  blind.batch = blind.nheads = 1;
  blind.element_bytes = 2;
  EXPECT_EQ(count_tiled_io(blind).read_bytes, (128 * 64 + 2 * 128 * 64) * 2);
}

TEST(IoModel, ReductionGrowsWithSequenceThenLevelsOff) {
  // The seed expects a reduction of N / Br. The algebra gives: while one Q tile covers the
  // sequence, tiled moves ~4 N d elements and naive ~4 N^2, so the ratio grows like N / d; past
  // that, tiled re-reads K and V once per Q tile and the ratio tends to 2 Br / d.
  const int64_t d = 64, br = 256;
  double previous = 0.0;
  for (int64_t n = 64; n <= 65536; n *= 2) {
    const IoReport r = io_report(shape(n, n, d, br, 128));
    EXPECT_GT(r.reduction_counted(), previous) << n;
    EXPECT_LT(r.reduction_counted(), r.reduction_limit()) << n;
    if (n <= br) EXPECT_NEAR(r.reduction_counted(), static_cast<double>(n) / d + 1.0, 0.1 * n / d) << n;
    previous = r.reduction_counted();
  }
  EXPECT_NEAR(previous, io_report(shape(65536, 65536, d, br, 128)).reduction_limit(), 0.05 * 2 * br / d);
}

TEST(IoModel, RejectsNonPositiveFields) {
  IoShape s = shape(128, 128, 64);
  EXPECT_TRUE(validate_io_shape(s).ok());
  s.block_q = 0;
  const Status st = validate_io_shape(s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("block_q"), std::string::npos);
}

}  // namespace
}  // namespace flashattn

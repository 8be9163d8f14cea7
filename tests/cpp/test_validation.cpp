// Every bad input of issue 2 part 3 returns a status naming the argument, and runs nothing: the
// poisoned outputs are still poisoned afterwards. Empty problems are valid no-ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/attn_case.h"

namespace fa_test {
namespace {

using flashattn::BackwardArgs;
using flashattn::ForwardArgs;
using flashattn::StatusCode;

constexpr int64_t B = 2, S = 16, Hq = 4, Hk = 2, D = 32;

// A valid fixed-length problem whose views each test breaks in one way.
struct Problem {
  HostTensor q{DType::kFloat32, {B, S, Hq, D}}, k{DType::kFloat32, {B, S, Hk, D}}, v{DType::kFloat32, {B, S, Hk, D}};
  HostTensor out{DType::kFloat32, {B, S, Hq, D}}, lse{DType::kFloat32, {B, Hq, S}};
  HostTensor dout{DType::kFloat32, {B, S, Hq, D}}, dq{DType::kFloat32, {B, S, Hq, D}};
  HostTensor dk{DType::kFloat32, {B, S, Hk, D}}, dv{DType::kFloat32, {B, S, Hk, D}};
  // Spare memory for views that need more room than their shape (strides of 2, odd offsets).
  HostTensor spare{DType::kFloat32, {2 * B * S * Hq * 512}};
  ForwardArgs fwd;
  BackwardArgs bwd;
  AttentionParams params;

  Problem() {
    for (HostTensor* t : {&q, &k, &v, &dout, &lse}) {
      for (int64_t i = 0; i < t->numel(); ++i) t->set(i, 0.25f * static_cast<float>(i % 7) - 0.5f);
    }
    for (HostTensor* t : {&out, &dq, &dk, &dv}) t->poison();
    fwd = ForwardArgs{q.view(), k.view(), v.view(), out.view(), lse.view()};
    bwd = BackwardArgs{q.view(), k.view(), v.view(), out.view(), dout.view(), lse.view(), dq.view(), dk.view(), dv.view()};
    params.backend = Backend::kCPU;
  }
  bool untouched() const {
    return out.count_nonfinite() == out.numel() && dq.count_nonfinite() == dq.numel() &&
           dk.count_nonfinite() == dk.numel() && dv.count_nonfinite() == dv.numel();
  }
};

TensorView with_dtype(TensorView t, DType dtype) {
  t.dtype = dtype;
  return t;
}

TensorView with_shape(TensorView t, int dim, int64_t size) {
  t.shape[dim] = size;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

::testing::AssertionResult rejected(const Status& s, const std::string& arg, const Problem& p,
                                    const std::string& also = "") {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted; expected an error naming '" << arg << "'";
  if (s.code != StatusCode::kInvalidArgument && s.code != StatusCode::kUnsupported) {
    return ::testing::AssertionFailure() << "code " << static_cast<int>(s.code) << ": " << s.message;
  }
  if (s.message.find(arg) == std::string::npos) {
    return ::testing::AssertionFailure() << "message does not name '" << arg << "': " << s.message;
  }
  if (!also.empty() && s.message.find(also) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << also << "': " << s.message;
  }
  if (!p.untouched()) return ::testing::AssertionFailure() << "an output was written despite the error";
  return ::testing::AssertionSuccess() << s.message;
}

TEST(Validation, BaselineIsValid) {
  Problem p;
  const Status f = flashattn::forward(p.fwd, p.params);
  ASSERT_TRUE(f.ok()) << f.message;
  const Status b = flashattn::backward(p.bwd, p.params);
  ASSERT_TRUE(b.ok()) << b.message;
}

TEST(Validation, DtypeMix) {
  for (const char* arg : {"k", "v", "out"}) {
    Problem p;
    TensorView* t = std::string(arg) == "k" ? &p.fwd.k : std::string(arg) == "v" ? &p.fwd.v : &p.fwd.out;
    *t = with_dtype(*t, DType::kFloat16);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), std::string("'") + arg + "'", p, "float16"));
  }
  Problem p;
  p.fwd.q = with_dtype(p.fwd.q, DType::kInt32);
  EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, "int32"));
  Problem p2;
  p2.fwd.lse = with_dtype(p2.fwd.lse, DType::kBFloat16);
  EXPECT_TRUE(rejected(flashattn::forward(p2.fwd, p2.params), "'lse'", p2));
  Problem p3;
  p3.bwd.dout = with_dtype(p3.bwd.dout, DType::kFloat16);
  EXPECT_TRUE(rejected(flashattn::backward(p3.bwd, p3.params), "'dout'", p3));
  Problem p4;
  p4.bwd.dk = with_dtype(p4.bwd.dk, DType::kBFloat16);
  EXPECT_TRUE(rejected(flashattn::backward(p4.bwd, p4.params), "'dk'", p4));
}

TEST(Validation, ShapeMismatch) {
  {
    Problem p;
    p.fwd.k = with_shape(p.fwd.k, 3, 16);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'k'", p));
  }
  {
    Problem p;
    p.fwd.v = with_shape(p.fwd.v, 1, S - 1);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'v'", p));
  }
  {
    Problem p;
    p.fwd.out = with_shape(p.fwd.out, 2, Hq - 1);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p));
  }
  {
    Problem p;
    p.fwd.k = with_shape(p.fwd.k, 0, 1);
    p.fwd.v = with_shape(p.fwd.v, 0, 1);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'k'", p, "batch"));
  }
  {
    Problem p;
    p.fwd.q.ndim = 3;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p));
  }
  {
    Problem p;
    p.fwd.lse = with_shape(p.fwd.lse, 2, S + 1);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'lse'", p));
  }
}

// Sizes past int32 are refused before any memory is read (the views lie about their size).
TEST(Validation, DimensionsBeyondInt32) {
  const int64_t huge = int64_t{1} << 31;
  {
    Problem p;
    for (TensorView* t : {&p.fwd.q, &p.fwd.k, &p.fwd.v, &p.fwd.out}) *t = with_shape(*t, 0, huge);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, "2^31"));
  }
  {
    Problem p;
    p.fwd.k = with_shape(p.fwd.k, 1, huge);
    p.fwd.v = with_shape(p.fwd.v, 1, huge);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'k'", p, "2^31"));
  }
}

TEST(Validation, HeadDim) {
  for (int64_t d : {4, 12, 36, 264, 512}) {
    Problem p;
    p.fwd.q = with_shape(p.fwd.q, 3, d);
    p.fwd.k = with_shape(p.fwd.k, 3, d);
    p.fwd.v = with_shape(p.fwd.v, 3, d);
    p.fwd.out = with_shape(p.fwd.out, 3, d);
    p.fwd.q.data = p.fwd.k.data = p.fwd.v.data = p.spare.storage();
    p.fwd.out.data = p.out.storage();
    HostTensor big_out(DType::kFloat32, {B, S, Hq, d});
    big_out.poison();
    p.fwd.out.data = big_out.storage();
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, std::to_string(d))) << "headdim " << d;
  }
}

TEST(Validation, LastDimStride) {
  for (int which = 0; which < 4; ++which) {
    Problem p;
    TensorView* t[] = {&p.fwd.q, &p.fwd.k, &p.fwd.v, &p.fwd.out};
    const char* names[] = {"'q'", "'k'", "'v'", "'out'"};
    t[which]->data = p.spare.storage();
    t[which]->stride[3] = 2;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), names[which], p, "stride"));
  }
  Problem p;
  p.bwd.dq.stride[3] = 2;
  p.bwd.dq.data = p.spare.storage();
  EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dq'", p, "stride"));
}

TEST(Validation, MisalignedPointers) {
  for (int which = 0; which < 3; ++which) {
    Problem p;
    TensorView* t[] = {&p.fwd.q, &p.fwd.k, &p.fwd.out};
    const char* names[] = {"'q'", "'k'", "'out'"};
    t[which]->data = static_cast<char*>(p.spare.storage()) + 1;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), names[which], p, "align"));
  }
  HostTensor h16(DType::kFloat16, {4 * B * S * Hq * D});
  Problem p;
  for (TensorView* t : {&p.fwd.q, &p.fwd.k, &p.fwd.v, &p.fwd.out}) {
    t->dtype = DType::kFloat16;
    t->data = h16.storage();
  }
  p.fwd.v.data = static_cast<char*>(h16.storage()) + 1;
  EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'v'", p, "align"));
}

TEST(Validation, HeadsNotDivisible) {
  Problem p;
  p.fwd.k = with_shape(p.fwd.k, 2, 3);
  p.fwd.v = with_shape(p.fwd.v, 2, 3);
  p.fwd.k.data = p.fwd.v.data = p.spare.storage();
  EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'k'", p, "3"));
}

// Variable-length problems: total rows 20 of q and 24 of k, batch 2.
struct VarlenProblem : Problem {
  HostTensor vq{DType::kFloat32, {20, Hq, D}}, vk{DType::kFloat32, {24, Hk, D}}, vv{DType::kFloat32, {24, Hk, D}};
  HostTensor vout{DType::kFloat32, {20, Hq, D}}, vlse{DType::kFloat32, {Hq, 20}};
  HostTensor cu_q = int32_tensor({0, 8, 20}), cu_k = int32_tensor({0, 10, 24});
  VarlenProblem() {
    for (HostTensor* t : {&vq, &vk, &vv}) {
      for (int64_t i = 0; i < t->numel(); ++i) t->set(i, 0.1f * static_cast<float>(i % 5));
    }
    vout.poison();
    fwd = ForwardArgs{vq.view(), vk.view(), vv.view(), vout.view(), vlse.view()};
    params.cu_seqlens_q = cu_q.view();
    params.cu_seqlens_k = cu_k.view();
    params.max_seqlen_q = 12;
    params.max_seqlen_k = 14;
  }
};

TEST(Validation, CuSeqlens) {
  {
    VarlenProblem p;
    const Status s = flashattn::forward(p.fwd, p.params);
    ASSERT_TRUE(s.ok()) << s.message;
  }
  {
    VarlenProblem p;
    p.cu_q.set(1, 21);  // 0, 21, 20: decreasing
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'cu_seqlens_q'", p, "21"));
  }
  {
    VarlenProblem p;
    p.cu_k.set(2, 25);  // past the 24 rows of k
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'cu_seqlens_k'", p, "25"));
  }
  {
    VarlenProblem p;
    p.cu_q.set(0, -1);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'cu_seqlens_q'", p));
  }
  {
    VarlenProblem p;
    p.params.cu_seqlens_k = TensorView();
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'cu_seqlens_k'", p));
  }
  {
    VarlenProblem p;
    p.params.cu_seqlens_q = with_dtype(p.params.cu_seqlens_q, DType::kFloat32);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'cu_seqlens_q'", p, "int32"));
  }
  {
    VarlenProblem p;
    p.params.cu_seqlens_k.shape[0] = 2;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'cu_seqlens_k'", p));
  }
  {
    VarlenProblem p;
    p.params.max_seqlen_q = 5;  // the second sequence has 12 queries
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'max_seqlen_q'", p, "12"));
  }
  {
    VarlenProblem p;
    p.fwd.lse = with_shape(p.fwd.lse, 1, 19);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'lse'", p));
  }
}

TEST(Validation, WindowSoftcapScaleThreads) {
  struct Bad {
    const char* arg;
    void (*apply)(AttentionParams&);
  };
  const Bad bads[] = {
      {"'window_left'", [](AttentionParams& a) { a.window_left = -2; }},
      {"'window_right'", [](AttentionParams& a) { a.window_right = -7; }},
      {"'softcap'", [](AttentionParams& a) { a.softcap = -1.0f; }},
      {"'softcap'", [](AttentionParams& a) { a.softcap = std::numeric_limits<float>::quiet_NaN(); }},
      {"'softcap'", [](AttentionParams& a) { a.softcap = std::numeric_limits<float>::infinity(); }},
      {"'softmax_scale'", [](AttentionParams& a) { a.softmax_scale = std::numeric_limits<float>::quiet_NaN(); }},
      {"'num_threads'", [](AttentionParams& a) { a.num_threads = -1; }},
      {"'num_splits'", [](AttentionParams& a) { a.num_splits = -1; }},
      {"'num_splits'", [](AttentionParams& a) { a.num_splits = 257; }},
  };
  for (const Bad& bad : bads) {
    Problem p;
    bad.apply(p.params);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), bad.arg, p));
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), bad.arg, p));
  }
}

// num_splits is the CUDA forward's: every value in range is taken, and the CPU's answer does not
// move with it.
TEST(Validation, NumSplitsInRange) {
  Problem none, one, most;
  one.params.num_splits = 1;
  most.params.num_splits = 256;
  for (Problem* p : {&none, &one, &most}) {
    const Status f = flashattn::forward(p->fwd, p->params);
    ASSERT_TRUE(f.ok()) << f.message;
  }
  EXPECT_EQ(max_abs_diff(none.out, one.out), 0.0);
  EXPECT_EQ(max_abs_diff(none.out, most.out), 0.0);
  EXPECT_EQ(none.out.count_nonfinite(), 0);
}

// More threads than processors run as many as there are processors: OpenMP would otherwise create
// every one asked for, and 100000 of them crashed the process.
TEST(Validation, ThreadsBeyondTheProcessors) {
  Problem few, many;
  few.params.num_threads = 1;
  many.params.num_threads = std::numeric_limits<int>::max();
  for (Problem* p : {&few, &many}) {
    const Status f = flashattn::forward(p->fwd, p->params);
    ASSERT_TRUE(f.ok()) << f.message;
    const Status b = flashattn::backward(p->bwd, p->params);
    ASSERT_TRUE(b.ok()) << b.message;
  }
  EXPECT_EQ(max_abs_diff(few.out, many.out), 0.0);
  EXPECT_LE(max_abs_diff(few.dq, many.dq), 1e-5);  // dq's chunks follow the thread count
  EXPECT_EQ(many.out.count_nonfinite(), 0);
  EXPECT_EQ(many.dq.count_nonfinite(), 0);
}

TEST(Validation, AlibiSlopes) {
  {
    Problem p;
    HostTensor slopes(DType::kFloat32, {Hq + 1});
    p.params.alibi_slopes = slopes.view();
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'alibi_slopes'", p));
  }
  {
    Problem p;
    HostTensor slopes(DType::kFloat32, {B + 1, Hq});
    p.params.alibi_slopes = slopes.view();
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'alibi_slopes'", p));
  }
  {
    Problem p;
    HostTensor slopes(DType::kFloat16, {Hq});
    p.params.alibi_slopes = slopes.view();
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'alibi_slopes'", p));
  }
  {
    Problem p;
    HostTensor slopes(DType::kFloat32, {Hq});
    p.params.alibi_slopes = slopes.view();
    p.params.alibi_slopes.data = nullptr;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'alibi_slopes'", p, "null"));
  }
}

TEST(Validation, NullPointers) {
  for (int which = 0; which < 5; ++which) {
    Problem p;
    TensorView* t[] = {&p.fwd.q, &p.fwd.k, &p.fwd.v, &p.fwd.out, &p.fwd.lse};
    const char* names[] = {"'q'", "'k'", "'v'", "'out'", "'lse'"};
    t[which]->data = nullptr;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), names[which], p, "null"));
  }
  for (int which = 0; which < 4; ++which) {
    Problem p;
    TensorView* t[] = {&p.bwd.dout, &p.bwd.dq, &p.bwd.dk, &p.bwd.dv};
    const char* names[] = {"'dout'", "'dq'", "'dk'", "'dv'"};
    t[which]->data = nullptr;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), names[which], p, "null"));
  }
}

// An output whose elements share memory (a zero stride, or a stride smaller than what the
// dimensions inside it span) is refused: which write would land there depends on the backend.
// Inputs that share memory, as torch's expand makes them, are taken.
TEST(Validation, OutputsWithSharedElements) {
  {
    Problem p;
    p.fwd.out.stride[0] = 0;  // both batches onto one
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p, "share memory"));
  }
  {
    Problem p;
    p.fwd.lse.stride[1] = S / 2;  // each head's rows run into the next head's
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'lse'", p, "share memory"));
  }
  {
    Problem p;  // head-major rows (strides not in the order of the dimensions): one address each
    p.fwd.out.stride[1] = D;
    p.fwd.out.stride[2] = S * D;
    const Status s = flashattn::forward(p.fwd, p.params);
    EXPECT_TRUE(s.ok()) << s.message;
  }
  for (int which = 0; which < 3; ++which) {
    Problem p;
    TensorView* t[] = {&p.bwd.dq, &p.bwd.dk, &p.bwd.dv};
    const char* names[] = {"'dq'", "'dk'", "'dv'"};
    t[which]->stride[2] = 0;  // every head onto head 0
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), names[which], p, "share memory"));
  }
  {
    Problem p;
    p.bwd.dk.stride[1] = 1;  // key rows one element apart, inside one row's head dim
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dk'", p, "share memory"));
  }
  {
    Problem p;  // k and v expanded over the batch: one sequence's keys read for both
    p.fwd.k.stride[0] = 0;
    p.fwd.v.stride[0] = 0;
    const Status s = flashattn::forward(p.fwd, p.params);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(p.out.count_nonfinite(), 0);
  }
}

// An output on top of an input, or of another output, is refused naming the output and the other
// argument: the result would depend on the backend's order of reads and writes. Views that
// interleave without touching, as the gradients of a packed kv do, are taken.
TEST(Validation, OutputsSharingMemoryWithOthers) {
  {
    Problem p;
    p.fwd.out = p.fwd.q;  // attention written over its own queries
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p, "input 'q'"));
  }
  {
    Problem p;  // v's rows in the spare memory, out starting at v's second batch
    p.fwd.v.data = p.spare.storage();
    p.fwd.out.data = static_cast<float*>(p.spare.storage()) + S * Hk * D;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p, "input 'v'"));
  }
  {
    Problem p;  // lse's last rows run into out's first ones (both in the spare memory)
    float* const out = static_cast<float*>(p.spare.storage()) + B * Hq * S;
    p.fwd.out.data = out;
    p.fwd.lse.data = out - B * Hq * S + 3;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'lse'", p, "output 'out'"));
  }
  {
    VarlenProblem p;  // lse written over the key lengths it is computed with
    p.fwd.lse.data = p.cu_k.storage();
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'lse'", p, "input 'cu_seqlens_k'"));
    EXPECT_EQ(p.cu_k.get(2), 24.0f);
  }
  {
    Problem p;
    p.bwd.dk = p.bwd.k;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dk'", p, "input 'k'"));
  }
  {
    Problem p;
    p.bwd.dq = p.bwd.dout;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dq'", p, "input 'dout'"));
  }
  {
    Problem p;
    p.bwd.dv = p.bwd.dk;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dv'", p, "output 'dk'"));
  }
  {
    Problem p;  // lse, read by the backward, inside dq's memory
    p.bwd.dq.data = p.spare.storage();
    p.bwd.lse.data = static_cast<float*>(p.spare.storage()) + 5;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dq'", p, "input 'lse'"));
  }
  {
    // dk and dv interleaved in one (B, S, 2, Hk, D) buffer: taken, and the gradients are those of
    // separate buffers (both deterministic: bitwise the same at any thread count).
    Problem p;  // out and lse from the forward first (the backward reads them)
    p.params.deterministic = true;
    ASSERT_TRUE(flashattn::forward(p.fwd, p.params).ok());
    ASSERT_TRUE(flashattn::backward(p.bwd, p.params).ok());
    HostTensor packed(DType::kFloat32, {B, S, 2, Hk, D});
    packed.poison();
    Problem q;
    q.params.deterministic = true;
    for (TensorView* t : {&q.bwd.dk, &q.bwd.dv}) {
      t->data = static_cast<float*>(packed.storage()) + (t == &q.bwd.dv ? Hk * D : 0);
      t->stride[0] = S * 2 * Hk * D;
      t->stride[1] = 2 * Hk * D;
    }
    ASSERT_TRUE(flashattn::forward(q.fwd, q.params).ok());
    const Status s = flashattn::backward(q.bwd, q.params);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(packed.count_nonfinite(), 0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < S * Hk * D; ++i) {
        const int64_t at = b * S * Hk * D + i;  // element of the separate buffers
        const int64_t row = i / (Hk * D), col = i % (Hk * D);
        const int64_t in_packed = b * S * 2 * Hk * D + row * 2 * Hk * D + col;
        ASSERT_EQ(packed.get(in_packed), p.dk.get(at)) << "dk element " << at;
        ASSERT_EQ(packed.get(in_packed + Hk * D), p.dv.get(at)) << "dv element " << at;
      }
    }
  }
}

TEST(Validation, DeviceMismatch) {
  {
    Problem p;
    p.fwd.k.device = Device::kCUDA;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'k'", p, "cuda"));
  }
  {
    Problem p;
    p.bwd.dv.device = Device::kCUDA;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dv'", p, "cuda"));
  }
  {
    Problem p;
    p.fwd.out.device_index = 1;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p));
  }
  {
    // Every tensor tagged CUDA but the CPU backend asked for.
    Problem p;
    for (TensorView* t : {&p.fwd.q, &p.fwd.k, &p.fwd.v, &p.fwd.out, &p.fwd.lse}) t->device = Device::kCUDA;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "backend", p));
  }
}

// CUDA asked for with host tensors: refused in a CPU-only build (no backend) and in a CUDA build
// (tensors not on the GPU); either way the message names the backend option.
TEST(Validation, BackendLacksOption) {
  Problem p;
  p.params.backend = Backend::kCUDA;
  EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "backend", p, "cuda"));
  EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "backend", p, "cuda"));
}

TEST(Validation, BackwardArguments) {
  {
    Problem p;
    p.bwd.lse = TensorView();
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'lse'", p, "missing"));
  }
  {
    Problem p;
    p.bwd.dq = with_shape(p.bwd.dq, 1, S - 2);
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dq'", p));
  }
  {
    Problem p;
    p.bwd.dk = with_shape(p.bwd.dk, 2, Hq);  // q's head count instead of k's
    p.bwd.dk.data = p.spare.storage();
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dk'", p));
  }
  {
    Problem p;
    p.bwd.dv = with_shape(p.bwd.dv, 3, D / 2);
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dv'", p));
  }
  {
    Problem p;
    p.bwd.dout = with_shape(p.bwd.dout, 0, 1);
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dout'", p));
  }
  {
    Problem p;
    p.bwd.dq = TensorView();
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dq'", p, "missing"));
  }
}

// ---- views whose fields are out of range ------------------------------------------------------

// ndim indexes shape[] and stride[] (kMaxDims entries), and a negative one would pass an optional
// view off as absent; both are refused before any message reads the shape.
TEST(Validation, DimensionCountOutOfRange) {
  {
    Problem p;
    p.fwd.q.ndim = 1000;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, "1000 dimensions"));
  }
  {
    Problem p;
    p.bwd.dv.ndim = TensorView::kMaxDims + 1;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dv'", p, "5 dimensions"));
  }
  {
    Problem p;
    p.fwd.lse.ndim = -1;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'lse'", p, "-1 dimensions"));
  }
  {
    Problem p;
    HostTensor slopes(DType::kFloat32, {Hq});
    p.params.alibi_slopes = slopes.view();
    p.params.alibi_slopes.ndim = 100000;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'alibi_slopes'", p, "100000 dimensions"));
  }
}

// A DType or Device outside its enum: the element size of an unknown dtype is 0 (a division by
// it crashed), and an unknown device was reported as cuda.
TEST(Validation, EnumsOutOfRange) {
  {
    Problem p;
    p.fwd.q.dtype = static_cast<DType>(7);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, "dtype 7"));
  }
  {
    Problem p;
    p.bwd.lse.dtype = static_cast<DType>(-1);
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'lse'", p, "dtype -1"));
  }
  {
    Problem p;
    p.fwd.out.device = static_cast<flashattn::Device>(7);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p, "device 7"));
  }
  for (int backend : {9, -1}) {
    Problem p;
    p.params.backend = static_cast<Backend>(backend);
    const std::string seen = "is " + std::to_string(backend);
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'backend'", p, seen));
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'backend'", p, seen));
  }
}

// Counts and byte spans that do not fit 64 bits: a count that wrapped to 0 passed for an empty
// tensor (its null data unchecked), and a span that wrapped sent writes onto other elements.
TEST(Validation, SizesBeyondSixtyFourBits) {
  {
    Problem p;  // 2^62 * 16 * 4 * 32 elements wrap to 0
    p.fwd.q = with_shape(p.fwd.q, 0, int64_t{1} << 62);
    p.fwd.q.data = nullptr;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, "more elements than 64 bits"));
  }
  {
    Problem p;  // the second batch 2^63 bytes on
    p.fwd.out.stride[0] = int64_t{1} << 61;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'out'", p, "64-bit"));
  }
  {
    Problem p;  // the second batch (2^62 + 1) * 4 bytes on: wrapped, 4 bytes past the first
    p.fwd.q.stride[0] = (int64_t{1} << 62) + 1;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'q'", p, "64-bit"));
  }
  {
    Problem p;
    p.bwd.dk.stride[1] = int64_t{1} << 60;
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'dk'", p, "64-bit"));
  }
}

// A table's geometry that overflows: rows 2^62 + 7 entries apart, and 2^60 pages a row of 8 keys
// (2^63 keys, which wrapped negative and passed the 2^31 - 1 bound).
TEST(Validation, BlockTableBeyondSixtyFourBits) {
  struct Paged : Problem {
    HostTensor table = int32_tensor({0, 1, 2, 3});
    Paged() {
      for (TensorView* t : {&fwd.k, &fwd.v}) {  // B * S rows as 4 pages of 8
        t->shape[0] = 4;
        t->shape[1] = 8;
        t->stride[0] = 8 * Hk * D;
      }
      params.block_table = table.view();
      params.block_table.ndim = 2;
      params.block_table.shape[0] = B;
      params.block_table.shape[1] = 2;
      params.block_table.stride[0] = 2;
      params.block_table.stride[1] = 1;
    }
  };
  {
    Paged p;
    const Status s = flashattn::forward(p.fwd, p.params);
    ASSERT_TRUE(s.ok()) << s.message;
  }
  {
    Paged p;
    p.params.block_table.stride[0] = (int64_t{1} << 62) + 7;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'block_table'", p, "64-bit"));
  }
  {
    Paged p;
    p.params.block_table.shape[1] = int64_t{1} << 60;
    p.params.block_table.stride[0] = 0;  // both rows one row of 2^60 entries (2^62 bytes)
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'block_table'", p, "2^31 - 1 keys"));
  }
}

// ---- values the kernels cannot compute with ---------------------------------------------------

// A softcap below the smallest normal float has no float reciprocal, which the kernels multiply
// by: the backward's gradients came out NaN. FLT_MIN itself is taken and stays finite.
TEST(Validation, SoftcapBelowTheNormalFloats) {
  for (float softcap : {1e-40f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min() / 2}) {
    Problem p;
    p.params.softcap = softcap;
    EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'softcap'", p));
    EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'softcap'", p));
  }
  Problem p;
  p.params.softcap = std::numeric_limits<float>::min();
  ASSERT_TRUE(flashattn::forward(p.fwd, p.params).ok());
  const Status s = flashattn::backward(p.bwd, p.params);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(p.dq.count_nonfinite(), 0);
  EXPECT_EQ(p.dk.count_nonfinite(), 0);
}

// A NaN or infinite slope made the head's scores NaN or -inf; refused, naming the head.
TEST(Validation, AlibiSlopesNotFinite) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (bool per_batch : {false, true}) {
      Problem p;
      HostTensor slopes = per_batch ? HostTensor(DType::kFloat32, {B, Hq}) : HostTensor(DType::kFloat32, {Hq});
      for (int64_t i = 0; i < slopes.numel(); ++i) slopes.set(i, 0.25f);
      slopes.set(slopes.numel() - 1, bad);
      p.params.alibi_slopes = slopes.view();
      EXPECT_TRUE(rejected(flashattn::forward(p.fwd, p.params), "'alibi_slopes'", p, "head 3"));
      EXPECT_TRUE(rejected(flashattn::backward(p.bwd, p.params), "'alibi_slopes'", p, "not finite"));
    }
  }
}

// ---- empty problems are valid no-ops --------------------------------------------------------------

TEST(Validation, EmptyBatchIsNoOp) {
  for (Backend backend : {Backend::kCPU, Backend::kCPUReference, Backend::kAuto}) {
    Problem p;
    p.params.backend = backend;
    for (TensorView* t : {&p.fwd.q, &p.fwd.k, &p.fwd.v, &p.fwd.out, &p.fwd.lse, &p.bwd.q, &p.bwd.k, &p.bwd.v,
                          &p.bwd.out, &p.bwd.lse, &p.bwd.dout, &p.bwd.dq, &p.bwd.dk, &p.bwd.dv}) {
      t->shape[0] = 0;
      t->data = nullptr;
    }
    Status s = flashattn::forward(p.fwd, p.params);
    EXPECT_TRUE(s.ok()) << s.message;
    s = flashattn::backward(p.bwd, p.params);
    EXPECT_TRUE(s.ok()) << s.message;
  }
  VarlenProblem v;
  v.fwd.q.shape[0] = v.fwd.k.shape[0] = v.fwd.v.shape[0] = v.fwd.out.shape[0] = v.fwd.lse.shape[1] = 0;
  HostTensor cu = int32_tensor({0});
  v.params.cu_seqlens_q = v.params.cu_seqlens_k = cu.view();
  v.params.max_seqlen_q = v.params.max_seqlen_k = 0;
  const Status s = flashattn::forward(v.fwd, v.params);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST(Validation, ZeroLengthSequencesAreNoOps) {
  {
    Problem p;
    for (TensorView* t : {&p.fwd.q, &p.fwd.out}) *t = with_shape(*t, 1, 0);
    p.fwd.lse = with_shape(p.fwd.lse, 2, 0);
    Status s = flashattn::forward(p.fwd, p.params);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(p.untouched());
  }
  {
    // Every sequence empty on both sides.
    VarlenProblem v;
    HostTensor cu = int32_tensor({0, 0, 0});
    v.params.cu_seqlens_q = v.params.cu_seqlens_k = cu.view();
    v.params.max_seqlen_q = v.params.max_seqlen_k = 0;
    const Status s = flashattn::forward(v.fwd, v.params);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(v.vout.count_nonfinite(), v.vout.numel());
  }
}

}  // namespace
}  // namespace fa_test

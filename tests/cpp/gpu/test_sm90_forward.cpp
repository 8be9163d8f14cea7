// The sm90 (FlashAttention-3) forward against the fp64 CPU reference. Every case draws fresh
// random inputs, poisons the outputs (NaN bytes, padding included) and checks O, the logsumexp,
// that no element was left unwritten, and that no byte outside the output's elements changed.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/kernel_sets.h"
#include "cuda/sm90/kernel_choice.h"
#include "env_switch.h"
#include "flashattn/flashattn.h"
#include "gpu/sm90_device.h"
#include "problem.h"

namespace {

using namespace flashattn;
using fa_test::ScopedEnv;
using fa_test::sm90_any_launches;

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

enum class Layout { kPacked, kPadded, kHeadMajor };

// The sm90 kernel a case is written for (its comment's claim), which the API must run it on:
// checked by the launch counters, so that a rule change that moves a case to another kernel fails
// the case instead of leaving the kernel it was written for untested. kAny: some sm90 kernel
// (Sm90Forward checks that one ran, so a problem the sm90 path stopped taking fails there
// instead of passing on the sm80 kernel); kSm80: none, the problem is the sm80 kernel's.
enum class Kernel { kAny, kDynamic, kStatic, kShortRows, kClusterPairs, kTallTiles, kSm80 };

struct Case {
  std::string name;
  DType dtype = DType::kBFloat16;
  int batch = 1, seqlen_q = 128, seqlen_k = 128, heads_q = 2, heads_kv = 2, headdim = 128;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  std::vector<int> lens_q, lens_k;  // variable length when non-empty
  // seqused (either, both or neither): one used length per sequence; rows of out and lse past
  // used_q must keep their poison.
  std::vector<int> used_q, used_k;
  // Variable length: k/v rows past cu_seqlens_k[batch] that no sequence uses. These, and the
  // rows past seqused_k, hold NaN on the device (the reference never reads them): a kernel that
  // lets them into P V turns the output NaN.
  int extra_k = 0;
  // Key row r scaled by 1 + key_ramp * r / rows: scores that grow along the keys, so a later
  // block's row max passes the running one by more than the kernels' slack (KernelConfig::
  // kMaxSlack, 8 log2 units) several times a row, and O is rescaled mid-row.
  float key_ramp = 0.0f;
  // Key rows in the first half scaled by this (0: none): the kernels visit a row's key blocks
  // from the last, so its scores jump up mid-row, past the kept max of the checked max
  // (KernelConfig::kCheckedMax) by tens of log2 units (12) or by enough that the exp2s against it
  // overflow to inf (64); the warp then computes S again (MainloopMma::checked_probabilities).
  float early_key_boost = 0.0f;
  // The boosted key rows: [boost_from, boost_to) of the packed rows (boost_to -1: the first half).
  // A few rows at 0 are an attention sink (key block 0, each row's last visited, jumps alone); a
  // band mid-row jumps and falls back. The warp computes the block again, or where the bound is
  // tested once a tile (KernelConfig::kHeldCheckPerTile: the bf16 d128 kernels with two consumer
  // warpgroups, but for GQA packing) its rows of the whole tile (MainloopMma::recompute_tile).
  int boost_from = 0, boost_to = -1;
  Layout layout = Layout::kPacked;
  bool with_lse = true;
  // Fixed length: each head's LSE rows followed by this many floats that must keep their poison
  // (0: contiguous). The kernels store the LSE through a TMA map where the strides allow it
  // (multiples of 16 bytes), else row by row.
  int lse_pad = 0;
  Kernel kernel = Kernel::kAny;
  int num_splits = 0;  // AttentionParams::num_splits (the caller's key pieces; 0 the library's)
  bool varlen() const { return !lens_q.empty(); }
};

// Element strides of a (batch, row, head, dim) operand; dim is always contiguous.
struct Strides {
  int64_t batch = 0, row = 0, head = 0;
};

Strides make_strides(Layout layout, int64_t rows, int heads, int d) {
  Strides s;
  switch (layout) {
    case Layout::kPacked: s.head = d, s.row = int64_t(heads) * d, s.batch = rows * s.row; break;
    case Layout::kPadded: s.head = d + 8, s.row = int64_t(heads) * (d + 8) + 16, s.batch = rows * s.row + 64; break;
    case Layout::kHeadMajor: s.row = d, s.head = rows * d, s.batch = int64_t(heads) * rows * d; break;
  }
  return s;
}

// A strided 16-bit operand on host and device plus its exact fp32 copy, packed (batch, row, head, dim).
struct Operand16 {
  int batch = 0, heads = 0, d = 0;
  int64_t rows = 0;  // per batch entry (fixed) or in total (varlen)
  bool varlen = false;
  Strides st;
  std::vector<uint16_t> host;
  std::vector<float> packed;
  void* device = nullptr;

  int64_t offset(int b, int64_t r, int h) const { return (varlen ? 0 : b * st.batch) + r * st.row + h * st.head; }
  int64_t storage() const { return (varlen ? 0 : (batch - 1) * st.batch) + (rows - 1) * st.row + (heads - 1) * st.head + d; }
  int64_t packed_index(int b, int64_t r, int h, int c) const {
    return ((int64_t(varlen ? 0 : b) * rows + r) * heads + h) * d + c;
  }
  int entries() const { return varlen ? 1 : batch; }

  TensorView view(void* data, DType dtype, Device dev) const {
    TensorView t;
    t.data = data, t.dtype = dtype, t.device = dev;
    if (varlen) {
      t.ndim = 3;
      const int64_t shape[3] = {rows, heads, d}, stride[3] = {st.row, st.head, 1};
      for (int i = 0; i < 3; ++i) t.shape[i] = shape[i], t.stride[i] = stride[i];
    } else {
      t.ndim = 4;
      const int64_t shape[4] = {batch, rows, heads, d}, stride[4] = {st.batch, st.row, st.head, 1};
      for (int i = 0; i < 4; ++i) t.shape[i] = shape[i], t.stride[i] = stride[i];
    }
    return t;
  }
  TensorView packed_view(float* data) const {
    Operand16 p = *this;
    p.st = make_strides(Layout::kPacked, rows, heads, d);
    return p.view(data, DType::kFloat32, Device::kCPU);
  }
};

uint16_t to_bits(float x, DType dt) {
  uint16_t b;
  if (dt == DType::kBFloat16) {
    __nv_bfloat16 v = __float2bfloat16(x);
    std::memcpy(&b, &v, 2);
  } else {
    __half v = __float2half(x);
    std::memcpy(&b, &v, 2);
  }
  return b;
}
float from_bits(uint16_t b, DType dt) {
  if (dt == DType::kBFloat16) {
    __nv_bfloat16 v;
    std::memcpy(&v, &b, 2);
    return __bfloat162float(v);
  }
  __half v;
  std::memcpy(&v, &b, 2);
  return __half2float(v);
}

void make_operand(Operand16* op, const Case& c, int64_t rows, int heads, std::mt19937* rng, bool random,
                  float row_ramp = 0.0f, float early_boost = 0.0f) {
  const int64_t boost_to = c.boost_to < 0 ? rows / 2 : c.boost_to;
  op->batch = c.batch, op->heads = heads, op->d = c.headdim, op->rows = rows, op->varlen = c.varlen();
  op->st = make_strides(c.layout, rows, heads, c.headdim);
  const int64_t n = std::max<int64_t>(op->storage(), 1);
  op->host.assign(n, 0xFFFF);  // NaN in bf16 and fp16: the poison of outputs and of padding
  op->packed.assign(int64_t(op->entries()) * rows * heads * c.headdim, 0.0f);
  std::normal_distribution<float> normal;
  if (random) {
    for (int b = 0; b < op->entries(); ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int h = 0; h < heads; ++h)
          for (int k = 0; k < c.headdim; ++k) {
            const float boost = early_boost > 0.0f && r >= c.boost_from && r < boost_to ? early_boost : 1.0f;
            const uint16_t bits = to_bits(normal(*rng) * boost * (1.0f + row_ramp * float(r) / float(rows)), c.dtype);
            op->host[op->offset(b, r, h) + k] = bits;
            op->packed[op->packed_index(b, r, h, k)] = from_bits(bits, c.dtype);
          }
  }
}

struct DeviceBuffers {
  std::vector<void*> ptrs;
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) != cudaSuccess) return nullptr;
    ptrs.push_back(p);
    return p;
  }
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

double tolerance(DType dt) { return dt == DType::kBFloat16 ? 1e-2 : 2e-3; }

// direct: call sm90_forward itself (proves this kernel ran) instead of the public API.
// pack_gqa: call sm90_forward_pack_gqa instead (forces GQA head packing); implies direct. A head
// dim the build did not compile skips. repeats: launches after the first on the same inputs, each
// beside a memset of another size on a stream of its own (other timings), whose O and LSE must
// be the first's bit for bit.
void run_case(const Case& c, uint32_t seed, bool direct = false, bool pack_gqa = false, int repeats = 0) {
  direct = direct || pack_gqa;
  std::mt19937 rng(seed);
  const bool varlen = c.varlen();
  std::vector<int32_t> cu_q(1, 0), cu_k(1, 0);
  int max_q = c.seqlen_q, max_k = c.seqlen_k;
  if (varlen) {
    max_q = max_k = 0;
    for (size_t b = 0; b < c.lens_q.size(); ++b) {
      cu_q.push_back(cu_q.back() + c.lens_q[b]);
      cu_k.push_back(cu_k.back() + c.lens_k[b]);
      max_q = std::max(max_q, c.lens_q[b]);
      max_k = std::max(max_k, c.lens_k[b]);
    }
  }
  Case cc = c;
  if (varlen) cc.batch = int(c.lens_q.size());
  const int64_t rows_q = varlen ? cu_q.back() : c.seqlen_q, rows_k = varlen ? cu_k.back() + c.extra_k : c.seqlen_k;
  Operand16 q, k, v, o;
  make_operand(&q, cc, rows_q, c.heads_q, &rng, true);
  make_operand(&k, cc, rows_k, c.heads_kv, &rng, true, c.key_ramp, c.early_key_boost);
  make_operand(&v, cc, rows_k, c.heads_kv, &rng, true);
  make_operand(&o, cc, rows_q, c.heads_q, &rng, false);
  // NaN (0xFFFF) in the device copies of the k/v rows no sequence uses: past seqused_k, and
  // (varlen) past cu_seqlens_k[batch]. The reference's fp32 copies keep their random values.
  for (int b = 0; b < k.entries(); ++b) {
    for (int64_t r = 0; r < rows_k; ++r) {
      bool unused = false;
      if (!varlen) {
        unused = !c.used_k.empty() && r >= c.used_k[size_t(b)];
      } else {
        unused = r >= cu_k.back();
        for (size_t s = 0; s + 1 < cu_k.size() && !c.used_k.empty(); ++s) {
          if (r >= cu_k[s] && r < cu_k[s + 1]) unused = r - cu_k[s] >= c.used_k[s];
        }
      }
      if (!unused) continue;
      for (int h = 0; h < c.heads_kv; ++h)
        for (int kk = 0; kk < c.headdim; ++kk) k.host[k.offset(b, r, h) + kk] = v.host[v.offset(b, r, h) + kk] = 0xFFFF;
    }
  }
  const int64_t lse_count = int64_t(q.entries()) * c.heads_q * rows_q;
  // The device's LSE: rows_q + lse_pad floats a head (the logical element i at lse_index(i)).
  ASSERT_TRUE(c.lse_pad == 0 || !varlen) << "lse_pad is for fixed length";
  const int64_t lse_head_stride = rows_q + c.lse_pad;
  const int64_t lse_alloc = int64_t(q.entries()) * c.heads_q * lse_head_stride;
  auto lse_index = [&](int64_t i) { return (i / rows_q) * lse_head_stride + i % rows_q; };

  // Reference: the fp64 oracle on exact fp32 copies of the inputs.
  std::vector<float> ref_o(o.packed.size()), ref_lse(lse_count);
  AttentionParams prm;
  prm.causal = c.causal, prm.window_left = c.window_left, prm.window_right = c.window_right, prm.softcap = c.softcap;
  prm.num_splits = c.num_splits;
  ForwardArgs ref;
  ref.q = q.packed_view(q.packed.data()), ref.k = k.packed_view(k.packed.data()), ref.v = v.packed_view(v.packed.data());
  ref.out = o.packed_view(ref_o.data());
  ref.lse = varlen ? make_tensor(ref_lse.data(), DType::kFloat32, {c.heads_q, rows_q})
                   : make_tensor(ref_lse.data(), DType::kFloat32, {cc.batch, c.heads_q, rows_q});
  if (varlen) {
    prm.cu_seqlens_q = make_tensor(cu_q.data(), DType::kInt32, {int64_t(cu_q.size())});
    prm.cu_seqlens_k = make_tensor(cu_k.data(), DType::kInt32, {int64_t(cu_k.size())});
    prm.max_seqlen_q = max_q, prm.max_seqlen_k = max_k;
  }
  std::vector<int32_t> used_q(c.used_q.begin(), c.used_q.end()), used_k(c.used_k.begin(), c.used_k.end());
  if (!used_q.empty()) prm.seqused_q = make_tensor(used_q.data(), DType::kInt32, {int64_t(used_q.size())});
  if (!used_k.empty()) prm.seqused_k = make_tensor(used_k.data(), DType::kInt32, {int64_t(used_k.size())});
  prm.backend = Backend::kCPUReference;
  Status s = forward(ref, prm);
  ASSERT_TRUE(s.ok()) << "reference: " << s.message;

  DeviceBuffers mem;
  auto upload = [&](Operand16& op) {
    op.device = mem.alloc(op.host.size() * 2);
    return cudaMemcpy(op.device, op.host.data(), op.host.size() * 2, cudaMemcpyHostToDevice);
  };
  CUDA_OK(upload(q));
  CUDA_OK(upload(k));
  CUDA_OK(upload(v));
  CUDA_OK(upload(o));  // all 0xFFFF: NaN poison, padding included
  float* d_lse = static_cast<float*>(mem.alloc(lse_alloc * 4));
  CUDA_OK(cudaMemset(d_lse, 0xFF, lse_alloc * 4));
  int32_t* d_cu_q = nullptr;
  int32_t* d_cu_k = nullptr;
  int32_t* d_used_q = nullptr;
  int32_t* d_used_k = nullptr;
  if (!used_q.empty()) {
    d_used_q = static_cast<int32_t*>(mem.alloc(used_q.size() * 4));
    CUDA_OK(cudaMemcpy(d_used_q, used_q.data(), used_q.size() * 4, cudaMemcpyHostToDevice));
  }
  if (!used_k.empty()) {
    d_used_k = static_cast<int32_t*>(mem.alloc(used_k.size() * 4));
    CUDA_OK(cudaMemcpy(d_used_k, used_k.data(), used_k.size() * 4, cudaMemcpyHostToDevice));
  }
  if (varlen) {
    d_cu_q = static_cast<int32_t*>(mem.alloc(cu_q.size() * 4));
    d_cu_k = static_cast<int32_t*>(mem.alloc(cu_k.size() * 4));
    CUDA_OK(cudaMemcpy(d_cu_q, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_cu_k, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice));
  }

  ForwardArgs dev;
  dev.q = q.view(q.device, c.dtype, Device::kCUDA);
  dev.k = k.view(k.device, c.dtype, Device::kCUDA);
  dev.v = v.view(v.device, c.dtype, Device::kCUDA);
  dev.out = o.view(o.device, c.dtype, Device::kCUDA);
  if (c.with_lse) {
    dev.lse = varlen ? make_tensor(d_lse, DType::kFloat32, {c.heads_q, rows_q}, Device::kCUDA)
                     : make_tensor(d_lse, DType::kFloat32, {cc.batch, c.heads_q, rows_q}, Device::kCUDA);
    if (!varlen) dev.lse.stride[0] = c.heads_q * lse_head_stride, dev.lse.stride[1] = lse_head_stride;
  }
  if (varlen) {
    prm.cu_seqlens_q = make_tensor(d_cu_q, DType::kInt32, {int64_t(cu_q.size())}, Device::kCUDA);
    prm.cu_seqlens_k = make_tensor(d_cu_k, DType::kInt32, {int64_t(cu_k.size())}, Device::kCUDA);
  }
  prm.seqused_q = prm.seqused_k = TensorView();
  if (d_used_q) prm.seqused_q = make_tensor(d_used_q, DType::kInt32, {int64_t(used_q.size())}, Device::kCUDA);
  if (d_used_k) prm.seqused_k = make_tensor(d_used_k, DType::kInt32, {int64_t(used_k.size())}, Device::kCUDA);
  prm.backend = Backend::kCUDA;
  AttentionProblem p;
  if (direct) {
    p.dtype = c.dtype, p.device = Device::kCUDA, p.batch = cc.batch, p.nheads_q = c.heads_q, p.nheads_kv = c.heads_kv;
    p.headdim = c.headdim, p.seqlen_q = max_q, p.seqlen_k = max_k, p.total_q = rows_q * q.entries(),
    p.total_k = rows_k * k.entries();
    auto operand = [](const Operand16& op) {
      return flashattn::Operand{op.device, op.varlen ? 0 : op.st.batch, op.st.row, op.st.head};
    };
    p.q = operand(q), p.k = operand(k), p.v = operand(v), p.out = operand(o);
    p.lse = c.with_lse ? d_lse : nullptr;
    p.lse_batch_stride = varlen ? 0 : int64_t(c.heads_q) * lse_head_stride, p.lse_head_stride = lse_head_stride;
    p.lse_row_stride = 1;
    if (varlen) p.cu_seqlens_q = d_cu_q, p.cu_seqlens_k = d_cu_k;
    p.kv_rows_past_last_sequence = varlen && c.extra_k > 0;
    p.score.scale = 1.0f / std::sqrt(float(c.headdim)), p.score.softcap = c.softcap;
    p.mask.window_left = c.window_left, p.mask.window_right = c.causal ? 0 : c.window_right;
    p.seqused_q = d_used_q, p.seqused_k = d_used_k;
    p.num_splits = c.num_splits;
    s = pack_gqa ? sm90_supports_forward_pack_gqa(p) : sm90_supports_forward(p);
    if (pack_gqa && !s.ok() && s.message.find("not built") != std::string::npos) GTEST_SKIP() << s.message;
    ASSERT_TRUE(s.ok()) << s.message;
  }
  auto launch = [&]() {
    if (!direct) return forward(dev, prm);
    return pack_gqa ? sm90_forward_pack_gqa(p) : sm90_forward(p);
  };
  s = launch();
  ASSERT_TRUE(s.ok()) << s.message;
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> out_bits(o.host.size());
  std::vector<float> lse_stored(lse_alloc), lse(lse_count);
  CUDA_OK(cudaMemcpy(out_bits.data(), o.device, out_bits.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(lse_stored.data(), d_lse, lse_stored.size() * 4, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < lse_count; ++i) lse[size_t(i)] = lse_stored[size_t(lse_index(i))];
  int64_t lse_clobbered = 0;  // padding between heads' rows written
  for (int64_t i = 0; i < lse_alloc; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &lse_stored[size_t(i)], 4);
    lse_clobbered += i % lse_head_stride >= rows_q && bits != 0xFFFFFFFFu;
  }

  // Query row r of the tensors (entry b): is it a used row of some sequence? Rows past a
  // sequence's seqused_q must keep their poison in out and lse.
  auto row_used = [&](int b, int64_t r) {
    if (used_q.empty()) return true;
    if (!varlen) return r < used_q[size_t(b)];
    for (size_t s = 0; s + 1 < cu_q.size(); ++s) {
      if (r >= cu_q[s] && r < cu_q[s + 1]) return r - cu_q[s] < used_q[s];
    }
    return true;
  };
  std::vector<char> is_element(out_bits.size(), 0);
  double err2 = 0, ref2 = 0, max_err = 0;
  int64_t unwritten = 0, bad_masked = 0, written_unused = 0;
  for (int b = 0; b < o.entries(); ++b)
    for (int64_t r = 0; r < rows_q; ++r)
      for (int h = 0; h < c.heads_q; ++h)
        for (int kk = 0; kk < c.headdim; ++kk) {
          const int64_t off = o.offset(b, r, h) + kk;
          is_element[off] = 1;
          if (!row_used(b, r)) {
            written_unused += out_bits[off] != 0xFFFF;
            continue;
          }
          const float got = from_bits(out_bits[off], c.dtype);
          const float want = ref_o[o.packed_index(b, r, h, kk)];
          if (std::isnan(got)) {
            ++unwritten;
            continue;
          }
          err2 += double(got - want) * (got - want);
          ref2 += double(want) * want;
          max_err = std::max(max_err, double(std::fabs(got - want)));
        }
  int64_t clobbered = 0;
  for (size_t i = 0; i < out_bits.size(); ++i) clobbered += !is_element[i] && out_bits[i] != 0xFFFF;
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  EXPECT_EQ(unwritten, 0) << "output elements left NaN";
  EXPECT_EQ(written_unused, 0) << "output elements of rows past seqused_q were written";
  EXPECT_EQ(clobbered, 0) << "bytes outside the output's elements were written";
  EXPECT_LE(rel, tolerance(c.dtype)) << "relative L2 error of O; max abs error " << max_err;
  // The sm80 suite's fixed bounds (sm80_device_run.cpp: one unit of the format's rounding for O,
  // 1e-5 for the lse) are 2.5-4x tighter than this suite's: each case above them says so, so
  // that a device run tells which cases would need the sm80 suite's twice-naive fallback.
  const double fixed_bound = c.dtype == DType::kBFloat16 ? 4e-3 : 5e-4;
  double lse_worst = 0;  // |lse - ref| over the rows that see a key
  if (c.with_lse) {
    for (int64_t i = 0; i < lse_count; ++i) {
      const int b = varlen ? 0 : int(i / (int64_t(c.heads_q) * rows_q));
      if (row_used(b, i % rows_q) && std::isfinite(ref_lse[i])) {
        lse_worst = std::max(lse_worst, double(std::fabs(lse[i] - ref_lse[i])));
      }
    }
  }
  if (rel > fixed_bound || lse_worst > 1e-5) {
    std::printf("[ ABOVE SM80 BOUND ] %s: O relative L2 %.3g (bound %.1g), lse off by up to %.3g (bound 1e-5)\n",
                c.name.c_str(), rel, fixed_bound, lse_worst);
  }
  if (c.with_lse) {
    double lse_err = 0;
    int64_t lse_written_unused = 0;
    for (int64_t i = 0; i < lse_count; ++i) {
      // lse is (batch, heads, rows) or (heads, rows) for varlen.
      const int64_t r = i % rows_q;
      const int b = varlen ? 0 : int(i / (int64_t(c.heads_q) * rows_q));
      if (!row_used(b, r)) {
        lse_written_unused += !std::isnan(lse[i]);
        continue;
      }
      if (std::isinf(ref_lse[i])) {
        bad_masked += !(std::isinf(lse[i]) && lse[i] < 0);
      } else if (!(std::fabs(lse[i] - ref_lse[i]) <= 2e-3 * (1.0 + std::fabs(ref_lse[i])))) {
        lse_err = std::max(lse_err, std::isnan(lse[i]) ? INFINITY : double(std::fabs(lse[i] - ref_lse[i])));
      }
    }
    EXPECT_EQ(lse_err, 0.0) << "logsumexp off by up to " << lse_err;
    EXPECT_EQ(bad_masked, 0) << "rows that see no key must have lse -inf";
    EXPECT_EQ(lse_written_unused, 0) << "lse of rows past seqused_q was written";
    EXPECT_EQ(lse_clobbered, 0) << "lse padding between heads was written";
  }
  if (repeats > 0) {
    struct OwnStream {
      cudaStream_t s = nullptr;
      ~OwnStream() {
        if (s) cudaStreamDestroy(s);
      }
    } own;
    CUDA_OK(cudaStreamCreateWithFlags(&own.s, cudaStreamNonBlocking));
    const cudaStream_t noise = own.s;
    const size_t noise_bytes = size_t(64) << 20;
    void* scratch = mem.alloc(noise_bytes * repeats);
    std::vector<uint16_t> again_out(out_bits.size());
    std::vector<float> again_lse(lse_stored.size());
    for (int i = 0; i < repeats; ++i) {
      SCOPED_TRACE("repeat " + std::to_string(i + 1));
      CUDA_OK(cudaMemcpy(o.device, o.host.data(), o.host.size() * 2, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(d_lse, 0xFF, lse_alloc * 4));
      CUDA_OK(cudaMemsetAsync(scratch, i, noise_bytes * (i + 1), noise));
      s = launch();
      ASSERT_TRUE(s.ok()) << s.message;
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(cudaMemcpy(again_out.data(), o.device, again_out.size() * 2, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(again_lse.data(), d_lse, again_lse.size() * 4, cudaMemcpyDeviceToHost));
      int64_t out_differ = 0, lse_differ = 0;
      for (size_t e = 0; e < out_bits.size(); ++e) out_differ += again_out[e] != out_bits[e];
      for (size_t e = 0; e < lse_stored.size(); ++e) {
        lse_differ += std::memcmp(&again_lse[e], &lse_stored[e], 4) != 0;
      }
      EXPECT_EQ(out_differ, 0) << "output elements differ from the first launch's";
      EXPECT_EQ(lse_differ, 0) << "lse words differ from the first launch's";
    }
  }
}

class Sm90Forward : public ::testing::TestWithParam<Case> {};

// The peak HBM bandwidths (TB/s) of the two Hopper cards the rules were timed on, for the rules'
// host tests (sm90_picks_static_schedule's second argument).
constexpr double kH200TBps = 4.8, kH100TBps = 3.35;

// Whether device 0's bandwidth sends d64's causal rows past the tall tiles to the dynamic schedule
// (kernel_choice.h, kSm90StaticCausalHdim64MinTBps: the H100 does, the H200 does not).
bool d64_causal_runs_dynamic_here(const Case& c) {
  const double tbps = sm90_hbm_tbps(0);
  return c.headdim == 64 && c.causal && tbps > 0.0 && tbps < kSm90StaticCausalHdim64MinTBps;
}

// The launch counter of the kernel k names (kAny, kSm80: all sm90 ones) and its name. Builds whose
// default is the static schedule run it for every rule's static and dynamic rows alike.
struct KernelCheck {
  int64_t (*launches)();
  const char* name;
};
KernelCheck kernel_check(Kernel k) {
  switch (k) {
    case Kernel::kAny:
    case Kernel::kSm80: return {sm90_any_launches, k == Kernel::kAny ? "some sm90 kernel" : "sm80 kernel"};
    case Kernel::kDynamic: return {sm90_default_launches, "dynamic-schedule kernel"};
    case Kernel::kStatic:
      return {sm90_dynamic_schedule_by_default() ? sm90_static_schedule_launches : sm90_default_launches,
              "static-schedule kernel"};
    case Kernel::kShortRows: return {sm90_short_rows_launches, "short-rows kernel"};
    case Kernel::kClusterPairs: return {sm90_cluster_pairs_launches, "cluster-pair kernel"};
    case Kernel::kTallTiles: return {sm90_tall_tiles_launches, "tall-tile kernel"};
  }
  return {nullptr, "any kernel"};
}

TEST_P(Sm90Forward, MatchesReference) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  // A build that leaves the case's head dim out runs it on a larger one's narrow twin (the default
  // kernel's), whatever kernel the case is written for.
  AttentionProblem built;
  built.dtype = c.dtype, built.headdim = c.headdim;
  const KernelCheck check = kernel_check(c.kernel != Kernel::kAny && c.kernel != Kernel::kSm80 && sm90_runs_narrow_twin(built) ? Kernel::kDynamic
                                                                                                  : c.kernel);
  // Where the card's rule runs d64's causal rows on the dynamic schedule, the static kernel's cases
  // force it, so every card still tests that kernel (the rule's own choice: Sm90ApiPick).
  std::optional<ScopedEnv> forced_static;
  if (c.kernel == Kernel::kStatic && d64_causal_runs_dynamic_here(c)) forced_static.emplace("FLASHATTN_SM90_VARIANT", "static");
  const int64_t before = check.launches != nullptr ? check.launches() : 0;
  const uint32_t seeds[] = {1u, 2u};
  for (uint32_t seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_case(c, seed + 977u * uint32_t(c.name.size()));
  }
  if (check.launches != nullptr) {
    // kSm80: no sm90 launch at all.
    EXPECT_EQ(check.launches() - before, c.kernel == Kernel::kSm80 ? 0 : int64_t(std::size(seeds)))
        << "the API did not run the case on the " << check.name << " it is written for";
  }
}

// The gtest name of a Case suite's test: the case's own name.
std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

Case make(std::string name, DType dt, int d, int b, int sq, int sk, int hq, int hkv) {
  Case c;
  c.name = std::move(name), c.dtype = dt, c.headdim = d, c.batch = b, c.seqlen_q = sq, c.seqlen_k = sk;
  c.heads_q = hq, c.heads_kv = hkv;
  return c;
}

std::vector<Case> cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  for (DType dt : {bf, fp}) {
    const std::string t = dt == bf ? "bf16" : "fp16";
    for (int d : {64, 96, 128, 192, 256}) {
      v.push_back(make("small_d" + std::to_string(d) + "_" + t, dt, d, 2, 256, 256, 3, 3));
      v.push_back(make("ragged_d" + std::to_string(d) + "_" + t, dt, d, 2, 200, 333, 2, 2));
      Case c = make("causal_d" + std::to_string(d) + "_" + t, dt, d, 2, 300, 300, 2, 1);
      c.causal = true;
      v.push_back(c);
    }
  }
  Case c;
  c = make("causal_short_q_bf16", bf, 128, 2, 100, 333, 2, 2), c.causal = true, v.push_back(c);
  c = make("causal_long_q_masked_rows_bf16", bf, 128, 2, 333, 100, 2, 2), c.causal = true, v.push_back(c);
  c = make("causal_long_q_masked_rows_fp16", fp, 64, 1, 400, 70, 2, 2), c.causal = true, v.push_back(c);
  c = make("window_64_0_bf16", bf, 128, 2, 400, 400, 2, 2), c.window_left = 64, c.window_right = 0, v.push_back(c);
  c = make("window_32_48_fp16", fp, 64, 2, 300, 450, 2, 2), c.window_left = 32, c.window_right = 48, v.push_back(c);
  c = make("window_0_0_bf16", bf, 256, 1, 200, 200, 2, 2), c.window_left = 0, c.window_right = 0, v.push_back(c);
  c = make("window_left_only_bf16", bf, 128, 1, 500, 300, 2, 1), c.window_left = 20, v.push_back(c);
  // A right window alone, and a causal diagonal that crosses the key blocks away from their
  // corners (259 more keys than queries): warps whose last row sees only the first part of a
  // masked block.
  c = make("window_right_only_d64_bf16", bf, 64, 2, 260, 390, 2, 2), c.window_right = 20, v.push_back(c);
  c = make("causal_offset_diagonal_d128_fp16", fp, 128, 2, 200, 459, 2, 2), c.causal = true, v.push_back(c);
  c = make("softcap_bf16", bf, 128, 2, 256, 300, 2, 2), c.softcap = 30.0f, v.push_back(c);
  c = make("softcap_small_cap_fp16", fp, 64, 2, 200, 256, 2, 2), c.softcap = 2.0f, v.push_back(c);
  c = make("gqa_4to1_bf16", bf, 128, 2, 256, 256, 8, 2), v.push_back(c);
  c = make("mqa_fp16", fp, 128, 1, 200, 300, 6, 1), v.push_back(c);
  c = make("padded_strides_bf16", bf, 128, 2, 200, 300, 4, 2), c.layout = Layout::kPadded, v.push_back(c);
  c = make("head_major_fp16", fp, 64, 2, 300, 200, 2, 2), c.layout = Layout::kHeadMajor, c.causal = true, v.push_back(c);
  c = make("no_lse_bf16", bf, 128, 1, 256, 256, 2, 2), c.with_lse = false, v.push_back(c);
  // The LSE with padding between heads: 4 floats keep its TMA map (strides of 16 bytes; the
  // map must clip each head's partial last tile, not spill into the padding), 1 float does not
  // (row stores). Partial tiles (300 rows), both head dims of the output tile.
  c = make("lse_padded_tma_d128_bf16", bf, 128, 2, 300, 300, 3, 3), c.lse_pad = 4, v.push_back(c);
  c = make("lse_padded_rows_d128_fp16", fp, 128, 2, 300, 257, 3, 3), c.lse_pad = 1, v.push_back(c);
  c = make("lse_padded_tma_causal_d64_bf16", bf, 64, 2, 200, 200, 2, 2), c.lse_pad = 12, c.causal = true;
  v.push_back(c);
  c = make("varlen_bf16", bf, 128, 0, 0, 0, 4, 2);
  c.lens_q = {100, 1, 257, 130, 64}, c.lens_k = {200, 50, 257, 5, 128}, v.push_back(c);
  c = make("varlen_causal_gqa_fp16", fp, 64, 0, 0, 0, 4, 1);
  c.lens_q = {300, 17, 128, 0, 40}, c.lens_k = {300, 90, 100, 20, 0}, c.causal = true, v.push_back(c);
  c = make("varlen_window_d256_bf16", bf, 256, 0, 0, 0, 2, 2);
  c.lens_q = {150, 260}, c.lens_k = {150, 300}, c.window_left = 40, c.window_right = 10, v.push_back(c);
  c = make("varlen_padded_softcap_bf16", bf, 192, 0, 0, 0, 2, 1);
  c.lens_q = {90, 200}, c.lens_k = {333, 129}, c.layout = Layout::kPadded, c.softcap = 20.0f, v.push_back(c);
  // The tile's last key block narrowed to its first half (mainloop_mma.h, kNarrowN) without a
  // mask: a few keys past a whole number of blocks (390 = 3 x 128 + 6; 336 = 4 x 80 + 16 at d256),
  // every warpgroup of every tile.
  c = make("narrow_last_block_d128_bf16", bf, 128, 2, 300, 390, 2, 2), v.push_back(c);
  c = make("narrow_last_block_softcap_d256_fp16", fp, 256, 2, 200, 336, 2, 1), c.softcap = 10.0f, v.push_back(c);
  // The static d128 kernel with the checked max (up to 2k keys unmasked, 512 too since session 30):
  // variable lengths with padded strides and softcap, GQA with a narrowed last block, a window.
  c = make("static_checked_varlen_padded_softcap_bf16", bf, 128, 0, 0, 0, 4, 2), c.kernel = Kernel::kStatic;
  c.lens_q = {100, 1, 600}, c.lens_k = {700, 50, 650}, c.layout = Layout::kPadded, c.softcap = 20.0f;
  v.push_back(c);
  c = make("static_checked_narrow_gqa_fp16", fp, 128, 2, 300, 646, 8, 2), c.kernel = Kernel::kStatic, v.push_back(c);
  c = make("static_checked_window_fp16", fp, 128, 1, 900, 900, 4, 4), c.kernel = Kernel::kStatic;
  c.window_left = 200, c.window_right = 30;
  v.push_back(c);
  // More tiles than SMs, so each persistent CTA walks several tiles.
  c = make("persistent_many_tiles_bf16", bf, 64, 8, 256, 256, 16, 4), v.push_back(c);
  // O staged in the last key block's K / V stage (head dims 192 / 256, kOutputInKV): every tile
  // one key block (the block's stage is also the tile's first), and many tiles a CTA (the stage
  // hand-over and the held release, tile after tile, the next tile's first block in the other
  // stage), causal and with a window that leaves tiles without keys.
  c = make("o_in_kv_one_block_d256_bf16", bf, 256, 4, 300, 70, 4, 2), v.push_back(c);
  c = make("o_in_kv_many_tiles_d192_fp16", fp, 192, 8, 256, 400, 16, 4), v.push_back(c);
  c = make("o_in_kv_many_tiles_causal_d256_bf16", bf, 256, 8, 384, 384, 16, 8), c.causal = true, v.push_back(c);
  c = make("o_in_kv_window_empty_tiles_d256_fp16", fp, 256, 2, 400, 120, 4, 4);
  c.window_left = 10, c.window_right = 0, v.push_back(c);
  c = make("persistent_causal_bf16", bf, 128, 4, 640, 640, 8, 8), c.causal = true, v.push_back(c);
  // Scores growing along the keys (up to 7x their first block's spread): the running max passes
  // its slack mid-row, on the kernels that keep it (every d128 / d192 / d256 kernel, d64's three
  // and four warpgroups) and on the one that follows every rise (d64's two warpgroups: local
  // windows up to 512 keys since session 23, the short window case). The API runs the static
  // kernels for d128 unmasked rows up to 2k keys, d192 / d256 causal rows and d256 unmasked rows,
  // the dynamic ones for d128 unmasked rows past 2k (the long d128 case: three query tiles, an
  // odd number, which the cluster pairs refuse since they run from 2k keys) and d64 unmasked rows
  // past 512, d64's static three-warpgroup kernel for causal rows from 1025 to 4k keys (the long
  // causal d64 case), d64's tall tiles for causal rows up to 1k (the causal d64 case).
  const auto growing = [&](const char* name, DType dt, int d, int b, int sq, int sk, int hq, int hkv, bool causal,
                           Kernel kernel) {
    Case g = make(name, dt, d, b, sq, sk, hq, hkv);
    g.causal = causal, g.key_ramp = 6.0f, g.kernel = kernel, v.push_back(g);
  };
  growing("growing_scores_causal_d128_bf16", bf, 128, 2, 700, 700, 2, 2, true, Kernel::kStatic);
  growing("growing_scores_d128_fp16", fp, 128, 1, 200, 900, 2, 1, false, Kernel::kStatic);
  growing("growing_scores_d256_fp16", fp, 256, 2, 200, 700, 2, 2, false, Kernel::kStatic);
  growing("growing_scores_causal_d192_bf16", bf, 192, 1, 600, 600, 2, 1, true, Kernel::kStatic);
  growing("growing_scores_causal_d64_bf16", bf, 64, 2, 600, 600, 2, 2, true, Kernel::kTallTiles);
  c = make("growing_scores_window_short_d64_bf16", bf, 64, 2, 500, 500, 2, 2), c.kernel = Kernel::kShortRows;
  c.window_left = 400, c.window_right = 0, c.key_ramp = 6.0f, v.push_back(c);
  growing("growing_scores_long_d128_bf16", bf, 128, 1, 300, 2200, 2, 1, false, Kernel::kDynamic);
  growing("growing_scores_long_d64_fp16", fp, 64, 1, 400, 1400, 2, 2, false, Kernel::kDynamic);
  growing("growing_scores_long_causal_d64_fp16", fp, 64, 1, 1300, 1300, 2, 1, true, Kernel::kStatic);
  // Scores that jump up mid-row (early_key_boost): the kernels with the checked max: d128's
  // static one (up to 2k keys unmasked, causal up to 8k; the short case was the short-rows
  // kernel's until session 30), its dynamic one (past 2k), its cluster pairs (unmasked from 2k
  // keys, an even number of query tiles), d64's static three
  // warpgroups (causal 1025 to 4k keys) and its dynamic ones (unmasked past 512); exp2s past the
  // bound, and past fp32's range. The tall-tile and packing suites have their own.
  const auto rising = [&](const char* name, DType dt, int d, int b, int sq, int sk, int hq, int hkv, bool causal,
                          float boost, Kernel kernel) {
    Case g = make(name, dt, d, b, sq, sk, hq, hkv);
    g.causal = causal, g.early_key_boost = boost, g.kernel = kernel, v.push_back(g);
  };
  rising("rising_scores_short_d128_bf16", bf, 128, 2, 300, 500, 2, 2, false, 12.0f, Kernel::kStatic);
  rising("rising_scores_d128_bf16", bf, 128, 2, 300, 700, 2, 2, false, 12.0f, Kernel::kStatic);
  rising("rising_scores_overflow_d128_fp16", fp, 128, 2, 300, 700, 2, 1, false, 64.0f, Kernel::kStatic);
  rising("rising_scores_causal_d128_bf16", bf, 128, 1, 700, 700, 2, 2, true, 64.0f, Kernel::kStatic);
  rising("rising_scores_long_d128_fp16", fp, 128, 1, 300, 2200, 2, 1, false, 12.0f, Kernel::kDynamic);
  rising("rising_scores_cluster_d128_bf16", bf, 128, 1, 256, 4200, 2, 2, false, 64.0f, Kernel::kClusterPairs);
  rising("rising_scores_causal_d64_bf16", bf, 64, 1, 1300, 1300, 2, 2, true, 12.0f, Kernel::kStatic);
  rising("rising_scores_overflow_d64_fp16", fp, 64, 1, 400, 1400, 2, 2, false, 64.0f, Kernel::kDynamic);
  // A sink (keys 0-5 boosted: the last block a row visits jumps alone) and a band mid-row (one
  // tile's middle blocks jump, later ones fall back under the kept max), on the static d128
  // kernel (up to 2k keys), the dynamic one (past 2k, three query tiles: the pairs take even
  // numbers from 2k) and causal rows, both types. bf16's P stays finite past its bound (2^24),
  // so only the boosts past fp32's range (64) make a bf16 case fail without the recompute.
  const auto boosted = [&](const char* name, DType dt, int d, int b, int sq, int sk, int hq, int hkv, bool causal,
                           float boost, int from, int to, Kernel kernel) {
    Case g = make(name, dt, d, b, sq, sk, hq, hkv);
    g.causal = causal, g.early_key_boost = boost, g.boost_from = from, g.boost_to = to, g.kernel = kernel;
    v.push_back(g);
  };
  boosted("sink_scores_d128_bf16", bf, 128, 2, 300, 1500, 2, 2, false, 64.0f, 0, 6, Kernel::kStatic);
  boosted("sink_scores_causal_d128_bf16", bf, 128, 1, 1000, 1000, 4, 2, true, 64.0f, 0, 6, Kernel::kStatic);
  boosted("sink_scores_long_d128_bf16", bf, 128, 1, 300, 3000, 2, 1, false, 64.0f, 0, 6, Kernel::kDynamic);
  boosted("sink_scores_d128_fp16", fp, 128, 2, 300, 1500, 2, 2, false, 12.0f, 0, 6, Kernel::kStatic);
  boosted("band_scores_d128_bf16", bf, 128, 2, 300, 1500, 2, 2, false, 12.0f, 600, 700, Kernel::kStatic);
  boosted("band_scores_causal_d128_bf16", bf, 128, 1, 900, 900, 2, 2, true, 64.0f, 300, 500, Kernel::kStatic);
  boosted("band_scores_long_d128_bf16", bf, 128, 1, 300, 2600, 2, 1, false, 64.0f, 1000, 1200, Kernel::kDynamic);
  // The same inside a local window (the recompute masks its blocks as the key loop does): the
  // static kernel (windows up to 2k keys) and the dynamic one (past 2k), the band inside every
  // row's window but not in the block each row visits first.
  c = make("band_scores_window_d128_bf16", bf, 128, 2, 300, 1500, 2, 2), c.kernel = Kernel::kStatic;
  c.window_left = 700, c.window_right = 200, c.early_key_boost = 64.0f, c.boost_from = 900, c.boost_to = 1000;
  v.push_back(c);
  c = make("band_scores_window_long_d128_bf16", bf, 128, 1, 300, 3000, 2, 1), c.kernel = Kernel::kDynamic;
  c.window_left = 1500, c.window_right = 100, c.early_key_boost = 64.0f, c.boost_from = 1500, c.boost_to = 1700;
  v.push_back(c);
  // The fallback reads the block's K from global memory (KernelConfig::kFallbackKeysFromGlobal):
  // variable lengths (the sequence's first key row), padded and head-major strides, GQA / MQA
  // heads. The boost covers the first half of the packed key rows, so the middle sequence's
  // scores jump up mid-row. Longest sequence past 2k keys: d128's dynamic kernel; causal d64 at
  // 1025 to 4k keys: its static three warpgroups.
  c = make("rising_scores_varlen_padded_d128_bf16", bf, 128, 0, 0, 0, 4, 2), c.kernel = Kernel::kDynamic;
  c.lens_q = {200, 64, 300}, c.lens_k = {600, 2300, 900}, c.layout = Layout::kPadded, c.early_key_boost = 12.0f;
  v.push_back(c);
  c = make("rising_scores_varlen_causal_mqa_d64_fp16", fp, 64, 0, 0, 0, 4, 1), c.kernel = Kernel::kStatic;
  c.lens_q = {500, 1500, 300}, c.lens_k = {500, 1500, 300}, c.causal = true, c.early_key_boost = 64.0f;
  v.push_back(c);
  c = make("rising_scores_head_major_d128_bf16", bf, 128, 2, 300, 2600, 2, 1), c.kernel = Kernel::kDynamic;
  c.layout = Layout::kHeadMajor, c.early_key_boost = 12.0f, v.push_back(c);
  // The static d128 kernel releases Q's tile once the tile's first S is issued
  // (KernelConfig::kQReleasedAtLoad): the checked max's fallback reads Q from global memory, and
  // the tile's last block may keep its max. More tiles than SMs (each CTA walks several, the next
  // Q loading under the whole tile), tiles without keys or rows between them, rowless
  // warpgroups, a tile whose only block is narrowed (causal m-block 0), and the fallback's Q
  // addressing with varlen, padded and head-major strides, MQA and seqused rows (rows past the
  // sequence clamped).
  c = make("q_released_varlen_empty_tiles_padded_d128_bf16", bf, 128, 0, 0, 0, 4, 2), c.kernel = Kernel::kStatic;
  c.lens_q = {700, 0, 300, 129, 700, 64, 1, 500, 600, 10, 700, 256};
  c.lens_k = {700, 50, 0, 640, 1000, 0, 64, 500, 1, 700, 129, 900};
  c.layout = Layout::kPadded, c.early_key_boost = 12.0f, v.push_back(c);
  c = make("q_released_many_tiles_causal_d128_fp16", fp, 128, 3, 1024, 1024, 8, 4), c.kernel = Kernel::kStatic;
  c.causal = true;
  c.early_key_boost = 64.0f, v.push_back(c);
  c = make("q_released_head_major_mqa_rising_d128_fp16", fp, 128, 2, 333, 1500, 4, 1), c.kernel = Kernel::kStatic;
  c.layout = Layout::kHeadMajor, c.early_key_boost = 64.0f, v.push_back(c);
  c = make("q_released_seqused_rising_d128_bf16", bf, 128, 3, 700, 900, 4, 2), c.kernel = Kernel::kStatic;
  c.early_key_boost = 12.0f;
  c.used_q = {700, 37, 450}, c.used_k = {900, 600, 1}, v.push_back(c);
  // Tile boundaries in d64's dynamic three warpgroups (unmasked past 512 keys: the mailbox's
  // turns) and its static ones (causal 1025 to 4k keys), more tiles than SMs in both: tiles
  // without rows or keys after tiles with keys, a sequence's only key block narrowed, the walk's
  // end. Session 34 ran them, with the rest of this suite, with each tile's last P V left in
  // flight over the boundary (KernelConfig::kLastPvAcrossTiles, harness only since).
  c = make("boundary_varlen_empty_tiles_d64_fp16", fp, 64, 0, 0, 0, 16, 4), c.kernel = Kernel::kDynamic;
  c.lens_q = {600, 0, 193, 1, 900, 64, 0, 700};
  c.lens_k = {1500, 40, 0, 600, 900, 1, 0, 1200};
  c.layout = Layout::kPadded, v.push_back(c);
  c = make("boundary_varlen_causal_d64_bf16", bf, 64, 0, 0, 0, 8, 8), c.kernel = Kernel::kStatic;
  c.lens_q = {1300, 5, 0, 2000, 190};
  c.lens_k = {1300, 5, 70, 2000, 190};
  c.causal = true, c.early_key_boost = 12.0f, v.push_back(c);
  // The next tile's Q prefetched into the L2 (KernelConfig::kPrefetchNextQ; d256 from 4096 keys,
  // the longest sequence's): more tiles than SMs over variable lengths, so the prefetch decodes
  // tiles of every sequence, and of sequences shorter than the longest (tiles without rows, which
  // it passes over), with padded strides.
  c = make("q_prefetch_varlen_causal_padded_d256_bf16", bf, 256, 0, 0, 0, 4, 2), c.kernel = Kernel::kStatic;
  c.lens_q = {4100, 700, 0, 1300, 2500}, c.lens_k = {4100, 900, 64, 1300, 2600};
  c.causal = true, c.layout = Layout::kPadded, v.push_back(c);
  c = make("persistent_window_softcap_fp16", fp, 128, 4, 512, 700, 8, 2);
  c.window_left = 100, c.window_right = 30, c.softcap = 15.0f, v.push_back(c);
  // seqused: zero, full and ragged used lengths; masks align to the used lengths, and rows of
  // out / lse past seqused_q stay poisoned (the fixed-length TMA store must not write them).
  c = make("seqused_q_fixed_causal_bf16", bf, 128, 3, 300, 300, 4, 2), c.causal = true;
  c.used_q = {0, 300, 157}, v.push_back(c);
  c = make("seqused_k_fixed_fp16", fp, 64, 3, 190, 260, 4, 2), c.used_k = {257, 0, 131}, v.push_back(c);
  c = make("seqused_qk_fixed_causal_d256_bf16", bf, 256, 3, 200, 333, 2, 1), c.causal = true;
  c.used_q = {200, 77, 1}, c.used_k = {333, 100, 0}, v.push_back(c);
  c = make("seqused_qk_fixed_window_d192_fp16", fp, 192, 2, 260, 260, 2, 2), c.window_left = 30, c.window_right = 5;
  c.used_q = {129, 260}, c.used_k = {200, 3}, v.push_back(c);
  c = make("seqused_varlen_causal_bf16", bf, 128, 0, 0, 0, 4, 2);
  c.lens_q = {130, 1, 257}, c.lens_k = {200, 64, 300}, c.causal = true;
  c.used_q = {0, 1, 180}, c.used_k = {197, 0, 131}, v.push_back(c);
  c = make("seqused_varlen_d256_fp16", fp, 256, 0, 0, 0, 2, 2);
  c.lens_q = {150, 260}, c.lens_k = {150, 300}, c.used_q = {149, 3}, c.used_k = {150, 299}, v.push_back(c);
  c = make("seqused_persistent_bf16", bf, 64, 8, 256, 256, 16, 4);
  c.used_q = {256, 200, 129, 128, 127, 1, 64, 0}, c.used_k = {256, 255, 1, 128, 200, 256, 64, 9}, v.push_back(c);
  // Head dim 96 (d128's tiles on three quarters of the columns: the second 64-element column half
  // used, config.h TileShape<96>), on the kernels its rules give it: the static kernel (Q in
  // registers, released at load, turns around the GEMMs; the checked max, bf16 with the tile
  // recompute, fp16 with the fallback a block) up to 4k keys and for windows, the dynamic one past
  // 4k keys. The wgmma of P V is N = 96 over a column and a half of V, and S's last two steps read
  // Q and K's second column.
  rising("rising_scores_d96_bf16", bf, 96, 2, 300, 700, 2, 2, false, 64.0f, Kernel::kStatic);
  rising("rising_scores_overflow_d96_fp16", fp, 96, 2, 300, 700, 2, 1, false, 64.0f, Kernel::kStatic);
  rising("rising_scores_causal_d96_bf16", bf, 96, 1, 700, 700, 2, 2, true, 64.0f, Kernel::kStatic);
  rising("rising_scores_overflow_causal_d96_fp16", fp, 96, 1, 700, 700, 2, 1, true, 64.0f, Kernel::kStatic);
  rising("rising_scores_causal_mid_d96_bf16", bf, 96, 1, 2300, 2300, 2, 1, true, 12.0f, Kernel::kStatic);
  rising("rising_scores_causal_long_d96_bf16", bf, 96, 1, 4300, 4300, 1, 1, true, 12.0f, Kernel::kDynamic);
  rising("rising_scores_long_d96_fp16", fp, 96, 1, 300, 4500, 2, 1, false, 12.0f, Kernel::kDynamic);
  boosted("sink_scores_long_padded_d96_bf16", bf, 96, 1, 300, 3000, 2, 1, false, 64.0f, 0, 6, Kernel::kStatic);
  v.back().layout = Layout::kPadded;
  boosted("sink_scores_longer_padded_d96_fp16", fp, 96, 1, 300, 4400, 2, 1, false, 64.0f, 0, 6, Kernel::kDynamic);
  v.back().layout = Layout::kPadded;
  boosted("band_scores_causal_d96_bf16", bf, 96, 1, 900, 900, 2, 2, true, 64.0f, 300, 500, Kernel::kStatic);
  // Variable lengths under a local window (padded rows) and seqused in a head-major layout: rows
  // stored one by one by the predicated epilogue, tiles without keys.
  const auto varlen_and_seqused = [&](int d_varlen, int d_seqused, Kernel window_kernel, Kernel kernel) {
    Case w = make("varlen_window_d" + std::to_string(d_varlen) + "_fp16", fp, d_varlen, 0, 0, 0, 4, 2);
    w.kernel = window_kernel, w.layout = Layout::kPadded, w.lens_q = {100, 1, 257, 130}, w.lens_k = {200, 50, 257, 5};
    w.window_left = 60, w.window_right = 10, v.push_back(w);
    Case u = make("seqused_head_major_d" + std::to_string(d_seqused) + "_bf16", bf, d_seqused, 3, 300, 333, 2, 2);
    u.kernel = kernel, u.layout = Layout::kHeadMajor, u.used_q = {300, 77, 0}, u.used_k = {333, 100, 1};
    v.push_back(u);
  };
  varlen_and_seqused(96, 96, Kernel::kStatic, Kernel::kStatic);
  c = make("persistent_causal_d96_fp16", fp, 96, 4, 640, 640, 8, 8), c.kernel = Kernel::kStatic, c.causal = true;
  v.push_back(c);
  // Head dims between the instantiations run on the next larger one, in the default kernel's
  // narrow twin (NarrowHeadDimConfig; dynamic schedule), the columns past the head dim zero (TMA's
  // fill on loads, left out of its stores; KernelParams::head_dim): 80 and 88 on d96's kernel,
  // 112 on d128's, 32 on d64's, 160 on d192's, 224 on d256's. In packed layouts those columns
  // hold the next head's values, in padded ones NaN, so a kernel that reads them into S or P V
  // fails the case, and one that writes them clobbers a neighbour. The checked max reads Q, K and
  // V from global memory in its fallback (fp16) and tile recompute (bf16) (the rising and sink
  // cases); variable lengths and seqused store O row by row (the predicated epilogue); windows
  // and seqused leave tiles without keys (their zero stores); a decode-like GQA shape, which GQA
  // packing does not take at these head dims.
  for (DType dt : {bf, fp}) {
    const std::string t = dt == bf ? "bf16" : "fp16";
    c = make("small_d112_" + t, dt, 112, 2, 256, 256, 3, 3), c.kernel = Kernel::kDynamic, v.push_back(c);
    c = make("causal_d80_" + t, dt, 80, 2, 300, 300, 2, 1), c.kernel = Kernel::kDynamic, c.causal = true;
    v.push_back(c);
  }
  c = make("ragged_padded_d80_bf16", bf, 80, 2, 200, 333, 2, 2), c.kernel = Kernel::kDynamic;
  c.layout = Layout::kPadded, v.push_back(c);
  varlen_and_seqused(112, 88, Kernel::kDynamic, Kernel::kDynamic);
  c = make("decode_gqa_d112_bf16", bf, 112, 2, 16, 500, 8, 2), c.kernel = Kernel::kDynamic, c.causal = true;
  v.push_back(c);
  rising("rising_scores_overflow_d80_bf16", bf, 80, 2, 300, 700, 2, 2, false, 64.0f, Kernel::kDynamic);
  rising("rising_scores_overflow_d112_fp16", fp, 112, 2, 300, 700, 2, 1, false, 64.0f, Kernel::kDynamic);
  boosted("sink_scores_long_padded_d112_bf16", bf, 112, 1, 300, 3000, 2, 1, false, 64.0f, 0, 6, Kernel::kDynamic);
  v.back().layout = Layout::kPadded;
  c = make("ragged_d32_bf16", bf, 32, 2, 200, 333, 2, 2), c.kernel = Kernel::kDynamic, v.push_back(c);
  c = make("causal_d32_fp16", fp, 32, 2, 600, 600, 2, 2), c.kernel = Kernel::kDynamic, c.causal = true;
  v.push_back(c);
  rising("rising_scores_long_d32_fp16", fp, 32, 1, 400, 1400, 2, 2, false, 64.0f, Kernel::kDynamic);
  c = make("window_softcap_padded_d160_bf16", bf, 160, 2, 300, 400, 2, 2), c.kernel = Kernel::kDynamic;
  c.layout = Layout::kPadded, c.window_left = 50, c.window_right = 20, c.softcap = 20.0f, v.push_back(c);
  c = make("causal_gqa_d224_fp16", fp, 224, 2, 300, 300, 4, 2), c.kernel = Kernel::kDynamic, c.causal = true;
  v.push_back(c);
  // No key rows at all (a tensor map needs one): the sm80 kernel's, O = 0 and lse = -inf.
  c = make("no_keys_bf16", bf, 128, 2, 100, 0, 4, 2), c.kernel = Kernel::kSm80, v.push_back(c);
  c = make("no_keys_gqa_short_q_causal_fp16", fp, 64, 2, 16, 0, 8, 2), c.kernel = Kernel::kSm80, c.causal = true;
  v.push_back(c);
  c = make("varlen_no_keys_bf16", bf, 256, 0, 0, 0, 2, 1), c.kernel = Kernel::kSm80;
  c.lens_q = {5, 70, 130}, c.lens_k = {0, 0, 0}, v.push_back(c);
  // Every sequence without keys but k / v rows past them (padded serving buffers): the sm90 kernels'.
  c = make("varlen_no_keys_extra_rows_fp16", fp, 128, 0, 0, 0, 4, 2);
  c.lens_q = {5, 130}, c.lens_k = {0, 0}, c.extra_k = 70, v.push_back(c);
  // Pairs of options at every head dim and dtype (issue 4, item 5), each on whichever sm90 kernel
  // the rules give it: a window with softcap, a window over variable lengths, a window with
  // seqused, softcap with seqused_q, causal variable lengths with softcap.
  for (DType dt : {bf, fp}) {
    const std::string t = dt == bf ? "_bf16" : "_fp16";
    for (int d : {64, 96, 128, 192, 256}) {
      const std::string dd = "_d" + std::to_string(d);
      c = make("pair_window_softcap" + dd + t, dt, d, 2, 300, 350, 4, 2);
      c.window_left = 70, c.window_right = 30, c.softcap = 15.0f, v.push_back(c);
      c = make("pair_window_varlen" + dd + t, dt, d, 0, 0, 0, 4, 1);
      c.lens_q = {130, 40, 0, 260}, c.lens_k = {200, 40, 7, 230}, c.window_left = 50, c.window_right = 0;
      c.layout = dt == bf ? Layout::kPadded : Layout::kPacked, v.push_back(c);
      c = make("pair_window_seqused" + dd + t, dt, d, 2, 300, 400, 2, 2);
      c.used_q = {250, 300}, c.used_k = {400, 123}, c.window_left = 60, c.window_right = 20, v.push_back(c);
      c = make("pair_softcap_seqused_q_causal" + dd + t, dt, d, 3, 260, 300, 2, 1);
      c.used_q = {260, 1, 131}, c.softcap = 10.0f, c.causal = true, v.push_back(c);
      c = make("pair_varlen_causal_softcap" + dd + t, dt, d, 0, 0, 0, 2, 2);
      c.lens_q = {90, 300, 17}, c.lens_k = {150, 300, 5}, c.causal = true, c.softcap = 25.0f;
      c.layout = dt == fp ? Layout::kHeadMajor : Layout::kPacked, v.push_back(c);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90Forward, ::testing::ValuesIn(cases()), case_name);

TEST(Sm90ForwardDirect, KernelRunsThroughKernelSet) {
  SKIP_UNLESS_SM90();
  Case c = make("direct", DType::kBFloat16, 128, 2, 300, 300, 4, 2);
  c.causal = true;
  run_case(c, 7, /*direct=*/true);
}

TEST(Sm90ForwardDirect, SeqUsedRunsThroughKernelSet) {
  SKIP_UNLESS_SM90();
  Case c = make("direct_seqused", DType::kBFloat16, 128, 2, 300, 300, 4, 2);
  c.causal = true, c.used_q = {211, 300}, c.used_k = {250, 129};
  run_case(c, 11, /*direct=*/true);
}

TEST(Sm90ForwardDirect, RefusesAlibi) {
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 128;
  float slope = 0.5f;
  p.alibi_slopes = &slope;
  Status s = sm90_supports_forward(p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("ALiBi"), std::string::npos) << s.message;
}

// Key rows the kernel's last block reads but no sequence uses (past seqused_k, varlen rows past
// cu_seqlens_k[batch]) are taken: their V rows are zeroed in shared memory (mainloop_load.h).
// Host-side check; Sm90UnusedKeyRows runs them.
TEST(Sm90ForwardDirect, TakesUnusedKeyRows) {
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 128, p.score.scale = 0.1f, p.batch = 1, p.seqlen_q = 1, p.seqlen_k = 64;
  p.nheads_q = p.nheads_kv = 2;
  const int row = 1024;
  p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 64 * row, row, 128};
  const Status plain = sm90_supports_forward(p);
  if (!plain.ok()) GTEST_SKIP() << plain.message;  // head dim 128 bf16 not built
  int32_t used = 3;
  p.seqused_k = &used;
  EXPECT_TRUE(sm90_supports_forward(p).ok()) << sm90_supports_forward(p).message;
  p.seqused_k = nullptr;
  p.kv_rows_past_last_sequence = true;
  EXPECT_TRUE(sm90_supports_forward(p).ok()) << sm90_supports_forward(p).message;
  // Every head dim the sm90 kernel is built for zeroes unused V rows (kZeroKvTailMaxHeadDim).
  p.headdim = 256;
  p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 64 * row, row, 256};
  p.kv_rows_past_last_sequence = false;
  if (!sm90_supports_forward(p).ok()) return;  // head dim 256 bf16 not built
  p.seqused_k = &used;
  EXPECT_TRUE(sm90_supports_forward(p).ok()) << sm90_supports_forward(p).message;
  p.seqused_k = nullptr;
  p.kv_rows_past_last_sequence = true;
  EXPECT_TRUE(sm90_supports_forward(p).ok()) << sm90_supports_forward(p).message;
}

// ---- Unused key rows (seqused_k, varlen rows past the last sequence) in the sm90 kernel ----
// Every such row holds NaN (run_case); the default and (for GQA groups) the packed kernel are
// called directly, so these prove the sm90 kernel ran.
class Sm90UnusedKeyRows : public ::testing::TestWithParam<Case> {};

bool packable(const Case& c) {
  const int g = c.heads_q / c.heads_kv;
  return c.heads_q % c.heads_kv == 0 && g >= 2 && g <= 64 && (g & (g - 1)) == 0;
}

TEST_P(Sm90UnusedKeyRows, MatchesReference) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  for (uint32_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_case(c, seed + 313u * uint32_t(c.name.size()), /*direct=*/true);
  }
  if (!packable(c)) return;
  SCOPED_TRACE("GQA head packing");
  run_case(c, 3u + 313u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true);
}

std::vector<Case> unused_key_row_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  c = make("uk_fixed_fp16", fp, 64, 3, 190, 260, 4, 2), c.used_k = {257, 0, 131}, v.push_back(c);
  c = make("uk_fixed_block_multiple_bf16", bf, 128, 3, 64, 384, 8, 2), c.used_k = {256, 128, 1}, v.push_back(c);
  c = make("uk_fixed_causal_d192_bf16", bf, 192, 3, 200, 333, 2, 1), c.causal = true;
  c.used_q = {200, 77, 1}, c.used_k = {333, 100, 0}, v.push_back(c);
  c = make("uk_fixed_window_d192_fp16", fp, 192, 2, 260, 260, 4, 2), c.window_left = 30, c.window_right = 5;
  c.used_q = {129, 260}, c.used_k = {200, 3}, v.push_back(c);
  c = make("uk_fixed_softcap_d128_fp16", fp, 128, 2, 100, 300, 4, 1), c.softcap = 20.0f;
  c.used_k = {299, 77}, v.push_back(c);
  c = make("uk_varlen_extra_rows_bf16", bf, 128, 0, 0, 0, 4, 2);
  c.lens_q = {130, 1, 257}, c.lens_k = {200, 64, 300}, c.extra_k = 3, v.push_back(c);
  c = make("uk_varlen_seqused_causal_extra_bf16", bf, 128, 0, 0, 0, 4, 2);
  c.lens_q = {130, 1, 257}, c.lens_k = {200, 64, 300}, c.causal = true, c.extra_k = 40;
  c.used_q = {0, 1, 180}, c.used_k = {197, 0, 131}, v.push_back(c);
  c = make("uk_varlen_seqused_causal_extra_static_checked_bf16", bf, 128, 0, 0, 0, 4, 2);
  c.lens_q = {130, 1, 700}, c.lens_k = {600, 64, 800}, c.causal = true, c.extra_k = 40;
  c.used_q = {0, 1, 650}, c.used_k = {597, 0, 700}, v.push_back(c);
  c = make("uk_varlen_d192_fp16", fp, 192, 0, 0, 0, 4, 2);
  c.lens_q = {150, 260}, c.lens_k = {150, 300}, c.used_q = {149, 3}, c.used_k = {150, 299}, c.extra_k = 81;
  v.push_back(c);
  // Head dim 256: key blocks of 80 rows.
  c = make("uk_fixed_causal_d256_bf16", bf, 256, 3, 200, 333, 2, 1), c.causal = true;
  c.used_q = {200, 77, 1}, c.used_k = {333, 100, 0}, v.push_back(c);
  c = make("uk_varlen_d256_fp16", fp, 256, 0, 0, 0, 4, 2);
  c.lens_q = {150, 260}, c.lens_k = {161, 300}, c.used_k = {81, 239}, c.extra_k = 77, v.push_back(c);
  c = make("uk_varlen_window_d64_fp16", fp, 64, 0, 0, 0, 8, 1);
  c.lens_q = {33, 7}, c.lens_k = {515, 129}, c.window_left = 50, c.window_right = 0, c.extra_k = 200, v.push_back(c);
  // More tiles than SMs: each persistent CTA hands the zeroing warp several jobs.
  c = make("uk_persistent_bf16", bf, 64, 8, 256, 256, 16, 4);
  c.used_q = {256, 200, 129, 128, 127, 1, 64, 0}, c.used_k = {256, 255, 1, 128, 200, 256, 64, 9}, v.push_back(c);
  // Decode against a cache with ragged used lengths (paged-cache style), GQA 32/8.
  c = make("uk_decode_q1_g4_bf16", bf, 128, 24, 1, 1000, 32, 8);
  for (int b = 0; b < 24; ++b) c.used_k.push_back(b == 0 ? 0 : (b * 397) % 1000 + 1);
  v.push_back(c);
  c = make("uk_decode_q16_g8_causal_fp16", fp, 64, 6, 16, 700, 16, 2), c.causal = true;
  c.used_k = {700, 16, 129, 513, 5, 640}, v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90UnusedKeyRows, ::testing::ValuesIn(unused_key_row_cases()), case_name);

// ---- GQA head packing (sm90_forward_pack_gqa) ----
// The query heads of a KV head share one 128-row tile (tile row r = query row r / G of head
// kv * G + r % G). Called directly here, whatever sm90_picks_pack_gqa says. Same oracle, poison
// and lse checks as above.
class Sm90GqaPacking : public ::testing::TestWithParam<Case> {};

// The wgmma packed kernels' tests keep those kernels on every case (FLASHATTN_SM90_SLICED_DECODE=0):
// the sliced decode kernel's rule would take their d64 decode steps of more tiles than SMs, and it
// runs every case it holds in tests of its own (SlicedDecodeMatchesReference, Sm90SlicedDecode).
constexpr const char* kSlicedSwitch = "FLASHATTN_SM90_SLICED_DECODE";

TEST_P(Sm90GqaPacking, MatchesReference) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");
  for (uint32_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_case(c, seed + 131u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true);
    if (::testing::Test::IsSkipped()) return;
  }
}

std::vector<Case> pack_gqa_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  // Every group size with every short query length; key lengths that are not multiples of the
  // key block, and the masks, dtypes and head dims rotated through the grid.
  const int groups[] = {2, 4, 8};
  const int lens_q[] = {1, 7, 16, 33, 64};
  const int lens_k[] = {1, 97, 200, 333, 515, 129, 1000, 45, 260, 700, 3, 384, 81, 611, 150};
  const int hdims[] = {128, 64, 128, 256, 64, 192};
  int i = 0;
  for (int g : groups) {
    for (int sq : lens_q) {
      const DType dt = i % 2 ? fp : bf;
      const int d = hdims[i % 6], sk = lens_k[i % 15];
      const int heads_kv = 1 + i % 3, batch = 1 + (i / 3) % 3;
      Case c = make("", dt, d, batch, sq, sk, g * heads_kv, heads_kv);
      std::string mask;
      switch (i % 5) {
        case 0: mask = "full"; break;
        case 1: c.causal = true, mask = "causal"; break;
        case 2: c.window_left = 20, c.window_right = 5, mask = "window"; break;
        case 3: c.softcap = 30.0f, mask = "softcap"; break;
        case 4: c.causal = true, c.softcap = 15.0f, mask = "causal_softcap"; break;
      }
      c.name = "g" + std::to_string(g) + "_q" + std::to_string(sq) + "_k" + std::to_string(sk) + "_d" +
               std::to_string(d) + "_" + mask + (dt == bf ? "_bf16" : "_fp16");
      v.push_back(c);
      ++i;
    }
  }
  Case c;
  // Query rows past seqlen_k under a causal mask see no key (O = 0, lse = -inf), some tiles entirely.
  c = make("g4_causal_q64_k20_bf16", bf, 128, 2, 64, 20, 8, 2), c.causal = true, v.push_back(c);
  c = make("g8_causal_window_q33_k40_fp16", fp, 64, 1, 33, 40, 8, 1), c.causal = true, c.window_left = 3, v.push_back(c);
  // Several query tiles per KV head (longer query than 128 / G rows), longest-first causal order.
  c = make("g2_q300_k300_causal_bf16", bf, 128, 2, 300, 300, 4, 2), c.causal = true, v.push_back(c);
  c = make("g4_q130_k517_fp16", fp, 64, 1, 130, 517, 8, 2), v.push_back(c);
  c = make("g8_q100_k250_window_bf16", bf, 256, 1, 100, 250, 8, 1), c.window_left = 64, c.window_right = 0, v.push_back(c);
  // Larger groups: 16 and 64 (MQA), the largest the packing takes.
  c = make("g16_q5_k300_causal_bf16", bf, 128, 2, 5, 300, 32, 2), c.causal = true, v.push_back(c);
  c = make("g64_mqa_q2_k777_fp16", fp, 128, 1, 2, 777, 64, 1), v.push_back(c);
  c = make("g64_mqa_q3_k100_causal_bf16", bf, 64, 2, 3, 100, 64, 1), c.causal = true, v.push_back(c);
  // Strided layouts: the 5-D maps step the group with the head stride and the kv head with G times it.
  c = make("g4_padded_q9_k300_bf16", bf, 128, 2, 9, 300, 8, 2), c.layout = Layout::kPadded, v.push_back(c);
  c = make("g2_head_major_q17_k90_causal_fp16", fp, 64, 2, 17, 90, 4, 2), c.layout = Layout::kHeadMajor;
  c.causal = true, v.push_back(c);
  c = make("g4_no_lse_q16_k200_bf16", bf, 128, 1, 16, 200, 8, 2), c.with_lse = false, v.push_back(c);
  // More tiles than SMs (decode-like batch): every persistent CTA walks several packed tiles.
  c = make("g4_persistent_q4_k300_bf16", bf, 128, 48, 4, 300, 16, 4), c.causal = true, v.push_back(c);
  c = make("g8_persistent_q1_k1000_fp16", fp, 64, 40, 1, 1000, 32, 4), v.push_back(c);
  // seqused_q (fixed length): the row-predicated epilogue; rows past it keep their poison.
  c = make("g4_seqused_q_q33_k200_causal_bf16", bf, 128, 3, 33, 200, 8, 2), c.causal = true;
  c.used_q = {0, 33, 5}, v.push_back(c);
  // Variable length (cu_seqlens): the row-predicated epilogue, boxes that run into the next sequence.
  c = make("g4_varlen_causal_bf16", bf, 128, 0, 0, 0, 8, 2);
  c.lens_q = {1, 7, 0, 33, 64, 130}, c.lens_k = {100, 7, 50, 333, 1, 200}, c.causal = true, v.push_back(c);
  c = make("g8_varlen_window_fp16", fp, 64, 0, 0, 0, 16, 2);
  c.lens_q = {16, 1, 40}, c.lens_k = {515, 129, 40}, c.window_left = 30, c.window_right = 2, v.push_back(c);
  c = make("g2_varlen_softcap_d256_bf16", bf, 256, 0, 0, 0, 2, 1);
  c.lens_q = {64, 3, 65}, c.lens_k = {64, 250, 300}, c.softcap = 20.0f, v.push_back(c);
  c = make("g4_varlen_seqused_q_fp16", fp, 128, 0, 0, 0, 4, 1);
  c.lens_q = {20, 40}, c.lens_k = {200, 81}, c.used_q = {13, 40}, c.causal = true, v.push_back(c);
  // Scores that jump up mid-row on the packed d128 kernel (the checked max's fallback): past the
  // bound, and past fp32's range.
  c = make("g4_rising_scores_q40_k700_bf16", bf, 128, 2, 40, 700, 8, 2), c.early_key_boost = 12.0f, v.push_back(c);
  c = make("g8_sink_scores_q20_k900_bf16", bf, 128, 2, 20, 900, 16, 2), c.early_key_boost = 64.0f;
  c.boost_to = 4, v.push_back(c);
  c = make("g2_rising_scores_causal_q300_k900_fp16", fp, 128, 1, 300, 900, 4, 2), c.causal = true;
  c.early_key_boost = 64.0f, v.push_back(c);
  // Head dim 96 (d128's tiles, the second column half used): causal with rows past the keys,
  // variable length with softcap, and the checked max's fallback.
  c = make("g4_causal_q40_k30_d96_bf16", bf, 96, 2, 40, 30, 8, 2), c.causal = true, v.push_back(c);
  c = make("g8_varlen_softcap_d96_fp16", fp, 96, 0, 0, 0, 16, 2);
  c.lens_q = {16, 1, 9}, c.lens_k = {300, 129, 64}, c.softcap = 20.0f, v.push_back(c);
  c = make("g2_rising_scores_q64_k700_d96_bf16", bf, 96, 2, 64, 700, 4, 2), c.early_key_boost = 64.0f, v.push_back(c);
  // Groups that are not powers of two: kBlockM mod G tile rows without a query row (2 at G = 3,
  // 3 at G = 5, 2 at G = 6 and 7, 8 at G = 12, 32 at G = 48), stored through the predicated path;
  // several tiles a KV head (G = 3, 64 query rows: 42 a tile), causal rows past the keys, variable
  // lengths, seqused, softcap and windows, every head dim.
  c = make("g3_q64_k300_causal_bf16", bf, 128, 2, 64, 300, 6, 2), c.causal = true, v.push_back(c);
  c = make("g3_q1_k1000_d256_fp16", fp, 256, 3, 1, 1000, 9, 3), v.push_back(c);
  c = make("g5_q20_k15_causal_d64_bf16", bf, 64, 2, 20, 15, 40, 8), c.causal = true, v.push_back(c);
  c = make("g6_seqused_q_q30_k500_window_d192_fp16", fp, 192, 3, 30, 500, 12, 2), c.window_left = 100;
  c.window_right = 0, c.used_q = {30, 7, 0}, c.used_k = {500, 33, 250}, v.push_back(c);
  c = make("g7_varlen_softcap_d128_bf16", bf, 128, 0, 0, 0, 28, 4);
  c.lens_q = {1, 18, 5, 0}, c.lens_k = {900, 40, 129, 3}, c.softcap = 20.0f, v.push_back(c);
  c = make("g7_decode_persistent_q1_k700_d96_fp16", fp, 96, 40, 1, 700, 28, 4), c.causal = true, v.push_back(c);
  c = make("g12_q10_k333_padded_bf16", bf, 128, 2, 10, 333, 24, 2), c.layout = Layout::kPadded, v.push_back(c);
  c = make("g48_q2_k260_head_major_no_lse_fp16", fp, 64, 1, 2, 260, 48, 1), c.layout = Layout::kHeadMajor;
  c.with_lse = false, v.push_back(c);
  c = make("g5_rising_scores_q25_k700_d128_bf16", bf, 128, 2, 25, 700, 10, 2), c.early_key_boost = 64.0f;
  v.push_back(c);
  // Pairs of options packed: a window with seqused, softcap with seqused_q, a window with softcap.
  c = make("g4_window_seqused_q20_k300_d128_fp16", fp, 128, 2, 20, 300, 8, 2), c.window_left = 40;
  c.window_right = 3, c.used_q = {20, 9}, c.used_k = {300, 77}, v.push_back(c);
  c = make("g2_softcap_seqused_q_q64_k260_d192_bf16", bf, 192, 3, 64, 260, 4, 2), c.softcap = 12.0f;
  c.used_q = {64, 0, 33}, c.causal = true, v.push_back(c);
  c = make("g8_window_softcap_q16_k500_d256_fp16", fp, 256, 1, 16, 500, 8, 1), c.window_left = 100;
  c.window_right = 10, c.softcap = 20.0f, v.push_back(c);
  c = make("g4_window_softcap_varlen_d96_bf16", bf, 96, 0, 0, 0, 8, 2);
  c.lens_q = {30, 1, 64}, c.lens_k = {400, 2, 130}, c.window_left = 25, c.window_right = 25, c.softcap = 8.0f;
  v.push_back(c);
  // Decode tiles whose live rows are all first fragment rows (G x seqlen_q <= 8: tile rows 0..7),
  // where the d64 softmax takes those rows alone (kSkipRowlessHalves): 8 rows exactly, 2 x 4,
  // 6 of G = 3, 1 x 8 on a partial last block (masked scores in the rows left out), softcap, a
  // window, scores that jump at the early keys (another piece's max); and 12 rows, one past it
  // (tile row 8 holds a query row: the whole softmax).
  c = make("first_rows_g4_q2_k515_softcap_d64_bf16", bf, 64, 2, 2, 515, 8, 2), c.softcap = 20.0f, v.push_back(c);
  c = make("first_rows_g2_q4_k1000_window_d64_fp16", fp, 64, 1, 4, 1000, 4, 2), c.window_left = 300;
  c.window_right = 1, v.push_back(c);
  v.push_back(make("first_rows_g3_q2_k700_d64_fp16", fp, 64, 2, 2, 700, 6, 2));
  c = make("first_rows_g8_q1_k97_causal_d64_fp16", fp, 64, 3, 1, 97, 16, 2), c.causal = true, v.push_back(c);
  c = make("first_rows_g4_q1_k3000_rising_scores_d64_bf16", bf, 64, 1, 1, 3000, 8, 2), c.early_key_boost = 64.0f;
  v.push_back(c);
  c = make("whole_rows_g4_q3_k333_causal_d64_bf16", bf, 64, 2, 3, 333, 8, 2), c.causal = true, v.push_back(c);
  // The boundary itself: 9 rows (tile row 8 holds query row 2 of G = 3). And seqused_q, whose
  // sequences of 2 / 16 / 0 used rows take the first rows alone / the whole softmax / neither.
  v.push_back(make("whole_rows_g3_q3_k400_d64_fp16", fp, 64, 2, 3, 400, 6, 2));
  c = make("first_rows_seqused_q_g4_q16_k300_d64_bf16", bf, 64, 3, 16, 300, 8, 2), c.used_q = {2, 16, 0};
  v.push_back(c);
  // Decode steps of at most 16 packed rows at head dim 64 (the sliced decode kernel's, above):
  // variable lengths with a sequence of no key and one of one key, seqused_k at G = 16 (a sequence
  // of no used key), 16 rows exactly with a window and no L, a 32-key warp slice cut mid-way.
  c = make("sliced_varlen_causal_g8_d64_bf16", bf, 64, 0, 0, 0, 16, 2);
  c.lens_q = {1, 2, 0, 2, 1}, c.lens_k = {700, 1, 0, 129, 0}, c.causal = true, v.push_back(c);
  c = make("sliced_seqused_k_g16_q1_k900_d64_fp16", fp, 64, 3, 1, 900, 32, 2), c.used_k = {900, 33, 0};
  v.push_back(c);
  c = make("sliced_g2_q8_k260_window_no_lse_d64_bf16", bf, 64, 2, 8, 260, 4, 2), c.window_left = 50;
  c.window_right = 0, c.with_lse = false, v.push_back(c);
  c = make("sliced_g4_q4_k4110_softcap_padded_d64_fp16", fp, 64, 2, 4, 4110, 8, 2), c.softcap = 15.0f;
  c.layout = Layout::kPadded, v.push_back(c);
  return v;
}

// The same cases with the key splits left out (FLASHATTN_SM90_KEY_SPLITS=1): the launch's rule
// splits many of them (few tiles, 8 key blocks or more), and the unsplit packed kernel keeps its
// own check. One seed.
TEST_P(Sm90GqaPacking, MatchesReferenceUnsplit) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");
  const ScopedEnv unsplit("FLASHATTN_SM90_KEY_SPLITS", "1");
  const int64_t before = sm90_key_split_launches();
  run_case(c, 7u + 131u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true);
  EXPECT_EQ(sm90_key_split_launches(), before) << "FLASHATTN_SM90_KEY_SPLITS=1 split the keys";
}

// The longest query of a case (varlen: of its sequences) times its group: the packed rows of its
// tiles, which the one-warpgroup and sliced decode kernels hold up to their bounds.
int64_t packed_rows(const Case& c) {
  int64_t longest_q = c.seqlen_q;
  if (c.varlen()) longest_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  return longest_q * (c.heads_q / c.heads_kv);
}

// The head dims with a one-warpgroup packed kernel again on each packed kernel by name
// (FLASHATTN_SM90_PACK_GQA_ONE_WG=1: the one-warpgroup kernel wherever it can run, =0: never), so
// both run every case of at most kSm90PackGqaOneWgMaxRows packed rows, whichever the rule picks.
// One seed each.
TEST_P(Sm90GqaPacking, BothPackedKernelsMatchReference) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  if (!sm90_has_pack_gqa_one_wg(c.headdim)) GTEST_SKIP() << "one packed kernel at head dim " << c.headdim;
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");
  const bool fits_one_wg = packed_rows(c) <= kSm90PackGqaOneWgMaxRows;
  const int64_t one_before = sm90_pack_gqa_one_wg_launches();
  {
    const ScopedEnv one("FLASHATTN_SM90_PACK_GQA_ONE_WG", "1");
    run_case(c, 19u + 131u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true);
  }
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(sm90_pack_gqa_one_wg_launches() - one_before, fits_one_wg ? 1 : 0)
      << "FLASHATTN_SM90_PACK_GQA_ONE_WG=1 with " << packed_rows(c) << " packed rows";
  const ScopedEnv two("FLASHATTN_SM90_PACK_GQA_ONE_WG", "0");
  const int64_t before = sm90_pack_gqa_one_wg_launches();
  run_case(c, 23u + 131u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true);
  EXPECT_EQ(sm90_pack_gqa_one_wg_launches(), before) << "FLASHATTN_SM90_PACK_GQA_ONE_WG=0 ran the one-warpgroup kernel";
}

// The sliced decode kernel (sliced_decode.h; FLASHATTN_SM90_SLICED_DECODE=1 gives it every problem
// it can run) on every case it holds: head dims 64 and 128, at most kSm90SlicedDecodeMaxRows
// packed rows.
// Its own key splits by its rule (two CTAs an SM over few tiles: most of these cases split), the
// combine kernel merging them. One seed; the launch counted, so a case cannot pass on another kernel.
TEST_P(Sm90GqaPacking, SlicedDecodeMatchesReference) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  if (!sm90_has_sliced_decode(c.headdim) || packed_rows(c) > kSm90SlicedDecodeMaxRows) {
    GTEST_SKIP() << "not a sliced decode case (head dim " << c.headdim << ", " << packed_rows(c) << " rows)";
  }
  const ScopedEnv sliced("FLASHATTN_SM90_SLICED_DECODE", "1");
  const int64_t before = sm90_sliced_decode_launches();
  run_case(c, 29u + 131u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(sm90_sliced_decode_launches() - before, 1) << "FLASHATTN_SM90_SLICED_DECODE=1 did not run the sliced kernel";
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90GqaPacking, ::testing::ValuesIn(pack_gqa_cases()), case_name);

// Runs c through the API with FLASHATTN_SM90_SLICED_DECODE at `setting` (nullptr: unset, its rule)
// and expects the sliced kernel to have run once if `picked`, else not at all; then again with
// seed + 1 at =0, where it must not run.
void expect_sliced_pick(const Case& c, uint32_t seed, const char* setting, bool picked) {
  {
    const ScopedEnv sliced(kSlicedSwitch, setting);
    const int64_t before = sm90_sliced_decode_launches();
    run_case(c, seed);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(sm90_sliced_decode_launches() - before, picked ? 1 : 0)
        << "FLASHATTN_SM90_SLICED_DECODE=" << (setting ? setting : "(unset)")
        << (picked ? ": the sliced kernel did not run" : ": the sliced kernel ran");
  }
  const ScopedEnv off(kSlicedSwitch, "0");
  const int64_t before = sm90_sliced_decode_launches();
  run_case(c, seed + 1);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(sm90_sliced_decode_launches(), before) << "=0 ran the sliced kernel";
}

// MHA decode through the API with FLASHATTN_SM90_SLICED_DECODE=1 (sm90_forward): the sliced kernel
// whatever the tile count, where the MHA key-split rule would leave 128+ tiles to the unpacked
// kernel: 256 tiles of one row (the protocol's (8, 32 / 32, 32k) row, shorter), 3 tiles (split),
// 16 query rows causal, 7 with a window. Each case's launch counted; =0 then never runs it.
TEST(Sm90SlicedDecode, MhaThroughTheApi) {
  SKIP_UNLESS_SM90();
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  v.push_back(make("mha_b8_h32_q1_k3000_d64_bf16", bf, 64, 8, 1, 3000, 32, 32));
  v.push_back(make("mha_b1_h3_q1_k5000_d128_fp16", fp, 128, 1, 1, 5000, 3, 3));
  c = make("mha_b2_h5_q16_k700_causal_d64_fp16", fp, 64, 2, 16, 700, 5, 5), c.causal = true, v.push_back(c);
  c = make("mha_b3_h2_q7_k900_window_d128_bf16", bf, 128, 3, 7, 900, 2, 2);
  c.window_left = 100, c.window_right = 3, v.push_back(c);
  uint32_t seed = 42u;
  for (const Case& mha : v) {
    SCOPED_TRACE(mha.name);
    expect_sliced_pick(mha, seed, "1", true);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    seed += 2;
  }
}

// The sliced decode kernel by its rule (FLASHATTN_SM90_SLICED_DECODE unset) through the API: d64
// decode steps of more tiles (sequences x KV heads) than the device has SMs, GQA and MHA; not 16
// tiles, d128, two query rows, nor =0. Each case's launch counted, and checked against the reference.
TEST(Sm90SlicedDecode, ByRuleThroughTheApi) {
  SKIP_UNLESS_SM90();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  struct Expect {
    Case c;
    bool picked;
  };
  const int batch = sms / 8 + 1;  // GQA 32 / 8: 8 tiles a sequence, so batch * 8 > sms
  std::vector<Expect> v;
  Case c = make("rule_gqa_q1_k2500_d64_fp16", fp, 64, batch, 1, 2500, 32, 8);
  v.push_back({c, true});
  c = make("rule_mha_q1_k1500_d64_bf16", bf, 64, sms / 32 + 1, 1, 1500, 32, 32), c.causal = true;
  v.push_back({c, true});
  v.push_back({make("rule_16_tiles_q1_k3000_d64_bf16", bf, 64, 2, 1, 3000, 32, 8), false});
  v.push_back({make("rule_d128_q1_k900_bf16", bf, 128, batch, 1, 900, 32, 8), false});
  v.push_back({make("rule_q2_k700_d64_fp16", fp, 64, batch, 2, 700, 32, 8), false});
  uint32_t seed = 62u;
  for (const Expect& e : v) {
    SCOPED_TRACE(e.c.name + " on " + std::to_string(sms) + " SMs");
    expect_sliced_pick(e.c, seed, nullptr, e.picked);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    seed += 2;
  }
}

// FLASHATTN_SM90_L2_PROMOTION (tensor_map.cu) changes how much the L2 fetches on a TMA miss and
// nothing else: under each setting a packed decode case (split keys) and an unpacked one still
// match the reference (outputs poisoned, fresh inputs).
TEST(Sm90L2Promotion, EverySettingMatchesReference) {
  SKIP_UNLESS_SM90();
  const Case packed = make("l2_packed_g4_q1_k3000_d128_bf16", DType::kBFloat16, 128, 1, 1, 3000, 8, 2);
  Case unpacked = make("l2_causal_q300_k500_d128_fp16", DType::kFloat16, 128, 2, 300, 500, 4, 2);
  unpacked.causal = true;
  for (const char* setting : {"none", "64", "128", "256"}) {
    SCOPED_TRACE(std::string("FLASHATTN_SM90_L2_PROMOTION=") + setting);
    const ScopedEnv promotion("FLASHATTN_SM90_L2_PROMOTION", setting);
    run_case(packed, 17u, /*direct=*/true, /*pack_gqa=*/true);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    run_case(unpacked, 19u);
  }
}

// ---- Key splits of the packed kernel (cuda/sm90/split_keys.h) ----
// Each packed tile's key blocks cut into pieces run as work of their own, merged by the last to
// arrive. A case named ks<N>_... forces N pieces (FLASHATTN_SM90_KEY_SPLITS), one named rule_...
// leaves the choice to the launch's rule (kernel_choice.h, sm90_key_splits); either way the test
// checks that the launch split. Pieces past a tile's key blocks (more pieces than blocks), tiles
// of other lengths in one launch (varlen, seqused), a tile without a key, windows that start
// past the first block, scores that jump up in one piece only (the merge's weights far apart),
// every head dim (192 / 256 store O through Q: a piece that does not store releases Q itself),
// walks of several work indices a CTA. Each case runs twice, the second three more times, bit for
// bit (the counters must be clean after a launch; the merge's order must not follow the timing).
class Sm90KeySplits : public ::testing::TestWithParam<Case> {};

// Runs a key-split case (FLASHATTN_SM90_SPLIT_COMBINE set to `combine`: merge or kernel) and
// checks that every launch counted by `launches` (a launch counter of kernel_choice.h) happened.
void run_key_split_case(const Case& c, const char* combine, int64_t (*launches)(), const char* missing) {
  const bool forced_splits = c.name.rfind("ks", 0) == 0;
  const std::string splits = forced_splits ? std::to_string(std::atoi(c.name.c_str() + 2)) : "";
  const ScopedEnv forced("FLASHATTN_SM90_KEY_SPLITS", forced_splits ? splits.c_str() : nullptr);
  const ScopedEnv combined("FLASHATTN_SM90_SPLIT_COMBINE", combine);
  for (uint32_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int repeats = seed == 2u ? 3 : 0;
    const int64_t before = launches();
    run_case(c, seed + 71u * uint32_t(c.name.size()), /*direct=*/true, /*pack_gqa=*/true, repeats);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(launches() - before, 1 + repeats) << missing;
  }
}

TEST_P(Sm90KeySplits, MatchesReference) {
  SKIP_UNLESS_SM90();
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");
  run_key_split_case(GetParam(), "merge", sm90_key_split_launches, "the packed launch did not split its keys");
}

// The same cases with the pieces merged by the combine kernel (split_combine.h,
// FLASHATTN_SM90_SPLIT_COMBINE=kernel): every piece writes its slot, a second launch merges and
// stores the tiles (its groups of 4-32 lanes a float4: pieces 3..128 here), again twice, the
// second three more times, bit for bit (no counter is used, the shuffle tree's order is fixed).
TEST_P(Sm90KeySplits, MatchesReferenceCombinedAfter) {
  SKIP_UNLESS_SM90();
  if (!kSm90CombineKernelBuilt) GTEST_SKIP() << "built without FLASHATTN_SM90_COMBINE_KERNEL";
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");
  run_key_split_case(GetParam(), "kernel", sm90_split_combine_launches, "the pieces were not combined by the kernel");
}

std::vector<Case> key_split_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  v.push_back(make("ks4_g4_q1_k3000_d128_bf16", bf, 128, 1, 1, 3000, 8, 2));
  c = make("ks7_g8_q16_k1000_causal_d64_fp16", fp, 64, 1, 16, 1000, 8, 1), c.causal = true, v.push_back(c);
  // 3 key blocks, 32 pieces asked: 3 pieces, the other 29 work indices of each tile idle.
  v.push_back(make("ks32_more_pieces_than_blocks_g4_q2_k300_d128_bf16", bf, 128, 2, 2, 300, 8, 2));
  // Tiles of 12, 1, 0 and 6 key blocks in one launch: 8 pieces, 1, one empty tile stored as such, 6.
  c = make("ks8_varlen_causal_g4_d128_fp16", fp, 128, 0, 0, 0, 8, 2);
  c.lens_q = {1, 3, 2, 16}, c.lens_k = {1500, 1, 0, 700}, c.causal = true, v.push_back(c);
  c = make("ks5_window_g4_q8_k2000_d128_bf16", bf, 128, 1, 8, 2000, 4, 1), c.window_left = 700, c.window_right = 0;
  v.push_back(c);
  c = make("ks6_softcap_seqused_k_g2_q4_k1800_d256_fp16", fp, 256, 2, 4, 1800, 4, 2), c.softcap = 20.0f;
  c.used_k = {1800, 90}, v.push_back(c);
  c = make("ks9_g6_q3_k1200_no_lse_d192_bf16", bf, 192, 1, 3, 1200, 12, 2), c.with_lse = false, v.push_back(c);
  c = make("ks10_g7_q1_k2500_causal_d96_fp16", fp, 96, 2, 1, 2500, 14, 2), c.causal = true, v.push_back(c);
  // A band of keys scored far above the rest, inside the second of four pieces only.
  c = make("ks4_band_in_one_piece_g4_q5_k2048_d128_bf16", bf, 128, 1, 5, 2048, 8, 2), c.early_key_boost = 64.0f;
  c.boost_from = 600, c.boost_to = 700, v.push_back(c);
  c = make("ks3_head_major_g2_q6_k900_d256_bf16", bf, 256, 1, 6, 900, 4, 2), c.layout = Layout::kHeadMajor;
  v.push_back(c);
  // 160 tiles, 3 pieces each: every CTA walks several work indices, so a piece that merges and
  // one that passes over its store are followed by another piece's Q load (d192 / d256 release
  // Q after the epilogue or in its place; d64 / d128 at the last key block).
  c = make("ks3_persistent_g8_q1_k700_d64_fp16", fp, 64, 40, 1, 700, 32, 4), c.layout = Layout::kPadded, v.push_back(c);
  c = make("ks3_persistent_g4_q2_k900_d128_bf16", bf, 128, 40, 2, 900, 16, 4), c.causal = true, v.push_back(c);
  v.push_back(make("ks3_persistent_g4_q1_k700_d256_bf16", bf, 256, 40, 1, 700, 16, 4));
  c = make("ks5_persistent_g2_q3_k600_d192_fp16", fp, 192, 40, 3, 600, 8, 4), c.softcap = 20.0f, v.push_back(c);
  // Past kSm90MergeGroupPieces pieces the merge goes in two levels (groups of 8, then the groups):
  // 20 pieces (groups of 8, 8, 4) beside tiles of 4 and 11 pieces (one level / two) and an empty
  // one in a launch; 64 pieces of an MQA tile (8 groups); 128 (16 groups, more than one batch of
  // the groups' L); 17 at head dim 192 (a last group of one piece); 17 at head dim 256, whose
  // kernels merge in one level (the counters' stride is still the launch's).
  c = make("ks20_varlen_causal_g4_d128_bf16", bf, 128, 0, 0, 0, 8, 2);
  c.lens_q = {1, 2, 1, 3}, c.lens_k = {3000, 500, 0, 1300}, c.causal = true, v.push_back(c);
  v.push_back(make("ks64_mqa_q1_k9000_d128_fp16", fp, 128, 1, 1, 9000, 8, 1));
  c = make("ks128_mqa_q1_k20000_d64_bf16", bf, 64, 1, 1, 20000, 8, 1), c.early_key_boost = 64.0f;
  c.boost_from = 11000, c.boost_to = 11100, v.push_back(c);
  c = make("ks17_g4_q2_k2600_d192_bf16", bf, 192, 2, 2, 2600, 8, 2), c.softcap = 20.0f, v.push_back(c);
  // 9 pieces at d128 (a last group of one, where the merge loads two pieces at a time); a tile of
  // exactly 8 pieces (one level) beside one of 12 (two) in a launch of 12.
  v.push_back(make("ks9_g4_q1_k1200_d128_fp16", fp, 128, 1, 1, 1200, 8, 2));
  c = make("ks12_varlen_g8_d64_bf16", bf, 64, 0, 0, 0, 16, 2);
  c.lens_q = {1, 1}, c.lens_k = {1024, 1500}, v.push_back(c);
  c = make("ks17_g2_q1_k2600_d256_fp16", fp, 256, 2, 1, 2600, 4, 2), c.causal = true, v.push_back(c);
  // Where all of a warpgroup's rows are warp 0's (up to 16), the four warps merge them together
  // (merge_pieces_for_warp0; the cases above at G q <= 16 and head dims up to 128); 24 rows
  // (warps 0 and 1) merge as before, here in two levels; an MQA tile at head dim 96 in two levels.
  v.push_back(make("ks11_g4_q6_k1800_d128_bf16", bf, 128, 1, 6, 1800, 8, 2));
  v.push_back(make("ks16_mqa_g8_q2_k5000_d96_fp16", fp, 96, 1, 2, 5000, 8, 1));
  // The rule: one tile (MQA decode) of 128 key blocks, cut into 32 pieces (its key blocks over
  // kSm90KeySplitMinBlocks), which merge in two levels.
  v.push_back(make("rule_mqa_q1_k16384_d128_bf16", bf, 128, 1, 1, 16384, 8, 1));
  c = make("rule_g4_q1_k8192_d256_fp16", fp, 256, 2, 1, 8192, 8, 2), c.causal = true, v.push_back(c);
  // The caller's num_splits (5) where the rule would not split (80 tiles).
  c = make("param5_g4_b40_q1_k2000_d128_bf16", bf, 128, 40, 1, 2000, 8, 2), c.num_splits = 5, v.push_back(c);
  return v;
}

// num_splits through the public API, which packs these decode steps itself: 5 splits where the
// rule would not (80 tiles), 1 leaves unsplit what the rule splits (2 tiles of 24 key blocks),
// and 0 there is the rule's split (so the API did pack it).
TEST(Sm90KeySplitParam, ThroughTheApi) {
  SKIP_UNLESS_SM90();
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");  // api_mha_param6_b40's 160 tiles
  const DType bf = DType::kBFloat16;
  struct Expect {
    Case c;
    int split_launches;
  };
  Case many = make("api_param5_g4_b40_q1_k2000_d128_bf16", bf, 128, 40, 1, 2000, 8, 2);
  many.num_splits = 5;
  Case few = make("api_param1_g4_q1_k3000_d128_bf16", bf, 128, 1, 1, 3000, 8, 2);
  few.num_splits = 1;
  Case rule = few;
  rule.name = "api_rule_g4_q1_k3000_d128_bf16", rule.num_splits = 0;
  // MHA decode through the packed kernel at G = 1 (sm90_picks_mha_key_splits): the rule's split
  // (16 tiles of 47 key blocks), the caller's where the rule would not split (160 tiles), none at
  // num_splits 1, and variable lengths with a causal diagonal and a sequence of one key.
  const DType fp = DType::kFloat16;
  Case mha_rule = make("api_mha_rule_q1_k6000_d128_bf16", bf, 128, 2, 1, 6000, 8, 8);
  Case mha_many = make("api_mha_param6_b40_q1_k2000_d64_fp16", fp, 64, 40, 1, 2000, 4, 4);
  mha_many.num_splits = 6;
  Case mha_none = mha_rule;
  mha_none.name = "api_mha_param1_q1_k6000_d128_bf16", mha_none.num_splits = 1;
  Case mha_varlen = make("api_mha_varlen_causal_d256_bf16", bf, 256, 0, 0, 0, 4, 4);
  mha_varlen.lens_q = {1, 2, 1}, mha_varlen.lens_k = {3000, 60, 1}, mha_varlen.causal = true;
  for (const Expect& e : {Expect{many, 1}, Expect{few, 0}, Expect{rule, 1}, Expect{mha_rule, 1}, Expect{mha_many, 1},
                          Expect{mha_none, 0}, Expect{mha_varlen, 1}}) {
    SCOPED_TRACE(e.c.name);
    const int64_t before = sm90_key_split_launches();
    run_case(e.c, 11u, /*direct=*/false);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(sm90_key_split_launches() - before, e.split_launches);
  }
}

// Head dim 256 with no setting: 16 packed tiles of 47 key blocks fill a wave of pieces on any
// Hopper of 78-132 SMs (4-8 pieces), which the combine kernel merges (kernel_choice.h, session 86).
TEST(Sm90KeySplitParam, HeadDim256RuleFillsTheWave) {
  SKIP_UNLESS_SM90();
  const ScopedEnv unforced("FLASHATTN_SM90_KEY_SPLITS", nullptr);
  const ScopedEnv by_default("FLASHATTN_SM90_SPLIT_COMBINE", nullptr);
  const Case c = make("api_rule_g4_b2_q1_k3000_d256_bf16", DType::kBFloat16, 256, 2, 1, 3000, 32, 8);
  const int64_t split_before = sm90_key_split_launches(), combined_before = sm90_split_combine_launches();
  run_case(c, 13u, /*direct=*/false);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(sm90_key_split_launches() - split_before, 1);
  EXPECT_EQ(sm90_split_combine_launches() - combined_before, kSm90CombineKernelBuilt ? 1 : 0);
}

// Head dim 256 with no setting: 40 packed tiles of 47 key blocks make 2 pieces a tile where the
// device has 81 SMs or more (a wave of 2-3 pieces: 2, session 88), merged in the packed kernel;
// on fewer, no split.
TEST(Sm90KeySplitParam, HeadDim256TwoPiecesMergeInTheKernel) {
  SKIP_UNLESS_SM90();
  const ScopedEnv unforced("FLASHATTN_SM90_KEY_SPLITS", nullptr);
  const ScopedEnv by_default("FLASHATTN_SM90_SPLIT_COMBINE", nullptr);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const Case c = make("api_rule_g4_b5_q1_k3000_d256_bf16", DType::kBFloat16, 256, 5, 1, 3000, 32, 8);
  const int64_t split_before = sm90_key_split_launches(), combined_before = sm90_split_combine_launches();
  run_case(c, 17u, /*direct=*/false);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  const bool splits = kSm90CombineKernelBuilt && sms > 80;
  EXPECT_EQ(sm90_key_splits(40, sms, 47, 256), splits ? 2 : 1);
  EXPECT_EQ(sm90_key_split_launches() - split_before, splits ? 1 : 0);
  EXPECT_EQ(sm90_split_combine_launches() - combined_before, 0);
}

// The key-split cases the sliced decode kernel holds, on it: its pieces (the forced counts, or its
// own rule for rule_ cases) merged by the combine kernel, twice, the second three more times, bit
// for bit, as above.
TEST_P(Sm90KeySplits, SlicedDecodeMatchesReference) {
  SKIP_UNLESS_SM90();
  const Case& c = GetParam();
  if (!kSm90CombineKernelBuilt) GTEST_SKIP() << "built without FLASHATTN_SM90_COMBINE_KERNEL";
  if (!sm90_has_sliced_decode(c.headdim) || packed_rows(c) > kSm90SlicedDecodeMaxRows) {
    GTEST_SKIP() << "not a sliced decode case (head dim " << c.headdim << ", " << packed_rows(c) << " rows)";
  }
  const ScopedEnv sliced("FLASHATTN_SM90_SLICED_DECODE", "1");
  const int64_t before = sm90_sliced_decode_launches();
  run_key_split_case(c, "kernel", sm90_split_combine_launches, "the sliced kernel's pieces were not combined");
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(sm90_sliced_decode_launches() - before, 5) << "FLASHATTN_SM90_SLICED_DECODE=1 did not run the sliced kernel";
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90KeySplits, ::testing::ValuesIn(key_split_cases()), case_name);

// Which MHA problems go to the packed kernel for its key splits (kernel_choice.h), host-side.
TEST(Sm90KeySplitRule, MhaDecode) {
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 128, p.batch = 1, p.nheads_q = p.nheads_kv = 32;
  p.seqlen_q = 1, p.seqlen_k = 32768;
  const int sms = 132;
  EXPECT_TRUE(sm90_picks_mha_key_splits(p, sms)) << "32 tiles on 132 SMs, 256 key blocks";
  p.batch = 4;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "128 tiles: at least half the SMs";
  p.num_splits = 3;
  EXPECT_TRUE(sm90_picks_mha_key_splits(p, sms)) << "the caller's count where the rule would not split";
  p.seqlen_k = kSm90MhaSplitBlockKeys;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "the caller's count, but one key block to cut";
  p.seqlen_k = 32768, p.batch = 1, p.num_splits = 1;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "num_splits 1";
  p.num_splits = 0, p.seqlen_q = kSm90PackGqaMaxQuery + 1;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "seqlen_q past the packed kernel's bound";
  p.seqlen_q = 1, p.seqlen_k = 7 * kSm90MhaSplitBlockKeys;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "7 key blocks: fewer than two pieces of 4";
  p.seqlen_k = 8 * kSm90MhaSplitBlockKeys;
  EXPECT_TRUE(sm90_picks_mha_key_splits(p, sms)) << "8 key blocks: two pieces";
  p.mask.window_left = 100, p.mask.window_right = 0;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "a window of 100 keys: 2 visible blocks";
  p.mask.window_left = p.mask.window_right = -1, p.nheads_kv = 8;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "GQA: the packing rule's (sm90_picks_pack_gqa)";
  p.nheads_kv = 32;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, 0)) << "SM count unknown: no split";
  p.batch = 2, p.seqlen_k = 8192;
  EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "64 tiles at d128: 2 pieces pass 3/4 of the SMs";
  p.headdim = 64;
  EXPECT_TRUE(sm90_picks_mha_key_splits(p, sms)) << "64 tiles at d64: a wave of 2 pieces (session 89)";
  // d64 MHA decode on the one-warpgroup packed kernel, two CTAs an SM: 264 slots.
  p.batch = 3;
  {
    const ScopedEnv one("FLASHATTN_SM90_PACK_GQA_ONE_WG", "1");
    EXPECT_TRUE(sm90_picks_mha_key_splits(p, sms)) << "96 tiles at d64: 2 pieces in 264 slots";
    p.nheads_q = p.nheads_kv = 44;
    EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "132 tiles at d64: no wave of 2 pieces in 264 slots";
    p.nheads_q = p.nheads_kv = 32;
  }
  {
    const ScopedEnv two("FLASHATTN_SM90_PACK_GQA_ONE_WG", "0");
    EXPECT_FALSE(sm90_picks_mha_key_splits(p, sms)) << "96 tiles at d64 on the two-warpgroup kernel: no wave of 2";
  }
  p.batch = 2, p.headdim = 256;
  EXPECT_EQ(sm90_picks_mha_key_splits(p, sms), kSm90CombineKernelBuilt) << "64 tiles at d256: a wave of 2 pieces";
}

// The environment switches' reading (env_switch.h): unset or empty the default (on, or the rule),
// "0" off, anything else on.
TEST(EnvSwitch, UnsetEmptyZeroAndOther) {
  const char* name = "FLASHATTN_TEST_ENV_SWITCH";
  const std::tuple<const char*, EnvSetting, bool> rows[] = {
      {nullptr, EnvSetting::kByRule, true}, {"", EnvSetting::kByRule, true}, {"0", EnvSetting::kOff, false},
      {"1", EnvSetting::kOn, true},         {"00", EnvSetting::kOn, true},   {"no", EnvSetting::kOn, true}};
  for (const auto& [value, setting, on_by_default] : rows) {
    const ScopedEnv env(name, value);
    const std::string shown = value == nullptr ? "unset" : '"' + std::string(value) + '"';
    EXPECT_EQ(env_setting(name), setting) << shown;
    EXPECT_EQ(env_switch_on(name), on_by_default) << shown;
  }
}

// ScopedEnv puts back what was there: a whole run's setting (device_session.sh runs suites with
// FLASHATTN_SM90_PACK_GQA_ONE_WG=1) outlives the tests that scope the variable.
TEST(ScopedEnvHelper, RestoresTheOuterSetting) {
  const char* name = "FLASHATTN_TEST_SCOPED_ENV";
  {
    const ScopedEnv outer(name, "outer");
    {
      const ScopedEnv unset(name, nullptr);
      EXPECT_EQ(std::getenv(name), nullptr);
      const ScopedEnv inner(name, "inner");
      EXPECT_STREQ(std::getenv(name), "inner");
    }
    ASSERT_NE(std::getenv(name), nullptr);
    EXPECT_STREQ(std::getenv(name), "outer");
  }
  EXPECT_EQ(std::getenv(name), nullptr);
}

// Which packed problems the one-warpgroup kernel takes (kernel_choice.h), host-side.
TEST(Sm90PackGqaOneWgRule, AsDocumented) {
  const int tiles = int(kSm90PackGqaOneWgMaxTiles), bound = int(kSm90PackGqaOneWgMaxRows);
  AttentionProblem p;
  p.dtype = DType::kFloat16, p.headdim = 64, p.nheads_q = 32, p.nheads_kv = 8, p.seqlen_q = 1, p.seqlen_k = 32768;
  {
    const ScopedEnv rule("FLASHATTN_SM90_PACK_GQA_ONE_WG", nullptr);
    p.batch = tiles / 8;
    EXPECT_TRUE(sm90_picks_pack_gqa_one_wg(p)) << "GQA decode, 16 tiles: the rule's bound";
    p.batch = 1;
    EXPECT_TRUE(sm90_picks_pack_gqa_one_wg(p)) << "GQA decode, 8 tiles";
    p.nheads_q = 36, p.nheads_kv = tiles + 2;  // G = 2, one sequence
    EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "18 tiles: past the rule's bound";
    p.nheads_q = 32, p.nheads_kv = 8, p.batch = tiles / 8 + 1;
    EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "24 tiles";
    p.batch = 1, p.nheads_q = p.nheads_kv = 4;
    EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "MHA decode (the key splits' packed problems): not by the rule";
    p.nheads_q = 32, p.nheads_kv = 8, p.seqlen_q = bound / 4 + 1;
    EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "17 x 4 rows, 8 tiles: past the row bound";
    p.seqlen_q = 1, p.headdim = 128;
    EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "head dim 128: not built";
    p.headdim = 64;
  }
  const ScopedEnv one("FLASHATTN_SM90_PACK_GQA_ONE_WG", "1");
  p.batch = 2, p.seqlen_q = bound / 4, p.seqlen_k = 4096;
  EXPECT_TRUE(sm90_picks_pack_gqa_one_wg(p)) << "16 x 4 rows: the bound";
  p.seqlen_q += 1;
  EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "17 x 4 rows: past it";
  p.seqlen_q = 1, p.batch = 40;
  EXPECT_TRUE(sm90_picks_pack_gqa_one_wg(p)) << "=1: 320 tiles too";
  p.batch = 2, p.nheads_q = 64, p.nheads_kv = 1;
  EXPECT_TRUE(sm90_picks_pack_gqa_one_wg(p)) << "G = 64, one query row";
  p.nheads_q = p.nheads_kv = 8, p.seqlen_q = bound;
  EXPECT_TRUE(sm90_picks_pack_gqa_one_wg(p)) << "=1: MHA, 64 query rows";
  p.seqlen_q += 1;
  EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "MHA, 65 query rows";
  p.seqlen_q = 1, p.headdim = 128;
  EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "head dim 128: not built";
  p.headdim = 64, p.nheads_q = 32, p.nheads_kv = 8, p.batch = 1;
  const ScopedEnv two("FLASHATTN_SM90_PACK_GQA_ONE_WG", "0");
  EXPECT_FALSE(sm90_picks_pack_gqa_one_wg(p)) << "FLASHATTN_SM90_PACK_GQA_ONE_WG=0, 8 GQA tiles";
}

// The sliced decode kernel's switch, rule and key pieces (kernel_choice.h), host-side: unset, the
// rule (d64 decode steps of more tiles than SMs); 0, never; other values, head dims 64 and 128 at
// most 16 packed rows; pieces for the CTA slots over the tiles, two key blocks a piece at least.
TEST(Sm90SlicedDecodeRule, AsDocumented) {
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 64, p.batch = 2, p.nheads_q = 32, p.nheads_kv = 8, p.seqlen_q = 1;
  p.seqlen_k = 32768;
  {
    const ScopedEnv unset("FLASHATTN_SM90_SLICED_DECODE", nullptr);
    EXPECT_FALSE(sm90_picks_sliced_decode(p)) << "unset: 16 tiles, fewer than any H100 / H200 has SMs";
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 132)) << "16 tiles on 132 SMs";
    p.batch = 17;  // 136 tiles
    EXPECT_TRUE(sm90_sliced_decode_by_rule(p, 132)) << "136 tiles on 132 SMs";
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 136)) << "136 tiles on 136 SMs";
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 0)) << "an SM count that could not be read";
    p.nheads_q = p.nheads_kv = 8;
    EXPECT_TRUE(sm90_sliced_decode_by_rule(p, 132)) << "MHA, 136 tiles";
    p.nheads_q = 32, p.headdim = 128;
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 132)) << "d128: level with the packed kernels";
    p.headdim = 64, p.seqlen_q = 2;
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 132)) << "two query rows: not a decode step";
    p.seqlen_q = 1;
    int table = 0;
    p.block_table = &table;
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 132)) << "paged: not timed";
    p.block_table = nullptr, p.cu_seqlens_q = &table;
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 132)) << "varlen";
    p.cu_seqlens_q = nullptr, p.seqused_q = &table;
    EXPECT_FALSE(sm90_sliced_decode_by_rule(p, 132)) << "seqused_q";
    p.seqused_q = nullptr, p.batch = 2;
    const ScopedEnv off("FLASHATTN_SM90_SLICED_DECODE", "0");
    EXPECT_FALSE(sm90_picks_sliced_decode(p)) << "=0";
    p.batch = 4096;
    EXPECT_FALSE(sm90_picks_sliced_decode(p)) << "=0, 32768 tiles";
    p.batch = 2;
  }
  const ScopedEnv on("FLASHATTN_SM90_SLICED_DECODE", "1");
  EXPECT_TRUE(sm90_picks_sliced_decode(p)) << "GQA 32 / 8 decode at d64";
  p.seqlen_q = int(kSm90SlicedDecodeMaxRows) / 4;
  EXPECT_TRUE(sm90_picks_sliced_decode(p)) << "4 x 4 rows: the bound";
  p.seqlen_q += 1;
  EXPECT_FALSE(sm90_picks_sliced_decode(p)) << "5 x 4 rows";
  p.seqlen_q = 1, p.headdim = 128;
  EXPECT_TRUE(sm90_picks_sliced_decode(p)) << "d128";
  p.headdim = 96;
  EXPECT_FALSE(sm90_picks_sliced_decode(p)) << "d96: not built";
  p.headdim = 64, p.nheads_q = p.nheads_kv = 8;
  EXPECT_TRUE(sm90_picks_sliced_decode(p)) << "MHA decode: one row a tile";
  p.nheads_q = 32, p.nheads_kv = 1;
  EXPECT_FALSE(sm90_picks_sliced_decode(p)) << "MQA, G = 32: past 16 rows";

  EXPECT_EQ(sm90_sliced_decode_splits(16, 264, 256), 16);  // (2, 32 / 8, 32k) at d64: 256 CTAs
  EXPECT_EQ(sm90_sliced_decode_splits(8, 264, 1024), 33);  // (1, 32 / 8, 128k)
  EXPECT_EQ(sm90_sliced_decode_splits(128, 264, 64), 2);   // (16, 32 / 8, 8k)
  EXPECT_EQ(sm90_sliced_decode_splits(133, 264, 64), 1);   // the slots hold fewer than two pieces a tile
  EXPECT_EQ(sm90_sliced_decode_splits(1, 132, 9), 4);      // bounded by the key blocks (two a piece)
  EXPECT_EQ(sm90_sliced_decode_splits(1, 132, 3), 1);
  EXPECT_EQ(sm90_sliced_decode_splits(0, 132, 1024), 1);
}

// The rule's arithmetic (kernel_choice.h), host-side.
TEST(Sm90KeySplitRule, AsDocumented) {
  EXPECT_EQ(sm90_key_splits(8, 132, 1024), 8);  // (1, 32 / 8, 128k): 8 tiles, 64 CTAs
  EXPECT_EQ(sm90_key_splits(1, 132, 1024), kSm90KeySplitsMax);  // MQA decode: one tile
  EXPECT_EQ(sm90_key_splits(1, 132, 1024, 256), kSm90KeySplitsMaxOneLevel);  // one level at d256
  EXPECT_EQ(sm90_key_splits(1, 132, 1024, 192), kSm90KeySplitsMax);
  EXPECT_EQ(sm90_key_splits(2, 132, 1024), 33);
  EXPECT_EQ(sm90_key_splits(33, 132, 64), 2);
  EXPECT_EQ(sm90_key_splits(34, 132, 64), 2);  // half a wave of tiles already, 3/4 of one in 2 pieces
  EXPECT_EQ(sm90_key_splits(49, 132, 64), 2);
  EXPECT_EQ(sm90_key_splits(50, 132, 64), 1);  // 2 pieces pass 3/4 of the SMs (d128)
  EXPECT_EQ(sm90_key_splits(65, 132, 64, 64), 2);  // d64: the wave less an SM
  EXPECT_EQ(sm90_key_splits(66, 132, 64, 64), 1);  // no wave of 2 pieces
  EXPECT_EQ(sm90_key_splits(128, 132, 64), 1);  // (16, 32 / 8, 8k)
  EXPECT_EQ(sm90_key_splits(512, 132, 32), 1);
  EXPECT_EQ(sm90_key_splits(1, 132, 8), 2);  // bounded by the key blocks
  EXPECT_EQ(sm90_key_splits(1, 132, 7), 1);
  EXPECT_EQ(sm90_key_splits(0, 132, 1024), 1);
  EXPECT_EQ(sm90_key_splits(30, 132, 1000), 2);  // half a wave 2, 3/4 of one 3
  EXPECT_EQ(sm90_key_splits(30, 132, 1000, 64), 4);  // d64: a wave of 4
  // Below d256 the reach's power of two up to 8 where that passes the half wave (session 89).
  EXPECT_EQ(sm90_key_splits(8, 132, 256, 64), 8);    // (1, 32 / 8, 32k): the half wave's 8, not 16
  EXPECT_EQ(sm90_key_splits(16, 132, 256, 64), 8);   // (2, 32 / 8, 32k): a wave of 8, half of 4
  EXPECT_EQ(sm90_key_splits(24, 132, 64, 64), 4);    // (3, 32 / 8, 8k)
  EXPECT_EQ(sm90_key_splits(40, 132, 64, 128), 2);   // (5, 32 / 8, 8k)
  EXPECT_EQ(sm90_key_splits(9, 132, 1024, 128), 8);  // 3/4 of a wave 11, half of one 7
  EXPECT_EQ(sm90_key_splits(17, 132, 1024, 192), 4);
  EXPECT_EQ(sm90_key_splits(5, 132, 1024, 64), 13);  // the half wave's 13 passes 8
  EXPECT_EQ(sm90_key_splits(9, 132, 20, 128), 5);    // the key blocks bound both (5 pieces' worth)
  // Head dim 256: the largest power of two of pieces within a wave, from 2 (session 88).
  const bool built = kSm90CombineKernelBuilt;
  EXPECT_EQ(sm90_key_splits(8, 132, 512, 256), built ? 16 : 8);   // (1, 32 / 8, 32k)
  EXPECT_EQ(sm90_key_splits(8, 132, 512, 128), 8);
  EXPECT_EQ(sm90_key_splits(5, 132, 1024, 256), built ? 16 : 13);  // the one-level cap
  EXPECT_EQ(sm90_key_splits(14, 132, 1024, 256), built ? 8 : 4);   // a wave of 9
  EXPECT_EQ(sm90_key_splits(11, 132, 1024, 256), built ? 8 : 6);   // a wave of 11
  EXPECT_EQ(sm90_key_splits(12, 132, 1024, 256), built ? 8 : 5);
  EXPECT_EQ(sm90_key_splits(15, 132, 1024, 256), built ? 8 : 4);
  EXPECT_EQ(sm90_key_splits(16, 132, 256, 256), built ? 8 : 4);  // (2, 32 / 8, 16k)
  EXPECT_EQ(sm90_key_splits(17, 132, 1024, 256), built ? 4 : 3);  // a wave of 7
  EXPECT_EQ(sm90_key_splits(24, 132, 128, 256), built ? 4 : 2);   // (3, 32 / 8, 8k): a wave of 5
  EXPECT_EQ(sm90_key_splits(32, 132, 128, 256), built ? 4 : 2);   // (4, 32 / 8, 8k)
  EXPECT_EQ(sm90_key_splits(33, 132, 1024, 256), 2);   // a wave of 3 pieces
  EXPECT_EQ(sm90_key_splits(40, 132, 128, 256), built ? 2 : 1);   // (5, 32 / 8, 8k)
  EXPECT_EQ(sm90_key_splits(32, 132, 128, 128), 2);
  EXPECT_EQ(sm90_key_splits(64, 132, 64, 256), built ? 2 : 1);    // a wave of 2: 128 CTAs
  EXPECT_EQ(sm90_key_splits(66, 132, 64, 256), 1);                // no wave of 2 pieces
  EXPECT_EQ(sm90_key_splits(40, 132, 4, 256), 1);                 // one piece's worth of key blocks
  EXPECT_EQ(sm90_key_splits(8, 132, 20, 256), built ? 4 : 5);     // the key blocks bound both
  EXPECT_EQ(sm90_key_splits(14, 132, 32, 256), built ? 8 : 4);    // the key blocks bound the wave
  EXPECT_EQ(sm90_key_splits(8, 132, 12, 256), built ? 2 : 3);     // 3 pieces' worth of key blocks
  EXPECT_EQ(sm90_key_splits(9, 132, 40, 256), built ? 8 : 7);
  // At d256, with the combine kernel built, the largest power of two of pieces at most a wave
  // (less an SM), after the cap and the key blocks' bound, wherever that is 2 or more; from 4
  // they go to the combine kernel. Half a wave without the combine kernel.
  for (int sms : {78, 114, 132}) {
    for (int tiles = 1; tiles < sms; ++tiles) {
      for (int key_blocks : {8, 12, 16, 20, 32, 36, 40, 64, 4096}) {
        const int most_for_keys = key_blocks / kSm90KeySplitMinBlocks;
        const int half_wave = std::min({sms / 2 / tiles, kSm90KeySplitsMaxOneLevel, most_for_keys});
        const int wave = std::min({(sms - 1) / tiles, kSm90KeySplitsMaxOneLevel, most_for_keys});
        const int pieces = sm90_key_splits(tiles, sms, key_blocks, 256);
        const std::string where = std::to_string(sms) + " SMs, " + std::to_string(tiles) + " tiles, " +
                                  std::to_string(key_blocks) + " key blocks";
        if (built && wave >= 2) {
          EXPECT_LE(pieces, wave) << where;
          EXPECT_GT(2 * pieces, wave) << where;
          EXPECT_EQ(pieces & (pieces - 1), 0) << where << ": " << pieces << " pieces";
          EXPECT_LT(tiles * pieces, sms) << where;
          EXPECT_EQ(sm90_combines_pieces_after(pieces, tiles * pieces, sms, 256, nullptr), pieces >= 4) << where;
        } else if (built) {
          EXPECT_EQ(pieces, 1) << where;
        } else {
          EXPECT_EQ(pieces, half_wave < 2 ? 1 : half_wave) << where;
        }
      }
    }
  }
  // Below d256, built or not: the half wave's count, or where more, the largest power of two up to
  // 8 within the reach (d64 the wave less an SM, from d96 3/4 of the SMs; the key blocks' bound
  // may leave the half wave's 3, 5, 6 or 7); those merge in the packed kernel, and never pass the
  // wave.
  for (int head_dim : {64, 128, 192}) {
    for (int sms : {78, 114, 132}) {
      for (int tiles = 1; tiles < sms; ++tiles) {
        for (int key_blocks : {8, 12, 16, 20, 32, 36, 40, 64, 4096}) {
          const int most_for_keys = key_blocks / kSm90KeySplitMinBlocks;
          const int half_wave = std::min({sms / 2 / tiles, kSm90KeySplitsMax, most_for_keys});
          const int reach_ctas = head_dim == 64 ? sms - 1 : 3 * sms / 4;
          const int reach = std::min({reach_ctas / tiles, kSm90KeySplitsMax, most_for_keys});
          const int pieces = sm90_key_splits(tiles, sms, key_blocks, head_dim);
          const std::string where = "d" + std::to_string(head_dim) + ", " + std::to_string(sms) + " SMs, " +
                                    std::to_string(tiles) + " tiles, " + std::to_string(key_blocks) + " key blocks";
          if (half_wave >= kSm90MergeGroupPieces) {
            EXPECT_EQ(pieces, half_wave) << where;
          } else if (reach >= 2) {
            EXPECT_TRUE(pieces == half_wave || (pieces & (pieces - 1)) == 0) << where << ": " << pieces << " pieces";
            EXPECT_LE(pieces, reach) << where;
            EXPECT_GE(pieces, half_wave) << where;
            EXPECT_GT(2 * pieces, std::min(reach, kSm90MergeGroupPieces)) << where << ": " << pieces << " pieces";
            EXPECT_LT(tiles * pieces, sms) << where;
            EXPECT_FALSE(sm90_combines_pieces_after(pieces, tiles * pieces, sms, head_dim, nullptr)) << where;
          } else {
            EXPECT_EQ(pieces, 1) << where;
          }
        }
      }
    }
  }
}

// The combine kernel where asked for, or by default where the packed grid leaves SMs idle and a
// tile has sm90_combine_kernel_min_splits pieces or more; never without pieces to combine.
TEST(Sm90KeySplitRule, CombineKernelWhereAskedOrIdleSms) {
  const bool built = kSm90CombineKernelBuilt;
  // By default only past kSm90MergeGroupPieces pieces a tile (session 70: level or behind at 8).
  EXPECT_FALSE(sm90_combines_pieces_after(8, 64, 132, 128, nullptr));
  EXPECT_EQ(sm90_combines_pieces_after(9, 72, 132, 128, nullptr), built && kSm90CombineKernelByDefault);
  EXPECT_EQ(sm90_combines_pieces_after(64, 64, 132, 128, nullptr), built && kSm90CombineKernelByDefault);
  EXPECT_EQ(sm90_combines_pieces_after(16, 64, 132, 128, "anything"), built && kSm90CombineKernelByDefault);
  EXPECT_FALSE(sm90_combines_pieces_after(16, 160, 132, 128, nullptr));  // a full grid
  EXPECT_FALSE(sm90_combines_pieces_after(5, 400, 132, 128, nullptr));  // a full grid
  EXPECT_FALSE(sm90_combines_pieces_after(64, 64, 132, 128, "merge"));
  EXPECT_EQ(sm90_combines_pieces_after(2, 64, 132, 128, "kernel"), built);
  EXPECT_EQ(sm90_combines_pieces_after(5, 400, 132, 128, "kernel"), built);
  EXPECT_FALSE(sm90_combines_pieces_after(1, 8, 132, 128, "kernel"));
  // Head dim 256 (the one-level merge) from 4 pieces (session 86).
  EXPECT_EQ(sm90_combines_pieces_after(4, 64, 132, 256, nullptr), built && kSm90CombineKernelByDefault);
  EXPECT_FALSE(sm90_combines_pieces_after(3, 96, 132, 256, nullptr));
  EXPECT_FALSE(sm90_combines_pieces_after(4, 64, 132, 192, nullptr));
  EXPECT_FALSE(sm90_combines_pieces_after(4, 400, 132, 256, nullptr));  // a full grid
  EXPECT_FALSE(sm90_combines_pieces_after(8, 64, 132, 256, "merge"));
}

// The combine kernel's shape: W lanes a float4 (S rounded up to a power of two, 4..32), and
// only the fragment warps whose rows can hold a query row.
TEST(Sm90KeySplitRule, CombineShape) {
  EXPECT_EQ(combine_group_lanes(2), 4);
  EXPECT_EQ(combine_group_lanes(5), 8);
  EXPECT_EQ(combine_group_lanes(8), 8);
  EXPECT_EQ(combine_group_lanes(17), 32);
  EXPECT_EQ(combine_group_lanes(128), 32);
  // MQA decode, d128: one tile of 8 rows (G = 8, one query), 64 pieces: warp 0's 32 lanes x 16 float4s.
  CombineShape c = combine_shape(1, 16, 8, 1, 128, 64, 64);
  EXPECT_EQ(c.fragment_warps, 1);
  EXPECT_EQ(c.group_lanes, 32);
  EXPECT_EQ(c.groups, 32 * 16);
  // G = 4, two queries, 8 tiles, d64 (8 float4s a thread): 8 rows, one fragment warp. Then G = 6
  // at d256 (32 float4s) over 50 queries: 21 query rows a tile, 126 rows, 8 fragment warps.
  c = combine_shape(8, 32, 4, 2, 128, 32, 8);
  EXPECT_EQ(c.fragment_warps, 1);
  EXPECT_EQ(c.groups, 8 * 32 * 8);
  c = combine_shape(3, 21, 6, 50, 128, 128, 5);
  EXPECT_EQ(c.fragment_warps, 8);
  EXPECT_EQ(c.group_lanes, 8);
  EXPECT_EQ(c.groups, int64_t(3) * 8 * 32 * 32);
}

// The merge's counters: one a tile and warpgroup up to a group's pieces, then one more a group.
TEST(Sm90KeySplitRule, MergeCounters) {
  EXPECT_EQ(sm90_merge_counters(1), 1);
  EXPECT_EQ(sm90_merge_counters(kSm90MergeGroupPieces), 1);
  EXPECT_EQ(sm90_merge_counters(kSm90MergeGroupPieces + 1), 3);
  EXPECT_EQ(sm90_merge_counters(20), 1 + 3);
  EXPECT_EQ(sm90_merge_counters(128), 1 + 16);
  EXPECT_EQ(sm90_merge_groups(17), 3);
}

// The key blocks a tile can see (the rule's key_blocks): all of them but under a left window.
TEST(Sm90KeySplitRule, VisibleKeyBlocks) {
  AttentionProblem p;
  p.seqlen_q = 1, p.seqlen_k = 131072;
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 1024);
  p.mask.window_right = 0;  // causal
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 1024);
  p.mask.window_left = 4095;  // decode with a 4096-key window: 4096 keys, 33 blocks if misaligned
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 33);
  p.seqlen_q = 64, p.mask.window_left = 1000, p.mask.window_right = 100;  // 1164 keys
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 11);
  p.mask.window_right = -1;  // 1064 keys
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 10);
  p.seqlen_k = 700;  // no more than there are
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 6);
  p.seqlen_k = 0;
  EXPECT_EQ(sm90_visible_key_blocks(p, 128), 1);
  // Brute force over small shapes: every visible key of every row lies in the counted blocks
  // from the first visible one, wherever that starts.
  for (int sq : {1, 3, 17}) {
    for (int sk : {sq, 40, 300}) {
      for (int wl : {0, 5, 64, 200}) {
        for (int wr : {-1, 0, 9}) {
          p.seqlen_q = sq, p.seqlen_k = sk, p.mask.window_left = wl, p.mask.window_right = wr;
          const int64_t off = sk - sq;
          int64_t first = sk, last = -1;
          for (int64_t i = 0; i < sq; ++i) {
            for (int64_t j = 0; j < sk; ++j) {
              if (!p.mask.visible(i, j, off, sk)) continue;
              first = std::min(first, j), last = std::max(last, j);
            }
          }
          if (last < 0) continue;
          const int64_t blocks = last / 16 - first / 16 + 1;
          EXPECT_LE(blocks, sm90_visible_key_blocks(p, 16)) << sq << " " << sk << " " << wl << " " << wr;
        }
      }
    }
  }
}

// Groups the packing does not take: 1 (nothing to pack) and above 64; every group in 2..64 it takes.
// Host-side checks only: these run without a GPU.
TEST(Sm90GqaPackingDirect, RefusesUnsupportedGroups) {
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 128, p.score.scale = 0.1f, p.batch = 1, p.seqlen_q = 1, p.seqlen_k = 64;
  const int row = 1024;  // element strides that TMA accepts
  p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 64 * row, row, 128};
  const struct {
    int q, kv;
  } refused[] = {{2, 2}, {128, 1}, {130, 2}};
  for (const auto& r : refused) {
    p.nheads_q = r.q, p.nheads_kv = r.kv;
    Status s = sm90_supports_forward_pack_gqa(p);
    EXPECT_FALSE(s.ok()) << r.q << " / " << r.kv;
    if (sm90_supports_forward(p).ok()) {
      EXPECT_NE(s.message.find("2..64"), std::string::npos) << s.message;
    }
  }
  for (int g = 2; g <= 64; ++g) {
    p.nheads_q = 2 * g, p.nheads_kv = 2;
    if (!sm90_supports_forward(p).ok()) continue;  // head dim 128 bf16 not built
    EXPECT_TRUE(sm90_supports_forward_pack_gqa(p).ok()) << "group " << g;
  }
}

// The bandwidth the d64 causal rule reads (sm90_hbm_tbps): known on a Hopper card, in the range of
// its HBM (the H100 PCIe's 2.0 to the H200's 4.8 TB/s), the same when asked again (cached).
TEST(Sm90KernelChoice, DeviceBandwidthKnown) {
  SKIP_UNLESS_SM90();
  const double tbps = sm90_hbm_tbps(0);
  std::printf("device 0: %.2f TB/s peak HBM, d64 causal rows %s\n", tbps,
              tbps < kSm90StaticCausalHdim64MinTBps ? "dynamic past the tall tiles" : "static up to their bound");
  EXPECT_GT(tbps, 1.5);
  EXPECT_LT(tbps, 6.0);
  EXPECT_EQ(sm90_hbm_tbps(0), tbps);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The choice rules themselves (kernel_choice.h), host-side: these run without a GPU.
TEST(Sm90KernelChoice, RulesAsDocumented) {
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 128, p.batch = 2;
  p.nheads_q = 32, p.nheads_kv = 8;  // G = 4
  p.seqlen_q = 1, p.seqlen_k = 4096;
  EXPECT_TRUE(sm90_picks_pack_gqa(p)) << "decode, G = 4";
  p.seqlen_q = kSm90PackGqaMaxQuery;
  EXPECT_TRUE(sm90_picks_pack_gqa(p)) << "seqlen_q at the bound, 64 x 4 = 256 rows";
  p.seqlen_q = kSm90PackGqaMaxQuery + 1;
  EXPECT_FALSE(sm90_picks_pack_gqa(p)) << "seqlen_q past the bound";
  p.seqlen_q = 64, p.nheads_q = 64;  // G = 8: 512 packed rows
  EXPECT_FALSE(sm90_picks_pack_gqa(p)) << "too many packed rows";
  p.seqlen_q = 1, p.nheads_q = 24;  // G = 3: 42 query rows a tile, 2 of its 128 rows without one
  EXPECT_TRUE(sm90_picks_pack_gqa(p)) << "a group that is not a power of two";
  p.seqlen_q = 37, p.nheads_q = 56;  // G = 7: 259 packed rows
  EXPECT_FALSE(sm90_picks_pack_gqa(p)) << "too many packed rows, G = 7";
  p.nheads_q = 8;  // G = 1
  EXPECT_FALSE(sm90_picks_pack_gqa(p)) << "no group";

  // The static schedule (sm90_dynamic_schedule_by_default() false: no second instantiation to pick).
  const bool dyn = sm90_dynamic_schedule_by_default();
  p.nheads_q = p.nheads_kv = 16, p.seqlen_q = p.seqlen_k = kSm90StaticUnmaskedMaxKeys;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "no mask, hdim 128, at the bound";
  p.seqlen_q = p.seqlen_k = kSm90StaticUnmaskedMaxKeys + 1;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "no mask past the bound";
  p.headdim = 64, p.seqlen_q = p.seqlen_k = 512;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "no mask, hdim 64 (dynamic past the tall tiles' 512 keys)";
  p.headdim = 256;
  for (int keys : {512, kSm90ClusterPairsMinKeys - 1, kSm90ClusterPairsMinKeys, 16384}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "no mask, hdim 256 at any length: " << keys;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "no mask, hdim 256 (no cluster pairs since session 21): " << keys;
  }
  p.headdim = 192, p.seqlen_q = p.seqlen_k = 512;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "no mask, hdim 192";
  p.headdim = 128, p.mask.window_right = 0;  // causal
  for (int keys : {512, 2049, 16384}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "hdim 128 causal at any length (tall tiles past 8k): " << keys;
  }
  p.headdim = 64, p.seqlen_q = p.seqlen_k = kSm90StaticCausalMaxKeysHdim64;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "hdim 64 causal at its bound";
  p.seqlen_q = p.seqlen_k = kSm90StaticCausalMaxKeysHdim64 + 1;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "hdim 64 causal past its bound";
  // A card with less bandwidth than the H200's (the H100): hdim 64 causal rows are dynamic at every
  // length (tall tiles to 1024 keys take them before this rule); unknown bandwidth keeps the bound.
  for (int keys : {2048, kSm90StaticCausalMaxKeysHdim64}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_FALSE(sm90_picks_static_schedule(p, kH100TBps)) << "hdim 64 causal on an H100, " << keys << " keys";
    EXPECT_EQ(sm90_picks_static_schedule(p, 0.0), dyn) << "hdim 64 causal, bandwidth unknown, " << keys << " keys";
  }
  p.headdim = 128;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH100TBps), dyn) << "hdim 128 causal on an H100 (the bandwidth rule is d64's)";
  p.headdim = 64;
  p.seqlen_q = p.seqlen_k = kSm90StaticScheduleMaxKeys, p.mask.window_right = -1, p.mask.window_left = 100;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "local window at the bound";
  p.seqlen_q = p.seqlen_k = kSm90StaticScheduleMaxKeys + 1;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "local window past the bound";
  p.headdim = 256, p.mask.window_left = -1, p.mask.window_right = 0;
  for (int keys : {512, kSm90L2GroupMaxKeys, kSm90L2GroupMaxKeys + 1, kSm90WideOneHeadGroupMaxKeys + 1, 16384}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "hdim 256 causal at any length (since session 22): " << keys;
  }
  p.headdim = 192;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "hdim 192 causal as hdim 256";
  p.mask.window_left = 100, p.mask.window_right = 0;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "hdim 192 local window past the static bound";
  p.headdim = 256, p.seqlen_q = p.seqlen_k = kSm90L2GroupMaxKeys;
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps)) << "hdim 256 local window up to the L2-group bound keeps the dynamic schedule";
  p.headdim = 128, p.mask.window_left = -1;

  // The short-rows kernel: local windows at head dim 64 up to its bound of keys, never causal rows
  // (tall tiles since session 23) or unmasked ones there; never head dims 128 (the static kernel
  // at every length since session 30; session 29 ran rows up to the bound here) or 256.
  p.seqlen_q = 512, p.headdim = 64, p.mask.window_left = 100, p.mask.window_right = 0;
  for (int keys : {256, kSm90ShortRowsMaxKeys, kSm90ShortRowsMaxKeys + 1}) {
    p.seqlen_k = keys;
    EXPECT_EQ(sm90_picks_short_rows(p), keys <= kSm90ShortRowsMaxKeys) << "hdim 64 local window, " << keys << " keys";
  }
  p.seqlen_k = 512, p.mask.window_left = -1;
  EXPECT_FALSE(sm90_picks_short_rows(p)) << "hdim 64 causal (tall tiles)";
  p.mask.window_right = -1;
  EXPECT_FALSE(sm90_picks_short_rows(p)) << "hdim 64, no mask";
  for (int headdim : {128, 256}) {
    p.headdim = headdim;
    for (int keys : {kSm90ShortRowsMaxKeys, kSm90ShortRowsMaxKeys + 1}) {
      p.seqlen_k = keys;
      for (int left : {-1, 100}) {
        for (int right : {-1, 0}) {
          p.mask.window_left = left, p.mask.window_right = right;
          EXPECT_FALSE(sm90_picks_short_rows(p))
              << "hdim " << headdim << " window (" << left << ", " << right << "), " << keys << " keys";
        }
      }
    }
  }
  p.mask.window_left = -1;
  p.headdim = 128, p.mask.window_right = -1, p.seqlen_k = kSm90StaticUnmaskedMaxKeys;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "hdim 128, no mask, short rows: the static schedule";
  EXPECT_FALSE(sm90_picks_short_rows(p)) << "hdim 128, no mask, past the short-rows bound";

  // Tall tiles: causal rows at head dim 128 past kSm90OneHeadGroupMaxKeys keys and at head dim 64
  // up to kSm90TallTilesMaxKeysHdim64, unmasked ones at head dim 64 up to
  // kSm90TallTilesMaxUnmaskedKeysHdim64; never a local window, never another head dim.
  p.mask.window_left = -1, p.mask.window_right = 0;
  for (int headdim : {64, 128}) {
    p.headdim = headdim;
    const int bound = headdim == 64 ? kSm90TallTilesMaxKeysHdim64 : kSm90OneHeadGroupMaxKeys;
    for (int keys : {512, bound, bound + 1, 16384}) {
      p.seqlen_q = p.seqlen_k = keys;
      EXPECT_EQ(sm90_picks_tall_tiles(p), headdim == 64 ? keys <= bound : keys > bound)
          << "hdim " << headdim << " causal, " << keys << " keys";
    }
    p.seqlen_q = p.seqlen_k = headdim == 64 ? 512 : 16384;
    p.mask.window_left = 100;
    EXPECT_FALSE(sm90_picks_tall_tiles(p)) << "hdim " << headdim << " local window, " << p.seqlen_k << " keys";
    p.mask.window_left = -1, p.mask.window_right = -1;
    for (int keys : {256, kSm90TallTilesMaxUnmaskedKeysHdim64, kSm90TallTilesMaxUnmaskedKeysHdim64 + 1, 16384}) {
      p.seqlen_q = p.seqlen_k = keys;
      EXPECT_EQ(sm90_picks_tall_tiles(p), headdim == 64 && keys <= kSm90TallTilesMaxUnmaskedKeysHdim64)
          << "hdim " << headdim << " unmasked, " << keys << " keys";
    }
    p.mask.window_right = 0;
  }
  for (int headdim : {192, 256}) {
    p.headdim = headdim;
    for (int keys : {512, 16384}) {
      p.seqlen_q = p.seqlen_k = keys;
      EXPECT_FALSE(sm90_picks_tall_tiles(p)) << "hdim " << headdim << " causal, " << keys << " keys";
    }
  }
  // Head dim 96 has rules of its own (sessions 59-60), and none of the kernels built at 128 alone
  // (tall tiles, cluster pairs, the short-rows twin): the static schedule for causal and unmasked
  // rows up to their bounds, the dynamic one past them.
  p.headdim = 96, p.mask.window_right = 0;
  for (int keys : {512, kSm90StaticCausalMaxKeysHdim96, kSm90StaticCausalMaxKeysHdim96 + 1, kSm90OneHeadGroupMaxKeys + 1}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn && keys <= kSm90StaticCausalMaxKeysHdim96)
        << "hdim 96 causal, " << keys << " keys";
    EXPECT_FALSE(sm90_picks_tall_tiles(p)) << "hdim 96 causal, " << keys << " keys";
    EXPECT_FALSE(sm90_picks_short_rows(p)) << "hdim 96 causal, " << keys << " keys";
  }
  p.mask.window_right = -1;
  for (int keys : {512, kSm90StaticUnmaskedMaxKeysHdim96, kSm90StaticUnmaskedMaxKeysHdim96 + 1, 16384}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn && keys <= kSm90StaticUnmaskedMaxKeysHdim96)
        << "hdim 96, no mask, " << keys << " keys";
  }
  EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "hdim 96, no mask (no cluster pairs built)";
  p.mask.window_left = 100, p.mask.window_right = 10, p.seqlen_q = p.seqlen_k = kSm90StaticScheduleMaxKeys;
  EXPECT_EQ(sm90_picks_static_schedule(p, kH200TBps), dyn) << "hdim 96 local window at d128's bound";
  p.mask.window_left = -1;
  p.headdim = 128, p.mask.window_right = -1, p.seqlen_q = p.seqlen_k = 512;

  // Unmasked long rows at head dim 128 take cluster pairs (since session 20) where they can, else
  // the default kernel (128-key blocks, dynamic schedule; no rule picks 176-key blocks since
  // session 18).
  p.headdim = 128;
  for (int keys : {8192, 16384}) {
    p.seqlen_q = p.seqlen_k = keys;
    EXPECT_TRUE(sm90_picks_cluster_pairs(p)) << "hdim 128, no mask, " << keys << " keys";
    EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps) || sm90_picks_short_rows(p)) << "hdim 128, no mask, " << keys << " keys";
  }
  p.seqlen_q = 8192 - 128;  // an odd number of query tiles
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps) || sm90_picks_short_rows(p) || sm90_picks_cluster_pairs(p))
      << "hdim 128, no mask, odd query tiles";
  p.mask.window_right = 0;

  // Cluster pairs: head dim 128 without a mask from kSm90ClusterPairsMinKeys keys, where the kernel
  // takes the problem (fixed length, no seqused, an even number of 128-row query tiles).
  const int min_keys = kSm90ClusterPairsMinKeys;
  {
    p.headdim = 128, p.mask = MaskPolicy();
    p.nheads_q = 8, p.nheads_kv = 8, p.seqlen_q = 512, p.seqlen_k = min_keys;
    EXPECT_TRUE(sm90_picks_cluster_pairs(p)) << "no mask, at the bound";
    p.seqlen_k = min_keys - 1;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "one key below the bound";
    p.seqlen_k = 16384, p.seqlen_q = 250;  // two tiles, the second partial
    EXPECT_TRUE(sm90_picks_cluster_pairs(p)) << "two query tiles";
    p.nheads_q = 32;  // GQA 4, too many rows to pack
    EXPECT_TRUE(sm90_picks_cluster_pairs(p)) << "GQA without packing";
    p.nheads_q = 8, p.seqlen_q = 300;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "three query tiles";
    p.seqlen_q = 128;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "one query tile";
    p.seqlen_q = 512, p.mask.window_right = 0;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "causal";
    p.mask.window_right = -1, p.mask.window_left = 4096;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "local window";
    p.mask.window_left = -1;
    int32_t used = 100;
    p.seqused_k = &used;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "seqused_k";
    p.seqused_k = nullptr, p.seqused_q = &used;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "seqused_q";
    p.seqused_q = nullptr;
    int32_t cu[2] = {0, 512};
    p.cu_seqlens_q = p.cu_seqlens_k = cu;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "varlen";
    p.cu_seqlens_q = p.cu_seqlens_k = nullptr;
    EXPECT_TRUE(sm90_picks_cluster_pairs(p)) << "back to a covered problem";
  }
  for (int d : {64, 192, 256}) {
    p.headdim = d;
    EXPECT_FALSE(sm90_picks_cluster_pairs(p)) << "head dim " << d;
  }
}

// The public API's choice among the sm90 instantiations (kernel_choice.h): each case runs through
// the API against the reference, and the chosen variant's launch counter must grow by one exactly
// when the rule picks it. One suite per variant (instantiated below with its cases).
struct ApiPick {
  Case c;
  bool picked;  // whether the API should run the variant under test
  int64_t (*launches)() = nullptr;  // that variant's launch counter
  const char* variant = "";
  uint32_t seed = 0;  // added to the name's length: each suite keeps its own inputs
  const char* one_wg_switch = nullptr;  // FLASHATTN_SM90_PACK_GQA_ONE_WG for the case (unset: the rule)
};

// Fills in the variant of a suite's cases.
std::vector<ApiPick> for_variant(std::vector<ApiPick> v, int64_t (*launches)(), const char* variant, uint32_t seed) {
  for (ApiPick& a : v) a.launches = launches, a.variant = variant, a.seed = seed;
  return v;
}

class Sm90ApiPick : public ::testing::TestWithParam<ApiPick> {};

TEST_P(Sm90ApiPick, PicksByRuleAndMatchesReference) {
  SKIP_UNLESS_SM90();
  const ApiPick& a = GetParam();
  const ScopedEnv one_wg("FLASHATTN_SM90_PACK_GQA_ONE_WG", a.one_wg_switch);
  const ScopedEnv wgmma_packed(kSlicedSwitch, "0");  // one_wg_persistent's 640 tiles; the sliced rule's own test below
  const int64_t before = a.launches();
  run_case(a.c, a.seed + uint32_t(a.c.name.size()));
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  // d64's causal rows past the tall tiles leave the static schedule on a card with less bandwidth.
  const bool picked = a.picked && !(a.launches == sm90_static_schedule_launches && d64_causal_runs_dynamic_here(a.c));
  EXPECT_EQ(a.launches() - before, picked ? 1 : 0) << (picked ? "the API did not run the " : "the API ran the ") << a.variant;
}

std::string api_pick_name(const ::testing::TestParamInfo<ApiPick>& info) { return info.param.c.name; }
void PrintTo(const ApiPick& a, std::ostream* os) { *os << a.c.name << (a.picked ? " (picks the " : " (not the ") << a.variant << ")"; }

// GQA head packing for decode-like GQA (sm90_picks_pack_gqa), the default kernel otherwise.
std::vector<ApiPick> api_pick_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<ApiPick> v;
  Case c;
  c = make("api_decode_q1_g4_bf16", bf, 128, 16, 1, 1000, 32, 8), v.push_back({c, true});
  c = make("api_q64_g4_causal_fp16", fp, 128, 2, 64, 517, 8, 2), c.causal = true, v.push_back({c, true});
  c = make("api_q32_g8_window_bf16", bf, 64, 2, 32, 300, 16, 2), c.window_left = 40, c.window_right = 0;
  v.push_back({c, true});
  c = make("api_q4_mqa_g64_fp16", fp, 256, 1, 4, 333, 64, 1), v.push_back({c, true});
  c = make("api_varlen_decode_g4_seqused_k_bf16", bf, 128, 0, 0, 0, 16, 4);
  c.lens_q = {1, 3, 1, 2}, c.lens_k = {700, 64, 1, 300}, c.used_k = {650, 64, 1, 17}, c.extra_k = 5, c.causal = true;
  v.push_back({c, true});
  // Groups that are not powers of two (Qwen2's 28 / 4 = 7, 40 / 8 = 5).
  c = make("api_q1_g3_bf16", bf, 128, 4, 1, 300, 6, 2), v.push_back({c, true});
  c = make("api_decode_q1_g7_fp16", fp, 128, 8, 1, 900, 28, 4), v.push_back({c, true});
  c = make("api_q16_g5_causal_bf16", bf, 128, 2, 16, 400, 40, 8), c.causal = true, v.push_back({c, true});
  // Not picked: too many packed rows (64 * 8, 37 * 7), a longer query, no group.
  c = make("api_q64_g8_default_bf16", bf, 128, 1, 64, 300, 16, 2), v.push_back({c, false});
  c = make("api_q37_g7_default_fp16", fp, 128, 1, 37, 300, 14, 2), v.push_back({c, false});
  c = make("api_q100_g2_default_fp16", fp, 64, 1, 100, 300, 4, 2), v.push_back({c, false});
  c = make("api_q1_mha_default_bf16", bf, 128, 4, 1, 300, 4, 4), v.push_back({c, false});
  return v;
}

// Runs c with the environment switch `name` at "0" (read at every call): the kernel counted by
// `left_out` must not run, the one counted by `ran` must, once.
void expect_switched_off(const Case& c, uint32_t seed, const char* name, int64_t (*left_out)(), int64_t (*ran)()) {
  const int64_t left_before = left_out(), ran_before = ran();
  {
    const ScopedEnv off(name, "0");
    run_case(c, seed);
  }
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(left_out(), left_before) << "a kernel " << name << "=0 leaves out ran";
  EXPECT_EQ(ran() - ran_before, 1) << "the kernel left to run did not";
}

// FLASHATTN_SM90_PACK_GQA=0: a shape the rule packs runs unpacked, on sm90.
TEST(Sm90ApiPickOverride, PackGqaLeftOut) {
  SKIP_UNLESS_SM90();
  const Case c = make("api_decode_q1_g4_unpacked_bf16", DType::kBFloat16, 128, 4, 1, 700, 32, 8);
  expect_switched_off(c, 5, "FLASHATTN_SM90_PACK_GQA", sm90_pack_gqa_launches, sm90_any_launches);
}

INSTANTIATE_TEST_SUITE_P(GqaPacking, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(api_pick_cases(), sm90_pack_gqa_launches, "packed kernel", 17u)),
                         api_pick_name);

// The one-warpgroup packed kernel (sm90::PackGqaOneWgConfig) with FLASHATTN_SM90_PACK_GQA_ONE_WG=1,
// which gives it every problem it can run: head dim 64, packed, at most kSm90PackGqaOneWgMaxRows
// rows (seqlen_q x G). Picked: decode, the bound itself (16 x 4) with a window and causal, G = 64
// (one query row a tile), MHA decode that the key splits bring to the packed kernel, varlen, more
// tiles than CTAs. Not picked: one row past the bound (two-warpgroup packed kernel), head dim 128,
// a query too long to pack. The rest of the kernel's coverage is Sm90GqaPacking's d64 cases
// (BothPackedKernelsMatchReference) and a captured decode step (test_graph_capture.cpp).
std::vector<ApiPick> one_wg_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  const int bound = int(kSm90PackGqaOneWgMaxRows);
  std::vector<ApiPick> v;
  Case c;
  c = make("one_wg_decode_g4_k3000_bf16", bf, 64, 3, 1, 3000, 16, 4), v.push_back({c, true});
  // 640 tiles on at most 264 CTAs, unsplit: each CTA walks several tiles (O out through Q's tile).
  c = make("one_wg_persistent_g4_q1_k600_fp16", fp, 64, 80, 1, 600, 32, 8), v.push_back({c, true});
  c = make("one_wg_bound_g4_q16_window_causal_fp16", fp, 64, 2, bound / 4, 700, 8, 2), c.causal = true;
  c.window_left = 200, v.push_back({c, true});
  c = make("one_wg_g64_q1_k500_fp16", fp, 64, 2, 1, 500, 64, 1), v.push_back({c, true});
  c = make("one_wg_mha_decode_k20000_bf16", bf, 64, 1, 1, 20000, 2, 2), v.push_back({c, true});
  c = make("one_wg_varlen_g8_softcap_bf16", bf, 64, 0, 0, 0, 16, 2);
  c.lens_q = {8, 1, 3}, c.lens_k = {900, 70, 2}, c.softcap = 20.0f, v.push_back({c, true});
  c = make("one_wg_past_bound_g4_q17_fp16", fp, 64, 2, bound / 4 + 1, 400, 8, 2), v.push_back({c, false});
  c = make("one_wg_d128_decode_g4_bf16", bf, 128, 2, 1, 900, 8, 2), v.push_back({c, false});
  c = make("one_wg_q100_g2_unpacked_fp16", fp, 64, 1, 100, 300, 4, 2), v.push_back({c, false});
  for (ApiPick& a : v) a.one_wg_switch = "1";
  return v;
}

// The same kernel by the default rule (FLASHATTN_SM90_PACK_GQA_ONE_WG unset): GQA, at most
// kSm90PackGqaOneWgMaxRows rows and kSm90PackGqaOneWgMaxTiles tiles (sequences x KV heads).
// Picked: decode at the tile bound (key splits), a few rows of a short query, varlen. Not picked:
// one sequence past the tile bound, MHA decode (key splits), rows past the row bound.
std::vector<ApiPick> one_wg_rule_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  const int tiles = int(kSm90PackGqaOneWgMaxTiles);
  std::vector<ApiPick> v;
  Case c;
  c = make("one_wg_rule_decode_16_tiles_k9000_bf16", bf, 64, tiles / 4, 1, 9000, 16, 4), v.push_back({c, true});
  c = make("one_wg_rule_q8_g8_causal_fp16", fp, 64, 1, 8, 333, 16, 2), c.causal = true, v.push_back({c, true});
  c = make("one_wg_rule_varlen_g4_bf16", bf, 64, 0, 0, 0, 8, 2);
  c.lens_q = {1, 2, 1}, c.lens_k = {1200, 9, 400}, v.push_back({c, true});
  c = make("one_wg_rule_decode_20_tiles_fp16", fp, 64, tiles / 4 + 1, 1, 2000, 16, 4), v.push_back({c, false});
  c = make("one_wg_rule_mha_decode_k20000_bf16", bf, 64, 1, 1, 20000, 2, 2), v.push_back({c, false});
  c = make("one_wg_rule_q17_g4_fp16", fp, 64, 1, 17, 300, 8, 2), v.push_back({c, false});
  return v;
}

// FLASHATTN_SM90_PACK_GQA_ONE_WG=0: a problem the rule gives the one-warpgroup kernel (16 tiles)
// runs on the two-warpgroup packed one.
TEST(Sm90ApiPickOverride, PackGqaOneWgLeftOut) {
  SKIP_UNLESS_SM90();
  const Case c = make("api_decode_q1_g4_two_wg_fp16", DType::kFloat16, 64, 2, 1, 1500, 32, 8);
  expect_switched_off(c, 23, "FLASHATTN_SM90_PACK_GQA_ONE_WG", sm90_pack_gqa_one_wg_launches, sm90_pack_gqa_launches);
}

INSTANTIATE_TEST_SUITE_P(PackGqaOneWg, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(one_wg_cases(), sm90_pack_gqa_one_wg_launches,
                                                         "one-warpgroup packed kernel", 79u)),
                         api_pick_name);
INSTANTIATE_TEST_SUITE_P(PackGqaOneWgRule, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(one_wg_rule_cases(), sm90_pack_gqa_one_wg_launches,
                                                         "one-warpgroup packed kernel", 83u)),
                         api_pick_name);

// The static tile schedule by sm90_picks_static_schedule (kernel_choice.h), the dynamic one
// otherwise. The d64 causal case past 4k keys also keeps the dynamic schedule's causal path
// tested.
std::vector<ApiPick> schedule_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<ApiPick> v;
  Case c;
  c = make("sched_causal_640_static_bf16", bf, 128, 2, 640, 640, 16, 16), c.causal = true, v.push_back({c, true});
  c = make("sched_causal_512_static_bf16", bf, 128, 2, 512, 512, 16, 16), c.causal = true, v.push_back({c, true});
  c = make("sched_unmasked_512_static_fp16", fp, 128, 2, 512, 512, 8, 8), v.push_back({c, true});
  c = make("sched_window_2048_static_fp16", fp, 64, 1, 700, 2048, 8, 2), c.window_left = 300, c.window_right = 0;
  v.push_back({c, true});
  c = make("sched_causal_varlen_static_d256_bf16", bf, 256, 0, 0, 0, 4, 2);
  c.lens_q = {900, 33, 1500}, c.lens_k = {900, 700, 1500}, c.causal = true, v.push_back({c, true});
  c = make("sched_causal_2100_static_bf16", bf, 128, 1, 2100, 2100, 4, 2), c.causal = true, v.push_back({c, true});
  // Causal tiles in groups of heads (tile_scheduler.h, launch.h causal_group_heads). With a 50 MB
  // L2 (H100 / H200) this makes L2 groups of 50 + 14 (hdim 64 at 2k, 512 KB of K/V a head)
  // (batch, head) pairs: several groups and a short last one; hdim 128 up to
  // kSm90OneHeadGroupMaxKeys and hdim 256 up to kSm90WideOneHeadGroupMaxKeys take one head per
  // group (L2 groups and the dynamic schedule at hdim 256 up to 1k until session 21).
  c = make("sched_causal_2048_l2_groups_static_d64_bf16", bf, 64, 4, 2048, 2048, 16, 16), c.causal = true;
  v.push_back({c, true});
  c = make("sched_causal_1024_one_head_static_d256_fp16", fp, 256, 3, 1024, 1024, 10, 10), c.causal = true;
  v.push_back({c, true});
  c = make("sched_causal_q500_k4000_one_head_static_d256_bf16", bf, 256, 2, 500, 4000, 4, 2), c.causal = true;
  v.push_back({c, true});
  // The dynamic d256 kernel now runs local windows only (up to kSm90L2GroupMaxKeys keys, and past
  // kSm90StaticScheduleMaxKeys), its masked last block passed over on the diagonal.
  c = make("sched_window_1000_dynamic_d256_bf16", bf, 256, 2, 1000, 1000, 4, 4), c.window_left = 300;
  c.window_right = 0, v.push_back({c, false});
  c = make("sched_causal_long_k_static_d192_fp16", fp, 192, 1, 300, 2500, 4, 4), c.causal = true, v.push_back({c, true});
  c = make("sched_window_long_k_dynamic_d192_bf16", bf, 192, 1, 300, 2500, 4, 4);
  c.window_left = 400, c.window_right = 0, v.push_back({c, false});
  // Above head dim 128 up to kSm90WideOneHeadGroupMaxKeys keys: one head per group, static
  // schedule, several (batch, head) pairs of GQA heads.
  c = make("sched_causal_1500_one_head_static_d256_bf16", bf, 256, 2, 1500, 1500, 6, 3), c.causal = true;
  v.push_back({c, true});
  // hdim 64: three consumer warpgroups (192-row tiles) past kSm90TallTilesMaxKeysHdim64, static
  // up to kSm90StaticCausalMaxKeysHdim64 (L2 groups at any length); up to
  // kSm90TallTilesMaxKeysHdim64 tall tiles (256-row tiles, static schedule) take the causal rows
  // instead (the short-rows kernel up to 512 keys until session 23).
  c = make("sched_causal_2100_static_d64_fp16", fp, 64, 1, 2100, 2100, 4, 2), c.causal = true, v.push_back({c, true});
  c = make("sched_causal_q300_k4200_dynamic_d64_bf16", bf, 64, 1, 300, 4200, 4, 4), c.causal = true;
  v.push_back({c, false});
  c = make("sched_causal_500_tall_tiles_d64_bf16", bf, 64, 3, 500, 500, 4, 4), c.causal = true, v.push_back({c, false});
  // Past that bound: the static three-warpgroup kernel, whose last tile (1070 = 5 x 192 + 110) has
  // a warpgroup without rows.
  c = make("sched_causal_1070_static_d64_bf16", bf, 64, 2, 1070, 1070, 4, 4), c.causal = true, v.push_back({c, true});
  // Unmasked: static up to kSm90StaticUnmaskedMaxKeys keys at head dim 128, and at head dim 256 at
  // every length (cluster pairs from kSm90ClusterPairsMinKeys until session 21); dynamic at head
  // dim 64 past the tall tiles' 512 keys (static up to 1k until session 21).
  c = make("sched_noncausal_600_dynamic_d64_bf16", bf, 64, 2, 600, 600, 8, 8), v.push_back({c, false});
  c = make("sched_noncausal_2100_dynamic_fp16", fp, 128, 1, 300, 2100, 4, 4), v.push_back({c, false});
  // Head dim 128 without a mask up to the bound: the static kernel with the exp2 turns since
  // session 22 (the short-rows kernel's GEMM turns before): partial tiles, GQA with softcap,
  // head-major strides, varlen with seqused_k.
  const int max_unmasked = kSm90StaticUnmaskedMaxKeys;
  c = make("sched_noncausal_q300_k_bound_gqa_softcap_static_fp16", fp, 128, 2, 300, max_unmasked, 8, 2);
  c.softcap = 30.0f, v.push_back({c, true});
  c = make("sched_noncausal_strided_q129_k777_static_bf16", bf, 128, 3, 129, 777, 4, 4);
  c.layout = Layout::kHeadMajor, v.push_back({c, true});
  c = make("sched_noncausal_varlen_seqused_k_static_fp16", fp, 128, 0, 0, 0, 4, 4);
  c.lens_q = {200, 1, 700}, c.lens_k = {200, 300, 1000}, c.used_k = {190, 1, 1000}, c.extra_k = 2;
  v.push_back({c, true});
  c = make("sched_noncausal_512_static_d256_bf16", bf, 256, 1, 512, 512, 4, 4), v.push_back({c, true});
  c = make("sched_noncausal_q300_k4095_static_d256_fp16", fp, 256, 1, 300, 4095, 4, 2);
  v.push_back({c, true});
  c = make("sched_noncausal_q300_k4096_static_d256_bf16", bf, 256, 1, 300, 4096, 2, 2);
  v.push_back({c, true});
  c = make("sched_noncausal_b2_q256_k4500_gqa_static_d256_bf16", bf, 256, 2, 256, 4500, 4, 2), v.push_back({c, true});
  c = make("sched_noncausal_512_dynamic_d192_bf16", bf, 192, 1, 512, 512, 4, 4), v.push_back({c, false});
  // Builds whose default is the static schedule have no second instantiation to pick.
  for (ApiPick& a : v) a.picked = a.picked && sm90_dynamic_schedule_by_default();
  return v;
}

INSTANTIATE_TEST_SUITE_P(Schedule, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(schedule_cases(), sm90_static_schedule_launches,
                                                         "static schedule", 29u)),
                         api_pick_name);

// The short-rows kernel (sm90::ShortRowsConfig): 128-row tiles with the static schedule at head dim 64
// for local windows with at most kSm90ShortRowsMaxKeys keys (causal rows too until session 23).
// The picked cases are the only tests of that configuration through the API: partial tiles, a
// window with a right bound past the diagonal, GQA with seqlen_q != seqlen_k, varlen with
// seqused_k, softcap. At head dim 128 (session 29's rows up to the bound) the static kernel runs
// them since session 30: the same masks, not picked here.
std::vector<ApiPick> short_rows_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  const int max_keys = kSm90ShortRowsMaxKeys;
  std::vector<ApiPick> v;
  Case c;
  c = make("short_rows_window_512_bf16", bf, 64, 2, 512, 512, 8, 8), c.window_left = 300, c.window_right = 0;
  v.push_back({c, true});
  c = make("short_rows_window_q450_k500_fp16", fp, 64, 3, 450, 500, 4, 4), c.window_left = 100, c.window_right = 40;
  v.push_back({c, true});
  c = make("short_rows_window_at_bound_bf16", bf, 64, 1, 333, max_keys, 4, 2), c.window_left = 200, c.window_right = 0;
  v.push_back({c, true});
  c = make("short_rows_gqa_window_q300_k480_softcap_fp16", fp, 64, 2, 300, 480, 8, 2), c.window_left = 150;
  c.window_right = 0, c.softcap = 20.0f, v.push_back({c, true});
  c = make("short_rows_varlen_window_seqused_k_bf16", bf, 64, 0, 0, 0, 4, 4);
  c.lens_q = {129, 1, 440}, c.lens_k = {129, 300, 500}, c.used_k = {129, 1, 480}, c.extra_k = 3;
  c.window_left = 64, c.window_right = 0, v.push_back({c, true});
  // Head dim 128, every mask up to the bound (the static kernel since session 30, picked by no
  // short-rows rule): causal with partial tiles and GQA, a window, unmasked, varlen with
  // seqused_k, softcap.
  c = make("short_rows_window_d128_bf16", bf, 128, 1, 512, 512, 4, 4), c.window_left = 200, c.window_right = 0;
  v.push_back({c, false});
  c = make("short_rows_noncausal_512_d128_bf16", bf, 128, 2, 512, 512, 8, 8), v.push_back({c, false});
  c = make("short_rows_causal_q300_k500_gqa_d128_fp16", fp, 128, 3, 300, 500, 8, 2), c.causal = true;
  v.push_back({c, false});
  c = make("short_rows_varlen_causal_seqused_k_softcap_d128_bf16", bf, 128, 0, 0, 0, 4, 4);
  c.lens_q = {129, 1, 440}, c.lens_k = {129, 300, 500}, c.used_k = {129, 1, 480}, c.extra_k = 3;
  c.causal = true, c.softcap = 25.0f, v.push_back({c, false});
  // Not picked: past the bound, causal (tall tiles), no mask, head dim 256.
  c = make("short_rows_window_past_bound_fp16", fp, 64, 1, 300, max_keys + 1, 2, 2), c.window_left = 200;
  c.window_right = 0, v.push_back({c, false});
  c = make("short_rows_causal_512_tall_tiles_bf16", bf, 64, 2, 512, 512, 4, 4), c.causal = true, v.push_back({c, false});
  c = make("short_rows_noncausal_512_bf16", bf, 64, 2, 512, 512, 4, 4), v.push_back({c, false});
  c = make("short_rows_causal_past_bound_d128_bf16", bf, 128, 1, 300, max_keys + 1, 4, 4), c.causal = true;
  v.push_back({c, false});
  c = make("short_rows_causal_512_d256_bf16", bf, 256, 1, 512, 512, 4, 4), c.causal = true, v.push_back({c, false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(ShortRows, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(short_rows_cases(), sm90_short_rows_launches,
                                                         "short-rows kernel", 53u)),
                         api_pick_name);

// Cluster pairs (sm90::ClusterPairsConfig) by sm90_picks_cluster_pairs: head dim 128 without a
// mask from kSm90ClusterPairsMinKeys keys, fixed length without seqused, an even number of query
// tiles. Picked: at the bound, partial query and key tiles with GQA and softcap, padded strides
// with batch > 1, fp16 and bf16. Not picked (another kernel runs them against the same
// reference): one key short, causal, an odd number of query tiles, seqused_k, other head dims
// (256 had them until session 21).
std::vector<ApiPick> cluster_pair_rule_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  const int d = 128, min_keys = kSm90ClusterPairsMinKeys;
  std::vector<ApiPick> v;
  Case c;
  c = make("cluster_rule_k_at_bound_bf16", bf, d, 1, 256, min_keys, 4, 4), v.push_back({c, true});
  c = make("cluster_rule_q400_k_bound_plus_76_gqa_softcap_fp16", fp, d, 1, 400, min_keys + 76, 4, 2), c.softcap = 20.0f;
  v.push_back({c, true});
  c = make("cluster_rule_padded_b2_q256_k_bound_plus_476_bf16", bf, d, 2, 256, min_keys + 476, 2, 1), c.layout = Layout::kPadded;
  v.push_back({c, true});
  c = make("cluster_rule_k_below_bound_default_bf16", bf, d, 1, 256, min_keys - 1, 4, 4), v.push_back({c, false});
  c = make("cluster_rule_causal_default_bf16", bf, d, 1, 256, min_keys, 4, 4), c.causal = true, v.push_back({c, false});
  c = make("cluster_rule_odd_tiles_q300_default_fp16", fp, d, 1, 300, min_keys, 2, 2), v.push_back({c, false});
  c = make("cluster_rule_seqused_k_default_bf16", bf, d, 2, 256, min_keys + 100, 2, 2), c.used_k = {min_keys + 1, 77};
  v.push_back({c, false});
  c = make("cluster_rule_d128_q500_k_bound_plus_50_gqa_fp16", fp, 128, 1, 500, min_keys + 50, 4, 2);
  v.push_back({c, true});
  c = make("cluster_rule_d128_b2_q256_k_bound_bf16", bf, 128, 2, 256, min_keys, 2, 2), v.push_back({c, true});
  c = make("cluster_rule_d128_odd_tiles_q300_default_bf16", bf, 128, 1, 300, 2 * min_keys, 2, 2);
  v.push_back({c, false});
  c = make("cluster_rule_d192_default_bf16", bf, 192, 1, 256, 2 * min_keys, 4, 4), v.push_back({c, false});
  c = make("cluster_rule_d256_k_at_bound_static_bf16", bf, 256, 1, 256, min_keys, 4, 4), v.push_back({c, false});
  c = make("cluster_rule_d256_q400_k_bound_plus_76_gqa_softcap_static_fp16", fp, 256, 1, 400, min_keys + 76, 4, 2);
  c.softcap = 20.0f, v.push_back({c, false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(ClusterPairs, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(cluster_pair_rule_cases(), sm90_cluster_pairs_launches,
                                                         "cluster-pair kernel", 67u)),
                         api_pick_name);

// Tall tiles (sm90::TallTilesConfig) by sm90_picks_tall_tiles: causal, at head dim 128 more than
// kSm90OneHeadGroupMaxKeys keys, at head dim 64 at most kSm90TallTilesMaxKeysHdim64 (varlen: the
// longest), and unmasked at head dim 64 with at most kSm90TallTilesMaxUnmaskedKeysHdim64. Short
// query rows keep the reference cheap. Picked: just past / at the bound, GQA with softcap in fp16,
// varlen with seqused_k and unused k/v rows, a right bound past the diagonal. Not picked: the
// other side of the bound, d128 unmasked, a local window.
std::vector<ApiPick> tall_tile_rule_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  const int bound = kSm90OneHeadGroupMaxKeys;
  std::vector<ApiPick> v;
  Case c;
  c = make("tall_rule_causal_q300_k_bound_plus_1_bf16", bf, 128, 1, 300, bound + 1, 4, 4), c.causal = true;
  v.push_back({c, true});
  c = make("tall_rule_causal_q200_k9000_gqa_softcap_fp16", fp, 128, 2, 200, 9000, 4, 2), c.causal = true;
  c.softcap = 20.0f, v.push_back({c, true});
  c = make("tall_rule_varlen_causal_seqused_k_bf16", bf, 128, 0, 0, 0, 2, 2);
  c.lens_q = {100, 1, 250}, c.lens_k = {300, bound + 300, 600}, c.used_k = {300, bound + 200, 1}, c.extra_k = 5;
  c.causal = true, v.push_back({c, true});
  c = make("tall_rule_causal_q300_k_bound_static_bf16", bf, 128, 1, 300, bound, 2, 2), c.causal = true;
  v.push_back({c, false});
  c = make("tall_rule_noncausal_q256_k9000_fp16", fp, 128, 1, 256, 9000, 2, 2), v.push_back({c, false});
  c = make("tall_rule_window_q300_k9000_bf16", bf, 128, 1, 300, 9000, 2, 2), c.window_left = 500, c.window_right = 0;
  v.push_back({c, false});
  c = make("tall_rule_causal_d64_q300_k9000_fp16", fp, 64, 1, 300, 9000, 2, 2), c.causal = true;
  v.push_back({c, false});
  const int bound64 = kSm90TallTilesMaxKeysHdim64;
  c = make("tall_rule_causal_d64_at_bound_bf16", bf, 64, 2, bound64, bound64, 8, 8), c.causal = true;
  v.push_back({c, true});
  c = make("tall_rule_causal_d64_q200_k500_gqa_softcap_fp16", fp, 64, 2, 200, 500, 8, 2), c.causal = true;
  c.softcap = 30.0f, v.push_back({c, true});
  c = make("tall_rule_varlen_causal_seqused_k_d64_bf16", bf, 64, 0, 0, 0, 4, 2);
  c.lens_q = {300, 1, 257}, c.lens_k = {300, 700, bound64}, c.used_k = {280, 1, bound64}, c.extra_k = 4;
  c.causal = true, v.push_back({c, true});
  c = make("tall_rule_right_bound_d64_q400_k400_bf16", bf, 64, 1, 400, 400, 4, 4), c.window_right = 70;
  v.push_back({c, true});
  c = make("tall_rule_causal_d64_past_bound_fp16", fp, 64, 1, 300, bound64 + 1, 4, 4), c.causal = true;
  v.push_back({c, false});
  const int unmasked64 = kSm90TallTilesMaxUnmaskedKeysHdim64;
  c = make("tall_rule_noncausal_d64_at_bound_bf16", bf, 64, 2, unmasked64, unmasked64, 4, 4), v.push_back({c, true});
  c = make("tall_rule_noncausal_d64_q100_k300_gqa_fp16", fp, 64, 3, 100, 300, 8, 2), v.push_back({c, true});
  c = make("tall_rule_varlen_noncausal_d64_bf16", bf, 64, 0, 0, 0, 2, 2);
  c.lens_q = {70, 300, 1}, c.lens_k = {500, 300, unmasked64}, v.push_back({c, true});
  c = make("tall_rule_noncausal_d64_past_bound_fp16", fp, 64, 1, 200, unmasked64 + 1, 4, 4), v.push_back({c, false});
  c = make("tall_rule_window_d64_512_fp16", fp, 64, 2, 512, 512, 4, 4), c.window_left = 100, c.window_right = 0;
  v.push_back({c, false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(TallTiles, Sm90ApiPick,
                         ::testing::ValuesIn(for_variant(tall_tile_rule_cases(), sm90_tall_tiles_launches,
                                                         "tall-tile kernel", 71u)),
                         api_pick_name);

// Tall tiles forced (FLASHATTN_SM90_VARIANT=tall) at head dims 128 and 64 whatever the rule says,
// on short shapes: the last tile with a warpgroup without rows (d128: 700 = 3 x 192 + 124; d64:
// 700 = 2 x 256 + 188, and 600 = 2 x 256 + 88 with two), partial 64-key blocks, one key block,
// causal with seqlen_q != seqlen_k (the diagonal's passed-over blocks shift), a right bound past
// the diagonal, a local window with softcap, GQA, varlen with seqused_k and unused k/v rows,
// strided layouts, no lse, growing scores, and enough tiles for several waves.
// Runs c with `variant` forced and checks that the API launched that kernel once (launches counts
// its launches through sm90_forward).
// repeats: as run_case's (the launch count then includes them).
void run_forced_case(const Case& c, const char* variant, int64_t (*launches)(), uint32_t seed, const char* kernel,
                     int repeats = 0) {
  SKIP_UNLESS_SM90();
  const ScopedEnv forced("FLASHATTN_SM90_VARIANT", variant);
  const int64_t before = launches();
  run_case(c, seed + uint32_t(c.name.size()), false, false, repeats);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(launches() - before, 1 + repeats) << "the API did not run the " << kernel;
}

std::vector<Case> tall_tile_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  c = make("tall_causal_700_rowless_bf16", bf, 128, 2, 700, 700, 4, 4), c.causal = true, v.push_back(c);
  c = make("tall_causal_q300_k1000_fp16", fp, 128, 1, 300, 1000, 4, 2), c.causal = true, v.push_back(c);
  c = make("tall_noncausal_q250_k777_gqa_softcap_fp16", fp, 128, 1, 250, 777, 8, 2), c.softcap = 25.0f;
  v.push_back(c);
  c = make("tall_window_softcap_q512_k700_bf16", bf, 128, 2, 512, 700, 4, 2);
  c.window_left = 100, c.window_right = 30, c.softcap = 15.0f, v.push_back(c);
  v.push_back(make("tall_one_block_q1_k50_bf16", bf, 128, 3, 1, 50, 2, 2));
  c = make("tall_varlen_causal_seqused_k_fp16", fp, 128, 0, 0, 0, 4, 2);
  c.lens_q = {129, 1, 440, 193}, c.lens_k = {129, 300, 500, 900}, c.used_k = {129, 1, 480, 800}, c.extra_k = 3;
  c.causal = true, v.push_back(c);
  c = make("tall_strided_q400_k500_bf16", bf, 128, 2, 400, 500, 2, 1), c.layout = Layout::kHeadMajor, v.push_back(c);
  c = make("tall_padded_causal_q384_k384_fp16", fp, 128, 3, 384, 384, 4, 4), c.layout = Layout::kPadded;
  c.causal = true, v.push_back(c);
  c = make("tall_no_lse_q256_k640_bf16", bf, 128, 2, 256, 640, 2, 2), c.with_lse = false, v.push_back(c);
  c = make("tall_growing_scores_causal_q600_k600_bf16", bf, 128, 1, 600, 600, 2, 2), c.causal = true;
  c.key_ramp = 6.0f, v.push_back(c);
  c = make("tall_waves_causal_q1000_k1000_bf16", bf, 128, 4, 1000, 1000, 8, 8), c.causal = true, v.push_back(c);
  // Scores that jump up mid-row (the checked max's fallback, with three warpgroups a tile).
  c = make("tall_rising_scores_causal_q700_k700_bf16", bf, 128, 1, 700, 700, 2, 2), c.causal = true;
  c.early_key_boost = 12.0f, v.push_back(c);
  c = make("tall_rising_scores_overflow_q300_k1000_fp16", fp, 128, 2, 300, 1000, 2, 1), c.early_key_boost = 64.0f;
  v.push_back(c);
  // Head dim 64: four warpgroups, 256-row tiles.
  c = make("tall_d64_causal_700_rowless_bf16", bf, 64, 2, 700, 700, 4, 4), c.causal = true, v.push_back(c);
  c = make("tall_d64_causal_600_two_rowless_fp16", fp, 64, 1, 600, 600, 4, 2), c.causal = true, v.push_back(c);
  c = make("tall_d64_causal_q300_k1000_fp16", fp, 64, 1, 300, 1000, 4, 2), c.causal = true, v.push_back(c);
  c = make("tall_d64_causal_q1000_k700_bf16", bf, 64, 1, 1000, 700, 2, 2), c.causal = true, v.push_back(c);
  c = make("tall_d64_right_bound_q512_k512_bf16", bf, 64, 2, 512, 512, 4, 4), c.window_right = 100, v.push_back(c);
  c = make("tall_d64_noncausal_q250_k777_gqa_softcap_fp16", fp, 64, 1, 250, 777, 8, 2), c.softcap = 25.0f;
  v.push_back(c);
  c = make("tall_d64_window_softcap_q512_k700_bf16", bf, 64, 2, 512, 700, 4, 2);
  c.window_left = 100, c.window_right = 30, c.softcap = 15.0f, v.push_back(c);
  v.push_back(make("tall_d64_one_block_q1_k50_fp16", fp, 64, 3, 1, 50, 2, 2));
  c = make("tall_d64_varlen_causal_seqused_k_bf16", bf, 64, 0, 0, 0, 4, 2);
  c.lens_q = {257, 1, 440, 193}, c.lens_k = {257, 300, 500, 900}, c.used_k = {257, 1, 480, 800}, c.extra_k = 3;
  c.causal = true, v.push_back(c);
  c = make("tall_d64_padded_causal_q384_k384_fp16", fp, 64, 3, 384, 384, 4, 4), c.layout = Layout::kPadded;
  c.causal = true, v.push_back(c);
  c = make("tall_d64_strided_no_lse_q400_k500_bf16", bf, 64, 2, 400, 500, 2, 1), c.layout = Layout::kHeadMajor;
  c.with_lse = false, v.push_back(c);
  c = make("tall_d64_growing_scores_causal_q600_k600_bf16", bf, 64, 1, 600, 600, 2, 2), c.causal = true;
  c.key_ramp = 6.0f, v.push_back(c);
  c = make("tall_d64_waves_causal_q1024_k1024_bf16", bf, 64, 4, 1024, 1024, 16, 16), c.causal = true, v.push_back(c);
  return v;
}

class Sm90TallTiles : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90TallTiles, MatchesReference) {
  run_forced_case(GetParam(), "tall", sm90_tall_tiles_launches, 73u, "tall-tile kernel");
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90TallTiles, ::testing::ValuesIn(tall_tile_cases()), case_name);

// Cluster pairs forced (FLASHATTN_SM90_VARIANT=cluster) at the head dim they are built for (128),
// whatever the rule says. Partial query and key tiles, GQA with softcap, strided layouts (head
// major, padded), fp16 and bf16, batch > 1, no lse, an odd number of pairs per head and in all,
// and enough tiles for several waves of the pair schedule.
std::vector<Case> cluster_pair_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  v.push_back(make("cluster_d128_q256_k1000_bf16", bf, 128, 2, 256, 1000, 4, 4));
  c = make("cluster_d128_q250_k777_gqa_softcap_fp16", fp, 128, 1, 250, 777, 8, 2), c.softcap = 25.0f, v.push_back(c);
  c = make("cluster_d128_strided_q512_k300_bf16", bf, 128, 2, 512, 300, 2, 1), c.layout = Layout::kHeadMajor;
  v.push_back(c);
  v.push_back(make("cluster_d128_waves_q1024_k256_bf16", bf, 128, 4, 1024, 256, 8, 8));
  v.push_back(make("cluster_d128_q512_k517_bf16", bf, 128, 1, 512, 517, 4, 2));
  v.push_back(make("cluster_d128_b3_q200_k64_fp16", fp, 128, 3, 200, 64, 2, 2));
  c = make("cluster_d128_padded_b2_q500_k1100_gqa_softcap_bf16", bf, 128, 2, 500, 1100, 4, 2);
  c.layout = Layout::kPadded, c.softcap = 30.0f, v.push_back(c);
  // Six tiles a head: three pairs per head, nine in all.
  v.push_back(make("cluster_d128_odd_pairs_q768_k1024_fp16", fp, 128, 1, 768, 1024, 3, 3));
  c = make("cluster_d128_no_lse_q256_k1024_bf16", bf, 128, 2, 256, 1024, 2, 2), c.with_lse = false, v.push_back(c);
  c = make("cluster_d128_padded_b3_q130_k400_fp16", fp, 128, 3, 130, 400, 4, 4), c.layout = Layout::kPadded;
  v.push_back(c);
  // 72 pairs: more than the pairs that fit on an H100 / H200 at once (66), so a second, partial wave.
  v.push_back(make("cluster_d128_waves_q512_k256_gqa_bf16", bf, 128, 4, 512, 256, 9, 3));
  // Scores that jump up mid-row, past fp32's range against the kept max (the checked max's
  // fallback, with K held in both CTAs of a pair).
  c = make("cluster_d128_rising_scores_q256_k1000_fp16", fp, 128, 2, 256, 1000, 2, 2), c.early_key_boost = 64.0f;
  v.push_back(c);
  return v;
}

class Sm90ClusterPairs : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90ClusterPairs, MatchesReference) {
  run_forced_case(GetParam(), "cluster", sm90_cluster_pairs_launches, 61u, "cluster-pair kernel");
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90ClusterPairs, ::testing::ValuesIn(cluster_pair_cases()), case_name);

// The static d128 / d256 kernels with their last partial wave split by keys in a kernel of its
// own, launched after the whole waves' (sm90/split_tail.h). FLASHATTN_SM90_SPLIT_TAIL=always
// splits problems smaller than a wave too (every tile is then in the tail, cut into two or three
// pieces, and the tail kernel runs alone); `split_rule_` cases leave the choice to the launch's
// rule (at least a wave of tiles and 8192 keys). Partial query tiles (a rowless
// warpgroup), a narrowed last key block, scores that jump up mid-row (the checked max's fallback
// inside a piece), growing scores, GQA with softcap, strided layouts, no lse, whole waves before
// the tail, and a tail of fewer units than two per CTA. Each case runs twice (the counters the
// pieces meet on must be clean again after a launch), the second three more times, bit for bit.

std::vector<Case> split_tail_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  v.push_back(make("split_d128_q1000_k1000_bf16", bf, 128, 2, 1000, 1000, 4, 4));
  c = make("split_d128_rowless_narrowed_rising_q300_k1050_fp16", fp, 128, 2, 300, 1050, 4, 2);
  c.early_key_boost = 12.0f, v.push_back(c);
  c = make("split_d128_overflow_q200_k1500_bf16", bf, 128, 2, 200, 1500, 4, 4), c.early_key_boost = 64.0f;
  v.push_back(c);
  c = make("split_d128_band_q300_k1200_bf16", bf, 128, 2, 300, 1200, 4, 2), c.early_key_boost = 64.0f;
  c.boost_from = 500, c.boost_to = 560, v.push_back(c);
  c = make("split_d128_gqa_softcap_head_major_no_lse_q640_k900_bf16", bf, 128, 1, 640, 900, 8, 2);
  c.softcap = 20.0f, c.layout = Layout::kHeadMajor, c.with_lse = false, v.push_back(c);
  c = make("split_d128_padded_waves_q512_k2048_bf16", bf, 128, 4, 512, 2048, 20, 4), c.layout = Layout::kPadded;
  v.push_back(c);
  v.push_back(make("split_d256_q700_k1500_bf16", bf, 256, 2, 700, 1500, 2, 2));
  c = make("split_d256_rowless_padded_growing_q150_k1000_fp16", fp, 256, 3, 150, 1000, 2, 1);
  c.layout = Layout::kPadded, c.key_ramp = 6.0f, v.push_back(c);
  c = make("split_d256_gqa_softcap_head_major_q256_k800_fp16", fp, 256, 2, 256, 800, 4, 2);
  c.softcap = 30.0f, c.layout = Layout::kHeadMajor, v.push_back(c);
  // 140 tiles: one wave, then 8 tiles of 18 blocks over 132 CTAs (one or two units each).
  v.push_back(make("split_d256_waves_thin_tail_q640_k1100_bf16", bf, 256, 2, 640, 1100, 14, 14));
  // 140 tiles (one a head: 65 rows, the second warpgroup's one row) of 128 blocks: one wave,
  // then 8 tiles, split by the rule itself. Few rows a tile keep the fp64 reference short.
  v.push_back(make("split_rule_d256_gqa_q65_k8192_bf16", bf, 256, 1, 65, 8192, 140, 4));
  return v;
}

// One split-tail case through `variant`'s kernel: forced to split unless its name contains
// `split_rule_` (`split_rule_...`, `cluster_split_rule_...`), where the launch's own rule decides.
void run_split_tail_case(const Case& c, const char* variant, int64_t (*launches)(), uint32_t seed0,
                         const char* kernel) {
  SKIP_UNLESS_SM90();
  const bool by_rule = c.name.find("split_rule_") != std::string::npos;
  const ScopedEnv forced("FLASHATTN_SM90_SPLIT_TAIL", by_rule ? nullptr : "always");
  // The second seed's launch is repeated: the pieces of a tile arrive in another order when the
  // timing moves, and the merge must not depend on it (it did until session 41: the harness saw
  // 1-27 words of d128 tiles change from launch to launch).
  for (uint32_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int repeats = seed == 2u ? 3 : 0;
    const int64_t before = sm90_split_tail_launches();
    run_forced_case(c, variant, launches, seed0 * seed, kernel, repeats);
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(sm90_split_tail_launches() - before, 1 + repeats) << "the launch did not split its tail";
  }
}

class Sm90SplitTail : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90SplitTail, MatchesReference) {
  run_split_tail_case(GetParam(), "static", sm90_static_schedule_launches, 89u, "static kernel");
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90SplitTail, ::testing::ValuesIn(split_tail_cases()), case_name);

// Causal tiles in groups of N (batch, head) pairs, longest first within a group
// (FLASHATTN_SM90_CAUSAL_GROUPS=N, tile_scheduler.h): sizes that leave a smaller last group, one
// larger than the heads (clamped to one group of all), and values the launch ignores (0, a word),
// on the static and dynamic schedules, 192-row tiles (d64), 64-key blocks (d256) and GQA packing.
// A tile the numbering skipped or ran twice shows as a poisoned or a wrong row.
struct GroupCase {
  Case c;
  const char* variant;  // FLASHATTN_SM90_VARIANT, or nullptr for the rule (the packed kernel)
  const char* groups;
};
void PrintTo(const GroupCase& g, std::ostream* os) {
  *os << g.c.name << " (" << (g.variant ? g.variant : "the rule's kernel") << ", groups " << g.groups << ")";
}

std::vector<GroupCase> causal_group_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<GroupCase> v;
  Case c = make("groups_d128_q700_b3_h5_bf16", bf, 128, 3, 700, 700, 5, 5);  // 15 pairs x 6 tiles
  c.causal = true;
  for (const char* g : {"2", "4", "64", "0", "many"}) v.push_back({c, "static", g});
  v.push_back({c, "default", "4"});
  c = make("groups_d64_q900_b2_h7_fp16", fp, 64, 2, 900, 900, 7, 7), c.causal = true;  // 14 pairs x 5 tiles
  v.push_back({c, "static", "3"}), v.push_back({c, "default", "3"});
  c = make("groups_d256_q500_k640_b2_h3_bf16", bf, 256, 2, 500, 640, 3, 3), c.causal = true;
  v.push_back({c, "static", "4"}), v.push_back({c, "static", "5"});
  c = make("groups_packed_d128_q40_k700_b3_bf16", bf, 128, 3, 40, 700, 8, 2), c.causal = true;  // 6 KV pairs
  v.push_back({c, nullptr, "4"});
  return v;
}

class Sm90CausalGroups : public ::testing::TestWithParam<GroupCase> {};

TEST_P(Sm90CausalGroups, MatchesReference) {
  const GroupCase& g = GetParam();
  const ScopedEnv groups("FLASHATTN_SM90_CAUSAL_GROUPS", g.groups);
  if (g.variant == nullptr) {
    run_forced_case(g.c, nullptr, sm90_pack_gqa_launches, 131u, "packed kernel");
  } else if (std::string(g.variant) == "static") {
    run_forced_case(g.c, g.variant, sm90_static_schedule_launches, 131u, "static-schedule kernel");
  } else {
    run_forced_case(g.c, g.variant, sm90_default_launches, 131u, "default kernel");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90CausalGroups, ::testing::ValuesIn(causal_group_cases()),
                         [](const ::testing::TestParamInfo<GroupCase>& info) {
                           std::string groups = info.param.groups;
                           return info.param.c.name + "_" + (info.param.variant ? info.param.variant : "rule") +
                                  "_g" + groups;
                         });

// Cluster pairs with their last, partial wave of tiles split by keys in the static kernel's tail
// kernel (launch.h, TailBaseOf). Forced: every tile in the tail (the pairs' kernel then does not
// run at all), GQA with softcap in a strided layout without lse, fp16, scores that jump up mid-row,
// and whole waves of pairs before a tail of 8 tiles (140 tiles: 66 pairs fit on an H100 / H200);
// `cluster_split_rule_`: the launch's own rule (8192 keys, more tiles than a wave of pairs).
std::vector<Case> cluster_split_tail_cases() {
  const DType bf = DType::kBFloat16, fp = DType::kFloat16;
  std::vector<Case> v;
  Case c;
  v.push_back(make("cluster_split_d128_q512_k1000_bf16", bf, 128, 2, 512, 1000, 4, 4));
  c = make("cluster_split_d128_gqa_softcap_head_major_no_lse_q256_k1100_fp16", fp, 128, 1, 256, 1100, 8, 2);
  c.softcap = 20.0f, c.layout = Layout::kHeadMajor, c.with_lse = false, v.push_back(c);
  c = make("cluster_split_d128_rising_q256_k1500_fp16", fp, 128, 2, 256, 1500, 4, 4), c.early_key_boost = 64.0f;
  v.push_back(c);
  c = make("cluster_split_d128_waves_padded_q200_k2300_bf16", bf, 128, 1, 200, 2300, 70, 14);
  c.layout = Layout::kPadded, v.push_back(c);
  v.push_back(make("cluster_split_rule_d128_q256_k8192_bf16", bf, 128, 1, 256, 8192, 70, 70));
  return v;
}

class Sm90ClusterPairsSplitTail : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90ClusterPairsSplitTail, MatchesReference) {
  run_split_tail_case(GetParam(), "cluster", sm90_cluster_pairs_launches, 97u, "cluster-pair kernel");
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm90ClusterPairsSplitTail, ::testing::ValuesIn(cluster_split_tail_cases()), case_name);

// What the cluster-pair kernel refuses, host-side (the launch checks before touching memory).
TEST(Sm90ClusterPairsRefusal, NamesWhatItNeeds) {
  SKIP_UNLESS_SM90();
  const ScopedEnv forced("FLASHATTN_SM90_VARIANT", "cluster");
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 128, p.score.scale = 0.1f, p.batch = 1, p.seqlen_q = 256, p.seqlen_k = 256;
  p.nheads_q = p.nheads_kv = 2, p.total_q = p.total_k = 256;
  const int row = 2 * 256;
  p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 256 * row, row, 256};
  p.mask.window_right = 0;
  Status s = sm90_forward(p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("unmasked"), std::string::npos) << s.message;
  p.mask.window_right = -1, p.seqlen_q = 300;
  s = sm90_forward(p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("even number"), std::string::npos) << s.message;
  p.seqlen_q = 256, p.headdim = 64;
  p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 256 * 128, 128, 64};
  s = sm90_forward(p);
  EXPECT_FALSE(s.ok());
  if (s.message.find("not built") == std::string::npos) {
    EXPECT_NE(s.message.find("head dim 128 only"), std::string::npos) << s.message;
  }
  p.headdim = 256;  // built there until session 21
  p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 256 * 512, 512, 256};
  s = sm90_forward(p);
  EXPECT_FALSE(s.ok());
  if (s.message.find("not built") == std::string::npos) {
    EXPECT_NE(s.message.find("head dim 128 only, not 256"), std::string::npos) << s.message;
  }
}

// Head dims the kernels cannot run: not a multiple of 8 (the predicated stores and the fallback's
// loads take whole pairs and 16-byte chunks), or past the largest instantiation. Unsupported,
// naming the head dim, before any memory is touched (null operands); the API then takes the sm80
// kernel. A head dim between the instantiations is taken (the Cases suite runs them) by the
// default kernel's narrow twin alone: no rule picks another kernel for it. Host code only (no
// device needed).
TEST(Sm90HeadDims, RefusesWhatItCannotRound) {
  for (int headdim : {100, 12, 264}) {
    AttentionProblem p;
    p.dtype = DType::kBFloat16, p.headdim = headdim, p.score.scale = 0.1f, p.batch = 1, p.seqlen_q = 64;
    p.seqlen_k = 64, p.nheads_q = p.nheads_kv = 1, p.total_q = p.total_k = 64;
    p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 64 * headdim, headdim, headdim};
    const Status s = sm90_supports_forward(p);
    EXPECT_FALSE(s.ok()) << "hdim " << headdim;
    EXPECT_EQ(s.code, flashattn::StatusCode::kUnsupported);
    EXPECT_NE(s.message.find("head dim"), std::string::npos) << s.message;
    EXPECT_NE(s.message.find(std::to_string(headdim)), std::string::npos) << s.message;
    EXPECT_FALSE(sm90_forward(p).ok()) << "hdim " << headdim;
  }
  // GQA head packing is instantiated at 64, 96, 128, 192 and 256 only: a head dim between them is
  // neither picked for it nor taken when forced (the API runs it on the narrow default kernel).
  AttentionProblem p;
  p.dtype = DType::kBFloat16, p.headdim = 112, p.score.scale = 0.1f, p.batch = 1, p.seqlen_q = 4;
  p.seqlen_k = 64, p.nheads_q = 8, p.nheads_kv = 2, p.total_q = 4, p.total_k = 64;
  p.q = p.out = flashattn::Operand{nullptr, 4 * 8 * 112, 8 * 112, 112};
  p.k = p.v = flashattn::Operand{nullptr, 64 * 2 * 112, 2 * 112, 112};
  if (!sm90_supports_forward(p).ok()) return;  // no bf16 instantiation holds head dim 112 in this build
  EXPECT_TRUE(sm90_runs_narrow_twin(p));
  EXPECT_FALSE(sm90_picks_pack_gqa(p));
  EXPECT_FALSE(sm90_picks_static_schedule(p, kH200TBps));
  EXPECT_FALSE(sm90_picks_short_rows(p));
  EXPECT_FALSE(sm90_picks_tall_tiles(p));
  p.seqlen_q = 256, p.seqlen_k = 4096;  // a shape the rules give the cluster pairs at head dim 128
  EXPECT_FALSE(sm90_picks_cluster_pairs(p));
  p.seqlen_q = 4, p.seqlen_k = 64;
  const Status packed = sm90_supports_forward_pack_gqa(p);
  EXPECT_FALSE(packed.ok());
  EXPECT_NE(packed.message.find("not 112"), std::string::npos) << packed.message;
  p.headdim = 128;
  p.q = p.out = flashattn::Operand{nullptr, 4 * 8 * 128, 8 * 128, 128};
  p.k = p.v = flashattn::Operand{nullptr, 64 * 2 * 128, 2 * 128, 128};
  EXPECT_TRUE(sm90_picks_pack_gqa(p));  // the same shape at an instantiated head dim
  EXPECT_FALSE(sm90_runs_narrow_twin(p));
}

// Tiles are numbered in 32 bits: a problem with more than 2^30 tiles of 64 rows (reachable only
// when q's batches or heads share memory) is Unsupported, so the API takes the sm80 kernel or
// refuses, instead of a launch whose count or indices wrap and compute nothing. Host code only.
TEST(Sm90TileCount, RefusesWhatWouldWrap) {
  for (const int64_t batch : {(int64_t(1) << 18) + 1, int64_t(1) << 18}) {
    AttentionProblem p;
    p.dtype = DType::kBFloat16, p.headdim = 128, p.score.scale = 0.1f, p.batch = int(batch), p.seqlen_q = 1;
    p.seqlen_k = 64, p.nheads_q = p.nheads_kv = 4096, p.total_q = batch, p.total_k = batch * 64;
    p.q = p.out = flashattn::Operand{nullptr, 0, 4096 * 128, 128};  // q's batches share memory
    p.k = p.v = flashattn::Operand{nullptr, 0, 4096 * 128, 128};
    const Status s = sm90_supports_forward(p);
    if (s.message.find("not built") != std::string::npos) GTEST_SKIP() << s.message;
    const bool wraps = batch * 4096 > (int64_t(1) << 30);
    SCOPED_TRACE("batch " + std::to_string(batch) + ": " + s.message);
    if (wraps) {
      EXPECT_EQ(s.code, flashattn::StatusCode::kUnsupported);
      EXPECT_NE(s.message.find("32 bits"), std::string::npos);
    } else {
      EXPECT_EQ(s.message.find("32 bits"), std::string::npos);  // whatever else it says
    }
  }
}

// Tall tiles forced at a head dim they are not built for: Unsupported, naming the head dims, before
// any memory is touched (null operands).
TEST(Sm90TallTilesRefusal, NamesTheHeadDims) {
  SKIP_UNLESS_SM90();
  const ScopedEnv forced("FLASHATTN_SM90_VARIANT", "tall");
  for (int headdim : {192, 256}) {
    AttentionProblem p;
    p.dtype = DType::kBFloat16, p.headdim = headdim, p.score.scale = 0.1f, p.batch = 1, p.seqlen_q = 256;
    p.seqlen_k = 256, p.nheads_q = p.nheads_kv = 2, p.total_q = p.total_k = 256;
    const int row = 2 * headdim;
    p.q = p.k = p.v = p.out = flashattn::Operand{nullptr, 256 * row, row, headdim};
    p.mask.window_right = 0;
    const Status s = sm90_forward(p);
    EXPECT_FALSE(s.ok()) << "hdim " << headdim;
    if (s.message.find("not built") == std::string::npos) {
      EXPECT_NE(s.message.find("head dims 64 and 128 only, not " + std::to_string(headdim)), std::string::npos)
          << s.message;
    }
  }
}

}  // namespace

#include "check_cases.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "args.h"
#include "error_metrics.h"
#include "random_normal.h"
#include "tensor.h"

namespace flashattn {
namespace cli {
namespace {

// fp32 must meet the project's 1e-5 relative L2. For fp16/bf16 the floor is the error of merely
// storing the exact answer in that dtype; a kernel computing in fp32 lands near it, one that also
// rounds P to the dtype before P V (as the GPU kernels do) within a small multiple.
constexpr double kMinTolerance = 1e-5;
constexpr double kRoundingFloorFactor = 4.0;
constexpr double kLseTolerance = 1e-3;  // absolute: the logsumexp is fp32 whatever the inputs

// q, k, v, dout as the case's dtype sees them, plus the variable-length and ALiBi side tables.
struct HostProblem {
  std::vector<int64_t> q_shape, kv_shape, lse_shape;
  std::vector<float> q, k, v, dout, slopes;
  std::vector<int32_t> cu_q, cu_k;
  int max_q = 0, max_k = 0;
};

// Every tensor of one call on one device, in one dtype.
struct Problem {
  Tensor q, k, v, out, lse, dout, dq, dk, dv, cu_q, cu_k, slopes;
};

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

HostProblem make_host_problem(const CheckCase& c, uint64_t seed) {
  HostProblem h;
  const int64_t hq = c.heads_q, hkv = c.heads_kv, d = c.headdim;
  if (c.varlen) {
    // Lengths differ per sequence, one of them shorter than a tile and one possibly empty.
    h.cu_q = {0};
    h.cu_k = {0};
    for (int b = 0; b < c.batch; ++b) {
      const int lq = std::max(0, c.seqlen_q - 61 * b), lk = std::max(1, c.seqlen_k - 37 * b);
      h.cu_q.push_back(h.cu_q.back() + lq);
      h.cu_k.push_back(h.cu_k.back() + lk);
      h.max_q = std::max(h.max_q, lq);
      h.max_k = std::max(h.max_k, lk);
    }
    h.q_shape = {h.cu_q.back(), hq, d};
    h.kv_shape = {h.cu_k.back(), hkv, d};
    h.lse_shape = {hq, h.cu_q.back()};
  } else {
    h.q_shape = {c.batch, c.seqlen_q, hq, d};
    h.kv_shape = {c.batch, c.seqlen_k, hkv, d};
    h.lse_shape = {c.batch, hq, c.seqlen_q};
  }
  h.q = round_to(random_normal(product(h.q_shape), seed), c.dtype);
  h.k = round_to(random_normal(product(h.kv_shape), seed + 1), c.dtype);
  h.v = round_to(random_normal(product(h.kv_shape), seed + 2), c.dtype);
  h.dout = round_to(random_normal(product(h.q_shape), seed + 3), c.dtype);
  if (c.alibi) {
    for (int i = 0; i < c.heads_q; ++i) h.slopes.push_back(std::exp2(-8.0f * (i + 1) / c.heads_q));
  }
  return h;
}

Problem make_problem(const HostProblem& h, Device device, DType dtype) {
  Problem p;
  p.q = Tensor(device, dtype, h.q_shape);
  p.k = Tensor(device, dtype, h.kv_shape);
  p.v = Tensor(device, dtype, h.kv_shape);
  p.dout = Tensor(device, dtype, h.q_shape);
  p.out = Tensor(device, dtype, h.q_shape);
  p.dq = Tensor(device, dtype, h.q_shape);
  p.dk = Tensor(device, dtype, h.kv_shape);
  p.dv = Tensor(device, dtype, h.kv_shape);
  p.lse = Tensor(device, DType::kFloat32, h.lse_shape);
  p.q.set(h.q);
  p.k.set(h.k);
  p.v.set(h.v);
  p.dout.set(h.dout);
  for (Tensor* t : {&p.out, &p.lse, &p.dq, &p.dk, &p.dv}) t->poison();
  if (!h.cu_q.empty()) {
    p.cu_q = Tensor(device, DType::kInt32, {static_cast<int64_t>(h.cu_q.size())});
    p.cu_k = Tensor(device, DType::kInt32, {static_cast<int64_t>(h.cu_k.size())});
    p.cu_q.set_raw(h.cu_q.data());
    p.cu_k.set_raw(h.cu_k.data());
  }
  if (!h.slopes.empty()) {
    p.slopes = Tensor(device, DType::kFloat32, {static_cast<int64_t>(h.slopes.size())});
    p.slopes.set(h.slopes);
  }
  return p;
}

AttentionParams make_params(const CheckCase& c, const HostProblem& h, const Problem& p, Backend backend,
                            int threads) {
  AttentionParams a;
  a.softmax_scale = c.softmax_scale;
  a.causal = c.causal;
  a.window_left = c.window_left;
  a.window_right = c.window_right;
  a.softcap = c.softcap;
  a.deterministic = c.deterministic;
  a.backend = backend;
  a.num_threads = threads;
  if (c.alibi) a.alibi_slopes = p.slopes.view();
  if (c.varlen) {
    a.cu_seqlens_q = p.cu_q.view();
    a.cu_seqlens_k = p.cu_k.view();
    a.max_seqlen_q = h.max_q;
    a.max_seqlen_k = h.max_k;
  }
  return a;
}

Status run_forward(Problem& p, const AttentionParams& a) {
  ForwardArgs f;
  f.q = p.q.view();
  f.k = p.k.view();
  f.v = p.v.view();
  f.out = p.out.view();
  f.lse = p.lse.view();
  return forward(f, a);
}

Status run_backward(Problem& p, const AttentionParams& a) {
  BackwardArgs b;
  b.q = p.q.view();
  b.k = p.k.view();
  b.v = p.v.view();
  b.out = p.out.view();
  b.lse = p.lse.view();
  b.dout = p.dout.view();
  b.dq = p.dq.view();
  b.dk = p.dk.view();
  b.dv = p.dv.view();
  return backward(b, a);
}

CheckOutcome compare(const char* name, const std::vector<float>& got, const std::vector<float>& want, DType dtype) {
  CheckOutcome o;
  o.tensor = name;
  o.tolerance = std::max(kMinTolerance, kRoundingFloorFactor * relative_l2(round_to(want, dtype), want));
  o.error = relative_l2(got, want);
  o.passed = o.error <= o.tolerance;  // false for NaN
  if (!o.passed) o.note = std::isnan(o.error) ? "NaN in the result (a store was missed)" : "error above tolerance";
  return o;
}

// A row that sees no key must give lse = -inf on both sides; elsewhere the values must agree.
CheckOutcome compare_lse(const std::vector<float>& got, const std::vector<float>& want) {
  CheckOutcome o;
  o.tensor = "lse";
  o.tolerance = kLseTolerance;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool want_inf = std::isinf(want[i]), got_inf = std::isinf(got[i]) && got[i] < 0;
    if (want_inf != got_inf || std::isnan(got[i])) {
      o.error = INFINITY;
      o.note = "row " + std::to_string(i) + ": lse " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
      return o;
    }
    if (!want_inf) o.error = std::max(o.error, static_cast<double>(std::fabs(got[i] - want[i])));
  }
  o.passed = o.error <= o.tolerance;
  if (!o.passed) o.note = "largest difference above tolerance";
  return o;
}

CheckOutcome refused(const char* tensor, const Status& s) {
  CheckOutcome o;
  o.tensor = tensor;
  o.skipped = s.code == StatusCode::kUnsupported;
  o.note = s.message;
  return o;
}

void require(const Status& s, const CheckCase& c, const char* what) {
  if (!s.ok()) throw std::runtime_error("reference " + std::string(what) + " failed on " + c.label() + ": " + s.message);
}

CheckCase make_case(const char* name, DType dtype, int b, int hq, int hkv, int sq, int sk, int d) {
  CheckCase c;
  c.name = name;
  c.dtype = dtype;
  c.batch = b;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  c.headdim = d;
  return c;
}

}  // namespace

std::string CheckCase::label() const {
  std::ostringstream os;
  os << name << " " << short_dtype_name(dtype) << " b" << batch << " h" << heads_q << "/" << heads_kv << " "
     << seqlen_q << "x" << seqlen_k << " d" << headdim;
  return os.str();
}

std::vector<CheckCase> check_cases(const std::vector<DType>& dtypes) {
  std::vector<CheckCase> cases;
  for (DType t : dtypes) {
    cases.push_back(make_case("plain", t, 2, 4, 4, 128, 128, 64));
    cases.push_back(make_case("ragged", t, 1, 2, 2, 203, 317, 40));
    CheckCase c = make_case("causal", t, 2, 3, 3, 150, 150, 128);
    c.causal = true;
    cases.push_back(c);
    c = make_case("causal-q>k", t, 1, 2, 2, 300, 120, 64);  // leading rows see no key
    c.causal = true;
    cases.push_back(c);
    c = make_case("causal-q<k", t, 2, 2, 2, 77, 250, 96);
    c.causal = true;
    cases.push_back(c);
    c = make_case("window", t, 2, 4, 4, 200, 200, 64);
    c.window_left = 48;
    c.window_right = 16;
    cases.push_back(c);
    c = make_case("gqa-causal", t, 2, 8, 2, 160, 190, 64);
    c.causal = true;
    cases.push_back(c);
    cases.push_back(make_case("mqa", t, 1, 6, 1, 130, 130, 32));
    c = make_case("varlen-causal", t, 3, 4, 4, 180, 220, 64);
    c.varlen = true;
    c.causal = true;
    cases.push_back(c);
    c = make_case("softcap", t, 2, 2, 2, 120, 140, 128);
    c.softcap = 5.0f;
    c.softmax_scale = 1.0f;  // logits ~ sqrt(d) so the cap bends them
    cases.push_back(c);
    c = make_case("alibi-causal", t, 2, 4, 4, 150, 150, 64);
    c.alibi = true;
    c.causal = true;
    cases.push_back(c);
    c = make_case("everything", t, 3, 8, 2, 170, 200, 128);
    c.varlen = true;
    c.window_left = 64;
    c.window_right = 0;
    c.softcap = 20.0f;
    c.alibi = true;
    c.deterministic = true;
    cases.push_back(c);
  }
  return cases;
}

std::vector<CheckOutcome> run_check_case(const CheckCase& c, Backend backend, int threads) {
  const HostProblem host = make_host_problem(c, std::hash<std::string>{}(c.label()));
  Problem ref = make_problem(host, Device::kCPU, DType::kFloat32);
  const AttentionParams ref_params = make_params(c, host, ref, Backend::kCPUReference, threads);
  require(run_forward(ref, ref_params), c, "forward");
  require(run_backward(ref, ref_params), c, "backward");

  const Device device = backend == Backend::kCUDA ? Device::kCUDA : Device::kCPU;
  Problem dut = make_problem(host, device, c.dtype);
  const AttentionParams params = make_params(c, host, dut, backend, threads);
  std::vector<CheckOutcome> outcomes;
  Status s = run_forward(dut, params);
  if (!s.ok()) return {refused("forward", s)};
  outcomes.push_back(compare("out", dut.out.get(), ref.out.get(), c.dtype));
  outcomes.push_back(compare_lse(dut.lse.get(), ref.lse.get()));
  s = run_backward(dut, params);
  if (!s.ok()) {
    outcomes.push_back(refused("backward", s));
    return outcomes;
  }
  outcomes.push_back(compare("dq", dut.dq.get(), ref.dq.get(), c.dtype));
  outcomes.push_back(compare("dk", dut.dk.get(), ref.dk.get(), c.dtype));
  outcomes.push_back(compare("dv", dut.dv.get(), ref.dv.get(), c.dtype));
  return outcomes;
}

}  // namespace cli
}  // namespace flashattn

#include "workload.h"

#include <map>
#include <utility>
#include <vector>

#include "random_normal.h"

namespace flashattn {
namespace cli {
namespace {

enum Role { kQuery = 0, kKey = 1, kValue = 2, kOutputGrad = 3 };

// Random inputs already encoded in the element type, one pool per role, grown to the largest
// tensor asked for. Drawing 4 x 33M normals per GPU shape would take longer than the kernels;
// drawing once and reusing the prefix keeps every tensor independent N(0, 1) data.
const std::vector<uint8_t>& random_bytes(Role role, DType dtype, int64_t count) {
  static std::map<std::pair<int, int>, std::pair<int64_t, std::vector<uint8_t>>> pools;
  auto& pool = pools[{role, static_cast<int>(dtype)}];
  if (pool.first < count) {
    pool.second = encode(random_normal(count, 1000 + role), dtype);
    pool.first = count;
  }
  return pool.second;
}

void fill(Tensor& t, Role role) { t.set_raw(random_bytes(role, t.dtype(), t.numel()).data()); }

}  // namespace

Workload::Workload(const BenchShape& s, DType dtype, Device device, bool with_backward) : shape_(s), dtype_(dtype) {
  q = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_q, s.headdim});
  k = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_kv, s.headdim});
  v = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_kv, s.headdim});
  out = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_q, s.headdim});
  lse = Tensor(device, DType::kFloat32, {s.batch, s.heads_q, s.seqlen});
  fill(q, kQuery);
  fill(k, kKey);
  fill(v, kValue);
  if (with_backward) {
    dout = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_q, s.headdim});
    dq = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_q, s.headdim});
    dk = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_kv, s.headdim});
    dv = Tensor(device, dtype, {s.batch, s.seqlen, s.heads_kv, s.headdim});
    fill(dout, kOutputGrad);
  }
}

Status Workload::forward(const AttentionParams& params) {
  ForwardArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  a.lse = lse.view();
  return flashattn::forward(a, params);
}

Status Workload::backward(const AttentionParams& params) {
  BackwardArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  a.dout = dout.view();
  a.lse = lse.view();
  a.dq = dq.view();
  a.dk = dk.view();
  a.dv = dv.view();
  return flashattn::backward(a, params);
}

void Workload::poison_forward_outputs() {
  out.poison();
  lse.poison();
}

void Workload::poison_backward_outputs() {
  dq.poison();
  dk.poison();
  dv.poison();
}

}  // namespace cli
}  // namespace flashattn

#include "gpu/sm80_device_run.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

#include "common/checks.h"

namespace fa_test {
namespace {

using flashattn::BackwardArgs;
using flashattn::ForwardArgs;

// Device copy of one host tensor's whole storage.
class DeviceCopy {
 public:
  explicit DeviceCopy(const HostTensor& t) : host_(t) {
    if (!t.defined() || t.storage_bytes() == 0) return;
    if (cudaMalloc(&ptr_, t.storage_bytes()) != cudaSuccess ||
        cudaMemcpy(ptr_, t.storage(), t.storage_bytes(), cudaMemcpyHostToDevice) != cudaSuccess) {
      ADD_FAILURE() << "could not copy a tensor to the device";
    }
  }
  ~DeviceCopy() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;

  TensorView view() const { return host_.defined() ? host_.view_at(ptr_, Device::kCUDA) : TensorView{}; }
  // Copies the host tensor's storage (for outputs: the poison) to the device again.
  void upload() {
    if (ptr_ && cudaMemcpy(ptr_, host_.storage(), host_.storage_bytes(), cudaMemcpyHostToDevice) != cudaSuccess) {
      ADD_FAILURE() << "could not copy a tensor to the device";
    }
  }
  void copy_back() {
    if (ptr_ && cudaMemcpy(host_.storage(), ptr_, host_.storage_bytes(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      ADD_FAILURE() << "could not copy a tensor back from the device";
    }
  }

 private:
  HostTensor host_;
  void* ptr_ = nullptr;
};

struct DeviceParams {
  DeviceCopy alibi, cu_q, cu_k, used_q, used_k;
  flashattn::AttentionParams params;
  explicit DeviceParams(const AttnCase& c)
      : alibi(c.alibi_slopes),
        cu_q(c.cu_seqlens_q),
        cu_k(c.cu_seqlens_k),
        used_q(c.seqused_q),
        used_k(c.seqused_k),
        params(c.params(Backend::kCUDA)) {
    if (c.alibi_slopes.defined()) params.alibi_slopes = alibi.view();
    if (c.seqused_q.defined()) params.seqused_q = used_q.view();
    if (c.seqused_k.defined()) params.seqused_k = used_k.view();
    if (c.spec.varlen()) {
      params.cu_seqlens_q = cu_q.view();
      params.cu_seqlens_k = cu_k.view();
    }
  }
};

Status synchronized(Status s) {
  const cudaError_t err = cudaDeviceSynchronize();
  if (s.ok() && err != cudaSuccess) return Status::Runtime(std::string("after the call: ") + cudaGetErrorString(err));
  return s;
}

Status cuda_status(const char* what, cudaError_t err) {
  return err == cudaSuccess ? Status::Ok() : Status::Runtime(std::string(what) + ": " + cudaGetErrorString(err));
}

// The host callback holding a stream (CallMode::returned_while_held): it waits for `released`,
// giving up after 2 s so that a call which waits for the device returns (late) rather than hangs.
struct StreamHold {
  std::atomic<bool> released{false};
  bool timed_out = false;
  static void CUDART_CB wait(void* self) {
    auto* hold = static_cast<StreamHold*>(self);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!hold->released.load()) {
      if (std::chrono::steady_clock::now() > give_up) {
        hold->timed_out = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
};

template <typename Call>
Status run_held(CallMode mode, Call&& call) {
  cudaStream_t stream = nullptr;
  Status s = cuda_status("cudaStreamCreate", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!s.ok()) return s;
  StreamHold hold;
  s = cuda_status("cudaLaunchHostFunc", cudaLaunchHostFunc(stream, &StreamHold::wait, &hold));
  if (s.ok()) s = call(stream);
  hold.released = true;
  const Status done = cuda_status("after the held call", cudaStreamSynchronize(stream));
  *mode.returned_while_held = !hold.timed_out;
  cudaStreamDestroy(stream);
  return synchronized(s.ok() ? done : s);
}

// Runs `call(stream)` as CallMode says; `poison_outputs` re-poisons the outputs before each replay.
template <typename Call, typename Poison>
Status run_call(CallMode mode, Call&& call, Poison&& poison_outputs) {
  if (mode.returned_while_held != nullptr) return run_held(mode, call);
  if (mode.graph_replays <= 0) return synchronized(call(nullptr));
  cudaStream_t stream = nullptr;
  Status s = cuda_status("cudaStreamCreate", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!s.ok()) return s;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  s = cuda_status("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  if (s.ok()) {
    const Status called = call(stream);
    const Status ended = cuda_status("cudaStreamEndCapture", cudaStreamEndCapture(stream, &graph));
    s = called.ok() ? ended : called;
  }
  if (s.ok()) s = cuda_status("cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; s.ok() && r < mode.graph_replays; ++r) {
    poison_outputs();
    s = cuda_status("cudaGraphLaunch", cudaGraphLaunch(exec, stream));
    if (s.ok()) s = cuda_status("replay", cudaStreamSynchronize(stream));
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return synchronized(s);
}

// The forward on keys and values k_host / v_host: the case's own, or pages read through `table`
// (AttentionParams::block_table; undefined: not paged) with cu_k_host for cu_seqlens_k where
// defined (paged varlen: lengths only).
ForwardResult forward_on_device(const AttnCase& c, const HostTensor& k_host, const HostTensor& v_host,
                                const HostTensor& table_host, const HostTensor& cu_k_host, bool with_lse,
                                CallMode mode) {
  ForwardResult r;
  r.out = HostTensor(c.spec.dtype, c.out_shape(), c.spec.pad);
  r.out.poison();
  if (with_lse) {
    r.lse = HostTensor(DType::kFloat32, c.lse_shape(), c.spec.pad);
    r.lse.poison();
  }
  DeviceCopy q(c.q), k(k_host), v(v_host), table(table_host), cu_k(cu_k_host), out(r.out), lse(r.lse);
  DeviceParams dp(c);
  if (table_host.defined()) dp.params.block_table = table.view();
  if (cu_k_host.defined()) dp.params.cu_seqlens_k = cu_k.view();
  ForwardArgs args;
  args.q = q.view();
  args.k = k.view();
  args.v = v.view();
  args.out = out.view();
  if (with_lse) args.lse = lse.view();
  r.status = run_call(
      mode,
      [&](void* stream) {
        dp.params.stream = stream;
        dp.params.indices_checked = mode.indices_checked;
        if (mode.derive_max_seqlen) dp.params.max_seqlen_q = dp.params.max_seqlen_k = 0;
        return flashattn::forward(args, dp.params);
      },
      [&] {
        out.upload();
        lse.upload();
      });
  out.copy_back();
  lse.copy_back();
  return r;
}

}  // namespace

ForwardResult gpu_forward(const AttnCase& c, bool with_lse, CallMode mode) {
  return forward_on_device(c, c.k, c.v, HostTensor{}, HostTensor{}, with_lse, mode);
}

ForwardResult gpu_paged_forward(const AttnCase& c, const PagedKV& pages, CallMode mode) {
  return forward_on_device(c, pages.k, pages.v, pages.block_table, pages.cu_seqlens_k, true, mode);
}

BackwardResult gpu_backward(const AttnCase& c, const ForwardResult& fwd, CallMode mode) {
  BackwardResult r;
  r.dq = HostTensor(c.spec.dtype, c.q.shape(), c.spec.pad);
  r.dk = HostTensor(c.spec.dtype, c.k.shape(), c.spec.pad);
  r.dv = HostTensor(c.spec.dtype, c.v.shape(), c.spec.pad);
  r.dq.poison();
  r.dk.poison();
  r.dv.poison();
  DeviceCopy q(c.q), k(c.k), v(c.v), out(fwd.out), dout(c.dout), lse(fwd.lse), dq(r.dq), dk(r.dk), dv(r.dv);
  DeviceParams dp(c);
  BackwardArgs args;
  args.q = q.view();
  args.k = k.view();
  args.v = v.view();
  args.out = out.view();
  args.dout = dout.view();
  args.lse = lse.view();
  args.dq = dq.view();
  args.dk = dk.view();
  args.dv = dv.view();
  r.status = run_call(
      mode,
      [&](void* stream) {
        dp.params.stream = stream;
        return flashattn::backward(args, dp.params);
      },
      [&] {
        dq.upload();
        dk.upload();
        dv.upload();
      });
  dq.copy_back();
  dk.copy_back();
  dv.copy_back();
  return r;
}

Reference reference(const AttnCase& c, bool with_backward) {
  const AttnCase c32 = convert_case(c, DType::kFloat32);
  Reference ref;
  ref.fwd = run_forward(c32, Backend::kCPUReference);
  if (with_backward) ref.bwd = run_backward(c32, Backend::kCPUReference, ref.fwd);
  return ref;
}

::testing::AssertionResult within_twice_naive(const AttnCase& c, const Reference& ref, const ForwardResult& fwd,
                                              const BackwardResult* bwd) {
  using Role = AttnCase::Role;
  ::testing::AssertionResult written = forward_written(c, fwd);
  if (!written) return written;
  if (bwd) {
    written = backward_written(c, *bwd);
    if (!written) return written;
  }
  if (!ref.fwd.status.ok()) return ::testing::AssertionFailure() << "oracle failed: " << ref.fwd.status.message;
  auto used = [&](const HostTensor& t, Role r) { return c.used_part(t, r); };

  // A fixed bound first: one unit of relative rounding of the format (bf16 2^-8 ~ 3.9e-3, fp16
  // 2^-11 ~ 4.9e-4), what rounding P and the outputs once adds to fp32 arithmetic, and 2.5-4x
  // tighter than the usual ~1e-2 / ~2e-3 tolerances for these formats. A case above it (softcap's
  // extra factor, cancelling gradients) falls back to the twice-naive rule, which pays for the
  // naive baseline.
  {
    const double bound = c.spec.dtype == DType::kBFloat16 ? 4e-3 : 5e-4;
    std::ostringstream quick;
    bool within = true;
    auto note = [&](const char* name, double e, double b) {
      quick << name << " " << e << " ";
      within = within && e <= b;
    };
    note("out", rel_l2(used(fwd.out, Role::kQ), used(ref.fwd.out, Role::kQ)), bound);
    if (fwd.lse.defined()) note("lse", lse_error(used(fwd.lse, Role::kLse), used(ref.fwd.lse, Role::kLse)), 1e-5);
    if (bwd) {
      note("dq", rel_l2(used(bwd->dq, Role::kQ), used(ref.bwd.dq, Role::kQ)), bound);
      note("dk", rel_l2(used(bwd->dk, Role::kK), used(ref.bwd.dk, Role::kK)), bound);
      note("dv", rel_l2(used(bwd->dv, Role::kK), used(ref.bwd.dv, Role::kK)), bound);
    }
    if (within) return ::testing::AssertionSuccess() << quick.str() << "(within the fixed bound " << bound << ")";
  }

  const NaiveResult naive = naive_attention(c, c.spec.dtype, bwd != nullptr);
  // Float32-level floor for cases where the naive computation happens to be exact.
  const double floor = 1e-4;
  std::ostringstream os;
  bool ok = true;
  auto check = [&](const char* name, double got, double base) {
    os << name << " " << got << " (naive " << base << ") ";
    if (!(got <= 2 * base + floor)) ok = false;
  };
  check("out", rel_l2(used(fwd.out, Role::kQ), used(ref.fwd.out, Role::kQ)),
        rel_l2(used(naive.out, Role::kQ), used(ref.fwd.out, Role::kQ)));
  if (fwd.lse.defined()) {
    check("lse", lse_error(used(fwd.lse, Role::kLse), used(ref.fwd.lse, Role::kLse)),
          lse_error(used(naive.lse, Role::kLse), used(ref.fwd.lse, Role::kLse)));
  }
  if (bwd) {
    const NaiveResult mag = naive_attention(convert_case(c, DType::kFloat32), DType::kFloat32, false, true);
    const struct {
      const char* name;
      const HostTensor &got, &want, &base, &scale;
      Role role;
    } grads[] = {{"dq", bwd->dq, ref.bwd.dq, naive.dq, mag.dq_mag, Role::kQ},
                 {"dk", bwd->dk, ref.bwd.dk, naive.dk, mag.dk_mag, Role::kK},
                 {"dv", bwd->dv, ref.bwd.dv, naive.dv, mag.dv_mag, Role::kK}};
    for (const auto& g : grads) {
      check(g.name, rel_l2_or_magnitude(used(g.got, g.role), used(g.want, g.role), used(g.scale, g.role)),
            rel_l2_or_magnitude(used(g.base, g.role), used(g.want, g.role), used(g.scale, g.role)));
    }
  }
  if (ok) return ::testing::AssertionSuccess() << os.str();
  return ::testing::AssertionFailure() << os.str();
}

void expect_paged_forward_matches(const AttnCase& c, const PagedKV& pages, CallMode mode) {
  const Reference ref = reference(c, false);
  const ForwardResult f = gpu_paged_forward(c, pages, mode);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  const ::testing::AssertionResult close = within_twice_naive(c, ref, f, nullptr);
  EXPECT_TRUE(close);
  std::printf("  errors vs fp64: %s\n", close.message());
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.storage_bytes() == b.storage_bytes() && std::memcmp(a.storage(), b.storage(), a.storage_bytes()) == 0;
}

std::vector<OptionParam> option_params(int count, const std::vector<int>& headdims) {
  std::vector<OptionParam> v;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int headdim : headdims) {
      for (int i = 0; i < count; ++i) v.emplace_back(dtype, headdim, i);
    }
  }
  return v;
}

std::string option_param_name(const CaseOption* options, const OptionParam& param) {
  return std::string(options[std::get<2>(param)].name) + "_" + dtype_str(std::get<0>(param)) + "_d" +
         std::to_string(std::get<1>(param));
}

}  // namespace fa_test

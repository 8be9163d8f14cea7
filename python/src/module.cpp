// The flashattn._C extension: forward() and backward() over DLPack arrays. The caller allocates
// every output; the call runs without the GIL on the stream the caller passes.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "convert.h"
#include "flashattn/flashattn.h"

namespace nb = nanobind;
using namespace nb::literals;
using flashattn_py::InArray;
using flashattn_py::OutArray;
using flashattn_py::to_view;

namespace {

using OptIn = std::optional<InArray>;
using OptOut = std::optional<OutArray>;

// Options shared by forward and backward, in the order Python passes them.
flashattn::AttentionParams make_params(const OptIn& cu_seqlens_q, const OptIn& cu_seqlens_k, int max_seqlen_q,
                                       int max_seqlen_k, float softmax_scale, bool causal,
                                       std::pair<int, int> window, float softcap, const OptIn& alibi_slopes,
                                       bool deterministic, flashattn::Backend backend, int num_threads,
                                       uintptr_t stream) {
  flashattn::AttentionParams p;
  p.cu_seqlens_q = to_view("cu_seqlens_q", cu_seqlens_q);
  p.cu_seqlens_k = to_view("cu_seqlens_k", cu_seqlens_k);
  p.max_seqlen_q = max_seqlen_q;
  p.max_seqlen_k = max_seqlen_k;
  p.softmax_scale = softmax_scale;
  p.causal = causal;
  p.window_left = window.first;
  p.window_right = window.second;
  p.softcap = softcap;
  p.alibi_slopes = to_view("alibi_slopes", alibi_slopes);
  p.deterministic = deterministic;
  p.backend = backend;
  p.num_threads = num_threads;
  p.stream = reinterpret_cast<void*>(stream);
  return p;
}

void forward(const InArray& q, const InArray& k, const InArray& v, const OutArray& out, const OptOut& lse,
             const OptIn& cu_seqlens_q, const OptIn& cu_seqlens_k, int max_seqlen_q, int max_seqlen_k,
             float softmax_scale, bool causal, std::pair<int, int> window, float softcap,
             const OptIn& alibi_slopes, flashattn::Backend backend, int num_threads, uintptr_t stream) {
  flashattn::ForwardArgs args;
  args.q = to_view("q", q);
  args.k = to_view("k", k);
  args.v = to_view("v", v);
  args.out = to_view("out", out);
  args.lse = to_view("lse", lse);
  const flashattn::AttentionParams params =
      make_params(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window, softcap,
                  alibi_slopes, false, backend, num_threads, stream);
  flashattn::Status status;
  {
    nb::gil_scoped_release release;
    status = flashattn::forward(args, params);
  }
  flashattn_py::raise_if_error(status);
}

void backward(const InArray& dout, const InArray& q, const InArray& k, const InArray& v, const InArray& out,
              const InArray& lse, const OutArray& dq, const OutArray& dk, const OutArray& dv,
              const OptIn& cu_seqlens_q, const OptIn& cu_seqlens_k, int max_seqlen_q, int max_seqlen_k,
              float softmax_scale, bool causal, std::pair<int, int> window, float softcap,
              const OptIn& alibi_slopes, bool deterministic, flashattn::Backend backend, int num_threads,
              uintptr_t stream) {
  flashattn::BackwardArgs args;
  args.dout = to_view("dout", dout);
  args.q = to_view("q", q);
  args.k = to_view("k", k);
  args.v = to_view("v", v);
  args.out = to_view("out", out);
  args.lse = to_view("lse", lse);
  args.dq = to_view("dq", dq);
  args.dk = to_view("dk", dk);
  args.dv = to_view("dv", dv);
  const flashattn::AttentionParams params =
      make_params(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window, softcap,
                  alibi_slopes, deterministic, backend, num_threads, stream);
  flashattn::Status status;
  {
    nb::gil_scoped_release release;
    status = flashattn::backward(args, params);
  }
  flashattn_py::raise_if_error(status);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "Bindings of the flashattn C++ library; use the flashattn package, not this module.";

  nb::enum_<flashattn::Backend>(m, "Backend")
      .value("auto", flashattn::Backend::kAuto)
      .value("cpu", flashattn::Backend::kCPU)
      .value("cpu_reference", flashattn::Backend::kCPUReference)
      .value("cuda", flashattn::Backend::kCUDA);

  m.def("forward", &forward, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), nb::kw_only(),
        "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0,
        "max_seqlen_k"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false,
        "window"_a = std::make_pair(-1, -1), "softcap"_a = 0.0f, "alibi_slopes"_a.none() = nb::none(),
        "backend"_a = flashattn::Backend::kAuto, "num_threads"_a = 0, "stream"_a = 0,
        "Writes attention of q, k, v into out (and the row logsumexp into lse when given).");

  m.def("backward", &backward, "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a, "dk"_a, "dv"_a,
        nb::kw_only(), "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(),
        "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false,
        "window"_a = std::make_pair(-1, -1), "softcap"_a = 0.0f, "alibi_slopes"_a.none() = nb::none(),
        "deterministic"_a = false, "backend"_a = flashattn::Backend::kAuto, "num_threads"_a = 0,
        "stream"_a = 0, "Writes the gradients of q, k, v into dq, dk, dv.");

  m.def("cuda_available", &flashattn::cuda_available, "True when this build has a CUDA backend and a GPU.");
  m.def("backend_name", &flashattn::backend_name, "backend"_a);
}

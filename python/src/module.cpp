// The flashattn._C extension: forward() and backward() over DLPack arrays. The caller allocates
// every output; the call runs without the GIL on the stream the caller passes.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#ifdef FLASHATTN_PY_CUDA
#include <cuda_runtime_api.h>
#endif

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
flashattn::AttentionParams make_params(const OptIn& cu_seqlens_q, const OptIn& cu_seqlens_k, const OptIn& seqused_q,
                                       const OptIn& seqused_k, int max_seqlen_q,
                                       int max_seqlen_k, float softmax_scale, bool causal,
                                       std::pair<int, int> window, float softcap, const OptIn& alibi_slopes,
                                       bool deterministic, flashattn::Backend backend, int num_threads,
                                       uintptr_t stream) {
  flashattn::AttentionParams p;
  p.cu_seqlens_q = to_view("cu_seqlens_q", cu_seqlens_q);
  p.cu_seqlens_k = to_view("cu_seqlens_k", cu_seqlens_k);
  p.seqused_q = to_view("seqused_q", seqused_q);
  p.seqused_k = to_view("seqused_k", seqused_k);
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
             const OptIn& cu_seqlens_q, const OptIn& cu_seqlens_k, const OptIn& seqused_q, const OptIn& seqused_k,
             int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal, std::pair<int, int> window,
             float softcap, const OptIn& alibi_slopes, flashattn::Backend backend, int num_threads,
             uintptr_t stream, int num_splits, const OptIn& block_table, bool indices_checked) {
  flashattn::ForwardArgs args;
  args.q = to_view("q", q);
  args.k = to_view("k", k);
  args.v = to_view("v", v);
  args.out = to_view("out", out);
  args.lse = to_view("lse", lse);
  flashattn::AttentionParams params =
      make_params(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window, softcap,
                  alibi_slopes, false, backend, num_threads, stream);
  params.num_splits = num_splits;
  params.block_table = to_view("block_table", block_table);
  params.indices_checked = indices_checked;
  flashattn::Status status;
  {
    nb::gil_scoped_release release;
    status = flashattn::forward(args, params);
  }
  flashattn_py::raise_if_error(status);
}

void backward(const InArray& dout, const InArray& q, const InArray& k, const InArray& v, const InArray& out,
              const InArray& lse, const OutArray& dq, const OutArray& dk, const OutArray& dv,
              const OptIn& cu_seqlens_q, const OptIn& cu_seqlens_k, const OptIn& seqused_q,
              const OptIn& seqused_k, int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal,
              std::pair<int, int> window, float softcap, const OptIn& alibi_slopes, bool deterministic,
              flashattn::Backend backend, int num_threads, uintptr_t stream) {
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
      make_params(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window, softcap,
                  alibi_slopes, deterministic, backend, num_threads, stream);
  flashattn::Status status;
  {
    nb::gil_scoped_release release;
    status = flashattn::backward(args, params);
  }
  flashattn_py::raise_if_error(status);
}

// ---- Buffers owned by the extension, for array libraries that cannot be written into (JAX) ----------

nb::dlpack::dtype dtype_named(const std::string& name) {
  if (name == "float32") return nb::dtype<float>();
  if (name == "float16") return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
  if (name == "bfloat16") return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  throw nb::type_error(("empty(): dtype '" + name + "' is not supported; expected float32, float16 or bfloat16").c_str());
}

#ifdef FLASHATTN_PY_CUDA
void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    PyErr_SetString(PyExc_RuntimeError, (std::string(what) + ": " + cudaGetErrorString(err)).c_str());
    throw nb::python_error();
  }
}

// Makes `device` current for its lifetime and puts the previous device back.
struct DeviceGuard {
  int previous = 0;
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous); }
};
#endif

// An uninitialised C-contiguous array of `shape` on the CPU (device_type 1) or a CUDA device (2),
// freed when the last DLPack consumer lets go of it.
nb::ndarray<nb::array_api> empty(const std::vector<size_t>& shape, const std::string& dtype, int device_type, int device_id) {
  const nb::dlpack::dtype dt = dtype_named(dtype);
  size_t bytes = dt.bits / 8;
  for (size_t extent : shape) bytes *= extent;
  bytes = bytes ? bytes : 1;
  void* data = nullptr;
  nb::capsule owner;
  if (device_type == nb::device::cpu::value) {
    // 64 bytes: what the SIMD kernels like and what zero-copy DLPack importers (XLA) require.
    data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data) throw std::bad_alloc();
    owner = nb::capsule(data, [](void* p) noexcept { std::free(p); });
  } else if (device_type == nb::device::cuda::value) {
#ifdef FLASHATTN_PY_CUDA
    DeviceGuard guard(device_id);
    check_cuda(cudaMalloc(&data, bytes), "cudaMalloc");
    owner = nb::capsule(data, [](void* p) noexcept { cudaFree(p); });
#else
    throw nb::value_error("empty(): this flashattn build has no CUDA backend");
#endif
  } else {
    throw nb::value_error(("empty(): DLPack device type " + std::to_string(device_type) +
                           " is not supported; expected 1 (CPU) or 2 (CUDA)").c_str());
  }
  return nb::ndarray<nb::array_api>(data, shape.size(), shape.data(), owner, nullptr, dt, device_type, device_id);
}

// Waits until the work queued on `stream` (0: the legacy default stream) of `device_id` is done.
void synchronize(int device_id, uintptr_t stream) {
#ifdef FLASHATTN_PY_CUDA
  nb::gil_scoped_release release;
  DeviceGuard guard(device_id);
  check_cuda(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
#else
  (void)device_id;
  (void)stream;
#endif
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
        "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(),
        "seqused_q"_a.none() = nb::none(), "seqused_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0,
        "max_seqlen_k"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false,
        "window"_a = std::make_pair(-1, -1), "softcap"_a = 0.0f, "alibi_slopes"_a.none() = nb::none(),
        "backend"_a = flashattn::Backend::kAuto, "num_threads"_a = 0, "stream"_a = 0, "num_splits"_a = 0,
        "block_table"_a.none() = nb::none(), "indices_checked"_a = false,
        "Writes attention of q, k, v into out (and the row logsumexp into lse when given); with "
        "block_table, k and v are pages (num_pages, page_size, nheads_kv, headdim); indices_checked: "
        "the GPU seqused and block_table entries were checked by the caller (none read back).");

  m.def("backward", &backward, "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a, "dk"_a, "dv"_a,
        nb::kw_only(), "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(),
        "seqused_q"_a.none() = nb::none(), "seqused_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false,
        "window"_a = std::make_pair(-1, -1), "softcap"_a = 0.0f, "alibi_slopes"_a.none() = nb::none(),
        "deterministic"_a = false, "backend"_a = flashattn::Backend::kAuto, "num_threads"_a = 0,
        "stream"_a = 0, "Writes the gradients of q, k, v into dq, dk, dv.");

  m.def("empty", &empty, "shape"_a, "dtype"_a, "device_type"_a, "device_id"_a = 0,
        "An uninitialised writable array (float32/float16/bfloat16) on the CPU or a CUDA device, "
        "exported through DLPack and freed when its last consumer releases it.");
  m.def("synchronize", &synchronize, "device_id"_a, "stream"_a,
        "Blocks until the work queued on a CUDA stream of a device has finished (no-op without CUDA).");
  // kvcache.py checks num_splits against it before any tensor is made.
  m.attr("max_num_splits") = flashattn::kMaxNumSplits;
  m.def("cuda_available", &flashattn::cuda_available, "True when this build has a CUDA backend and a GPU.");
  m.def("backend_name", &flashattn::backend_name, "backend"_a);
}

// The CUDA runtime layer: device queries, pointer checks, and the choice between kernel sets
// (sm90 FlashAttention-3 forward where it supports the options, else the sm80 kernels;
// FLASHATTN_CUDA_KERNELS=sm80 in the environment keeps the sm80 forward on Hopper too).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "backends.h"
#include "cuda/kernel_sets.h"

namespace flashattn {
namespace {

Status cuda_error(const char* what, cudaError_t err) {
  return Status::Runtime(std::string(what) + ": " + cudaGetErrorString(err));
}

int device_major(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return 0;
  return major;
}

// FLASHATTN_CUDA_KERNELS=sm80 keeps the sm80 forward on Hopper too (to test or time it there).
bool sm90_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("FLASHATTN_CUDA_KERNELS");
    return v == nullptr || std::string(v) != "sm80";
  }();
  return allowed;
}

bool use_sm90(const AttentionProblem& p) {
#if defined(FLASHATTN_WITH_SM90)
  return sm90_allowed() && device_major(p.device_index) == 9 && sm90_supports_forward(p).ok();
#else
  (void)p;
  return false;
#endif
}

Status require_sm80(const AttentionProblem& p) {
  if (device_major(p.device_index) < 8) {
    return Status::Unsupported("the CUDA kernels need compute capability 8.0 or newer; device " +
                               std::to_string(p.device_index) + " is older");
  }
#if defined(FLASHATTN_WITH_SM80)
  return Status::Ok();
#else
  return Status::Unsupported("this build has no sm80 kernels (FLASHATTN_CUDA_ARCHS lacks 80)");
#endif
}

// Runs `fn` with the problem's device current, restoring the caller's device afterwards.
template <typename Fn>
Status on_device(const AttentionProblem& p, Fn&& fn) {
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err != cudaSuccess) return cuda_error("cudaGetDevice", err);
  if (previous != p.device_index && (err = cudaSetDevice(p.device_index)) != cudaSuccess) {
    return cuda_error("cudaSetDevice", err);
  }
  Status s = fn();
  if (previous != p.device_index) cudaSetDevice(previous);
  return s;
}

}  // namespace

bool cuda_backend_compiled() { return true; }

bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Status cuda_pointer_device(const void* ptr, Device* device, int* device_index) {
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an unknown host pointer is not an error worth keeping
    *device = Device::kCPU;
    *device_index = 0;
    return Status::Ok();
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    *device = Device::kCUDA;
    *device_index = attr.device;
  } else {
    *device = Device::kCPU;
    *device_index = 0;
  }
  return Status::Ok();
}

Status cuda_copy_to_host(const void* device_ptr, void* host_ptr, size_t bytes, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaMemcpyAsync(host_ptr, device_ptr, bytes, cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  return err == cudaSuccess ? Status::Ok() : cuda_error("copying cu_seqlens to the host", err);
}

bool cuda_stream_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

Status cuda_supports_forward(const AttentionProblem& p) {
  if (!cuda_device_present()) return Status::Unsupported("no CUDA device is present");
  if (use_sm90(p)) return Status::Ok();
  Status s = require_sm80(p);
  if (!s.ok()) return s;
#if defined(FLASHATTN_WITH_SM80)
  return sm80_supports_forward(p);
#else
  return s;
#endif
}

Status cuda_supports_backward(const AttentionProblem& p) {
  if (!cuda_device_present()) return Status::Unsupported("no CUDA device is present");
  Status s = require_sm80(p);
  if (!s.ok()) return s;
#if defined(FLASHATTN_WITH_SM80)
  return sm80_supports_backward(p);
#else
  return s;
#endif
}

Status cuda_forward(const AttentionProblem& p) {
  return on_device(p, [&]() -> Status {
#if defined(FLASHATTN_WITH_SM90)
    if (use_sm90(p)) return sm90_forward(p);
#endif
#if defined(FLASHATTN_WITH_SM80)
    return sm80_forward(p);
#else
    return Status::Unsupported("this build has no sm80 kernels");
#endif
  });
}

// The sm90 backward runs where it supports the problem and sm90_picks_backward's rule takes it
// (head dims 64, 128 and 256, where it beats the sm80 backward, docs/perf.md).
// FLASHATTN_SM90_BACKWARD (read at every call, so a benchmark can time both in one process)
// overrides the rule: 0 never, 1 wherever supported. FLASHATTN_CUDA_KERNELS=sm80 keeps the sm80
// backward too.
bool use_sm90_backward(const AttentionProblem& p) {
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_WITH_SM80)
  if (!sm90_allowed() || device_major(p.device_index) != 9) return false;
  const char* v = std::getenv("FLASHATTN_SM90_BACKWARD");
  const std::string forced = v == nullptr ? "" : v;
  if (forced == "0") return false;
  if (forced != "1" && !sm90_picks_backward(p)) return false;
  return sm90_supports_backward(p).ok();
#else
  (void)p;
  return false;
#endif
}

Status cuda_backward(const AttentionProblem& p) {
  return on_device(p, [&]() -> Status {
#if defined(FLASHATTN_WITH_SM90) && defined(FLASHATTN_WITH_SM80)
    if (use_sm90_backward(p)) return sm90_backward(p);
#endif
#if defined(FLASHATTN_WITH_SM80)
    return sm80_backward(p);
#else
    return Status::Unsupported("this build has no sm80 kernels");
#endif
  });
}

}  // namespace flashattn

// Host side of the split tail (split_tail.h) and the key splits (split_keys.h): their workspace,
// one per (device, stream), and their launch counts.
#include "cuda/sm90/split_tail.h"
#include "cuda/sm90/split_keys.h"

#include "cuda/sm90/kernel_choice.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace flashattn {
namespace sm90 {
namespace {

std::atomic<int64_t> g_split_tail_launches{0};
std::atomic<int64_t> g_key_split_launches{0};
std::atomic<int64_t> g_split_combine_launches{0};

struct Workspace {
  void* base = nullptr;
  size_t counter_bytes = 0, slot_bytes = 0;
};

Status runtime_error(const char* what, cudaError_t err) {
  return Status::Runtime(std::string(what) + ": " + cudaGetErrorString(err));
}

// A workspace holds its counters first, rounded up so that the slots start 256-byte aligned.
size_t counters_span(size_t counter_bytes) { return (counter_bytes + 255) / 256 * 256; }

}  // namespace

CapturedWorkspaces::~CapturedWorkspaces() {
  // This free's error only: the launch has returned its own.
  if (count_ > 0 && !free_after_launch().ok()) cudaGetLastError();
}

Status CapturedWorkspaces::free_after_launch() {
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < count_; ++i) {
    const cudaError_t e = cudaFreeAsync(blocks_[i], static_cast<cudaStream_t>(stream_));
    if (err == cudaSuccess) err = e;
  }
  count_ = 0;
  if (err != cudaSuccess) return runtime_error("freeing a captured split workspace", err);
  return Status::Ok();
}

Status CapturedWorkspaces::allocate(void* stream, size_t bytes, void** base) {
  *base = nullptr;
  if (count_ == 2 || (count_ > 0 && stream != stream_)) {
    return Status::Runtime("internal: a launch asked for a third captured workspace or a second stream");
  }
  const cudaError_t err = cudaMallocAsync(base, bytes, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) return runtime_error("allocating a split workspace inside the captured graph", err);
  stream_ = stream;
  blocks_[count_++] = *base;
  return Status::Ok();
}

Status split_tail_workspace(int device, void* stream, size_t counter_bytes, size_t slot_bytes,
                            CapturedWorkspaces& captured, int** counters, float** slots) {
  *counters = nullptr;
  *slots = nullptr;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(s, &capture);
  if (err != cudaSuccess) return runtime_error("cudaStreamIsCapturing", err);
  if (capture != cudaStreamCaptureStatusNone) {
    // Memory nodes need stream-ordered allocation; where the device lacks it, or the caller
    // turned it off (FLASHATTN_SM90_CAPTURED_SPLITS=0: graphs that must nest as child graphs or be
    // instantiated twice at once, which memory nodes forbid), the launch runs unsplit.
    int pools = 0;
    err = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    if (err != cudaSuccess) return runtime_error("cudaDeviceGetAttribute", err);
    const char* allowed = std::getenv("FLASHATTN_SM90_CAPTURED_SPLITS");
    if (pools == 0 || (allowed != nullptr && std::strcmp(allowed, "0") == 0)) return Status::Ok();
    const size_t counters_rounded = counters_span(counter_bytes);
    void* base = nullptr;
    Status a = captured.allocate(stream, counters_rounded + slot_bytes, &base);
    if (!a.ok()) return a;
    err = cudaMemsetAsync(base, 0, counters_rounded, s);
    if (err != cudaSuccess) return runtime_error("zeroing a captured split workspace's counters", err);
    *counters = static_cast<int*>(base);
    *slots = reinterpret_cast<float*>(static_cast<char*>(base) + counters_rounded);
    return Status::Ok();
  }

  static std::mutex mutex;
  static std::map<std::pair<int, void*>, Workspace> workspaces;
  std::lock_guard<std::mutex> lock(mutex);
  Workspace& w = workspaces[{device, stream}];
  if (w.base == nullptr || w.counter_bytes < counter_bytes || w.slot_bytes < slot_bytes) {
    if (w.base != nullptr) {
      // Earlier launches on this stream may still read it.
      err = cudaStreamSynchronize(s);
      if (err == cudaSuccess) err = cudaFree(w.base);
      if (err != cudaSuccess) return runtime_error("freeing the split tail's workspace", err);
      w.base = nullptr;
    }
    const size_t counters_rounded = counters_span(std::max(counter_bytes, w.counter_bytes));
    const size_t slots_size = std::max(slot_bytes, w.slot_bytes);
    err = cudaMalloc(&w.base, counters_rounded + slots_size);
    if (err != cudaSuccess) return runtime_error("allocating the split tail's workspace", err);
    err = cudaMemsetAsync(w.base, 0, counters_rounded, s);
    if (err != cudaSuccess) return runtime_error("zeroing the split tail's counters", err);
    w.counter_bytes = counters_rounded;
    w.slot_bytes = slots_size;
  }
  *counters = static_cast<int*>(w.base);
  *slots = reinterpret_cast<float*>(static_cast<char*>(w.base) + w.counter_bytes);
  return Status::Ok();
}

void count_split_tail_launch() { g_split_tail_launches.fetch_add(1, std::memory_order_relaxed); }
void count_key_split_launch() { g_key_split_launches.fetch_add(1, std::memory_order_relaxed); }
void count_split_combine_launch() { g_split_combine_launches.fetch_add(1, std::memory_order_relaxed); }

}  // namespace sm90

int64_t sm90_split_tail_launches() { return sm90::g_split_tail_launches.load(std::memory_order_relaxed); }
int64_t sm90_key_split_launches() { return sm90::g_key_split_launches.load(std::memory_order_relaxed); }
int64_t sm90_split_combine_launches() { return sm90::g_split_combine_launches.load(std::memory_order_relaxed); }

}  // namespace flashattn

#include "device_buffer.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#if defined(FLASHATTN_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace flashattn {
namespace cli {
namespace {

// A cache line, so that SIMD loads of a row start aligned; aligned_alloc wants the size rounded up to it.
constexpr size_t kHostAlignment = 64;

#if defined(FLASHATTN_WITH_CUDA)
void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
#else
[[noreturn]] void no_cuda() {
  throw std::runtime_error("GPU memory requested but this build of flashattn has no CUDA runtime");
}
#endif

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

DeviceBuffer::DeviceBuffer(Device device, size_t bytes) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device == Device::kCPU) {
    data_ = std::aligned_alloc(kHostAlignment, (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment);
    if (data_ == nullptr) throw std::bad_alloc();
    return;
  }
#if defined(FLASHATTN_WITH_CUDA)
  cuda_check(cudaMalloc(&data_, bytes), "cudaMalloc");
#else
  no_cuda();
#endif
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    bytes_ = other.bytes_;
    device_ = other.device_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() {
  if (data_ == nullptr) return;
  if (device_ == Device::kCPU) {
    std::free(data_);
  } else {
#if defined(FLASHATTN_WITH_CUDA)
    cudaFree(data_);
#endif
  }
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) throw std::out_of_range("DeviceBuffer::upload past the end");
  if (bytes == 0) return;
  char* dst = static_cast<char*>(data_) + offset;
  if (device_ == Device::kCPU) {
    std::memcpy(dst, host, bytes);
    return;
  }
#if defined(FLASHATTN_WITH_CUDA)
  cuda_check(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
#else
  no_cuda();
#endif
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) throw std::out_of_range("DeviceBuffer::download past the end");
  if (bytes == 0) return;
  const char* src = static_cast<const char*>(data_) + offset;
  if (device_ == Device::kCPU) {
    std::memcpy(host, src, bytes);
    return;
  }
#if defined(FLASHATTN_WITH_CUDA)
  cuda_check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
#else
  no_cuda();
#endif
}

void DeviceBuffer::poison() {
  if (bytes_ == 0) return;
  if (device_ == Device::kCPU) {
    std::memset(data_, 0xFF, bytes_);
    return;
  }
#if defined(FLASHATTN_WITH_CUDA)
  cuda_check(cudaMemset(data_, 0xFF, bytes_), "cudaMemset");
#else
  no_cuda();
#endif
}

Stopwatch::Stopwatch(Device device) : device_(device) {
#if defined(FLASHATTN_WITH_CUDA)
  if (device_ == Device::kCUDA) {
    cudaEvent_t a, b;
    cuda_check(cudaEventCreate(&a), "cudaEventCreate");
    cuda_check(cudaEventCreate(&b), "cudaEventCreate");
    start_event_ = a;
    stop_event_ = b;
  }
#endif
}

Stopwatch::~Stopwatch() {
#if defined(FLASHATTN_WITH_CUDA)
  if (start_event_) cudaEventDestroy(static_cast<cudaEvent_t>(start_event_));
  if (stop_event_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_event_));
#endif
}

void Stopwatch::start() {
#if defined(FLASHATTN_WITH_CUDA)
  if (device_ == Device::kCUDA) {
    cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(start_event_), nullptr), "cudaEventRecord");
    return;
  }
#endif
  start_s_ = now_s();
}

double Stopwatch::stop_ms() {
#if defined(FLASHATTN_WITH_CUDA)
  if (device_ == Device::kCUDA) {
    auto stop = static_cast<cudaEvent_t>(stop_event_);
    cuda_check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    cuda_check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_event_), stop), "cudaEventElapsedTime");
    return ms;
  }
#endif
  return (now_s() - start_s_) * 1e3;
}

std::string gpu_name() {
#if defined(FLASHATTN_WITH_CUDA)
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) return prop.name;
  cudaGetLastError();
#endif
  return "";
}

}  // namespace cli
}  // namespace flashattn

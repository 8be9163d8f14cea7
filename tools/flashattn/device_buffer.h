// Memory for one tensor on the host or on the GPU, and a stopwatch that times work on the same
// device. The CUDA runtime is used only in builds that define FLASHATTN_WITH_CUDA; elsewhere asking
// for GPU memory throws.
#pragma once

#include <cstddef>
#include <string>

#include "flashattn/types.h"

namespace flashattn {
namespace cli {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  // All bytes 0xFF: a NaN in fp32, fp16 and bf16, so a kernel that skips a store is caught.
  void poison();

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::kCPU;
};

// Wall time on the CPU; CUDA events on the default stream for the GPU, so only device work counts.
class Stopwatch {
 public:
  explicit Stopwatch(Device device);
  ~Stopwatch();
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;
  void start();
  double stop_ms();  // waits for the device

 private:
  Device device_;
  double start_s_ = 0.0;
  void* start_event_ = nullptr;
  void* stop_event_ = nullptr;
};

// Name of GPU 0, or "" without CUDA.
std::string gpu_name();

}  // namespace cli
}  // namespace flashattn

// A tensor the tool owns: shape, element type and a buffer on the host or the GPU, with
// conversions from and to float32 on the host side.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "device_buffer.h"
#include "flashattn/types.h"

namespace flashattn {
namespace cli {

class Tensor {
 public:
  Tensor() = default;
  Tensor(Device device, DType dtype, std::vector<int64_t> shape);
  Tensor(Device device, DType dtype, std::initializer_list<int64_t> shape)
      : Tensor(device, dtype, std::vector<int64_t>(shape)) {}

  TensorView view() const;
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  DeviceBuffer& buffer() { return buffer_; }

  // values.size() must equal numel(); each value is rounded to the element type.
  void set(const std::vector<float>& values);
  // The raw bytes already in the element type (numel() elements).
  void set_raw(const void* data);
  std::vector<float> get() const;
  // Elements [first, first + count) of the flattened tensor as float32.
  std::vector<float> get_range(int64_t first, int64_t count) const;
  void poison() { buffer_.poison(); }

 private:
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kFloat32;
  Device device_ = Device::kCPU;
  int64_t numel_ = 0;
  DeviceBuffer buffer_;
};

// Storage bytes of float values in `dtype` (rounded to nearest even).
std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype);
std::vector<float> decode(const void* data, int64_t count, DType dtype);
// Each value rounded to `dtype` and back, as a kernel reading that dtype would see it.
std::vector<float> round_to(const std::vector<float>& values, DType dtype);

}  // namespace cli
}  // namespace flashattn

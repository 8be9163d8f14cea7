#include "tensor.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "cpu/convert.h"

namespace flashattn {
namespace cli {

Tensor::Tensor(Device device, DType dtype, std::vector<int64_t> shape)
    : shape_(std::move(shape)), dtype_(dtype), device_(device) {
  numel_ = 1;
  for (int64_t s : shape_) numel_ *= s;
  buffer_ = DeviceBuffer(device, static_cast<size_t>(numel_) * dtype_size(dtype));
}

TensorView Tensor::view() const {
  TensorView v;
  v.data = buffer_.data();
  v.dtype = dtype_;
  v.device = device_;
  v.ndim = static_cast<int>(shape_.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape_[d];
    v.stride[d] = stride;
    stride *= shape_[d];
  }
  return v;
}

void Tensor::set(const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != numel_) throw std::invalid_argument("Tensor::set: size mismatch");
  const std::vector<uint8_t> bytes = encode(values, dtype_);
  buffer_.upload(bytes.data(), bytes.size());
}

void Tensor::set_raw(const void* data) { buffer_.upload(data, buffer_.bytes()); }

std::vector<float> Tensor::get() const { return get_range(0, numel_); }

std::vector<float> Tensor::get_range(int64_t first, int64_t count) const {
  const size_t esize = static_cast<size_t>(dtype_size(dtype_));
  std::vector<uint8_t> bytes(static_cast<size_t>(count) * esize);
  buffer_.download(bytes.data(), bytes.size(), static_cast<size_t>(first) * esize);
  return decode(bytes.data(), count, dtype_);
}

std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * static_cast<size_t>(dtype_size(dtype)));
  if (dtype == DType::kFloat32) {
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  auto* half = reinterpret_cast<uint16_t*>(out.data());
  for (size_t i = 0; i < values.size(); ++i) {
    half[i] = dtype == DType::kBFloat16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
  }
  return out;
}

std::vector<float> decode(const void* data, int64_t count, DType dtype) {
  std::vector<float> out(static_cast<size_t>(count));
  if (dtype == DType::kFloat32) {
    std::memcpy(out.data(), data, out.size() * sizeof(float));
    return out;
  }
  const auto* half = static_cast<const uint16_t*>(data);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = dtype == DType::kBFloat16 ? bf16_to_float(half[i]) : fp16_to_float(half[i]);
  }
  return out;
}

std::vector<float> round_to(const std::vector<float>& values, DType dtype) {
  const std::vector<uint8_t> bytes = encode(values, dtype);
  return decode(bytes.data(), static_cast<int64_t>(values.size()), dtype);
}

}  // namespace cli
}  // namespace flashattn

// Plain data types of the public API: tensors as views, statuses as values.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace flashattn {

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kInt32 = 3 };
enum class Device : int { kCPU = 0, kCUDA = 1 };

const char* dtype_name(DType dtype);
int dtype_size(DType dtype);

// A strided view of memory the caller owns. Shapes and strides count elements.
struct TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Device device = Device::kCPU;
  int device_index = 0;
  int ndim = 0;  // 0: absent (an optional argument not given); at most kMaxDims
  int64_t shape[kMaxDims] = {0, 0, 0, 0};
  int64_t stride[kMaxDims] = {0, 0, 0, 0};

  bool defined() const { return ndim > 0; }
  int64_t numel() const;  // INT64_MAX where the count does not fit in 64 bits
  bool is_contiguous() const;
};

// A contiguous row-major view over `data`.
TensorView make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       Device device = Device::kCPU, int device_index = 0);

enum class StatusCode : int { kOk = 0, kInvalidArgument = 1, kUnsupported = 2, kRuntimeError = 3 };

struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;

  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
  static Status Invalid(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status Unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
  static Status Runtime(std::string msg) { return {StatusCode::kRuntimeError, std::move(msg)}; }
};

}  // namespace flashattn

#include "flashattn/flashattn.h"

#include <cstdint>

namespace flashattn {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
  }
  return "unknown";
}

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt32: return 4;
  }
  return 0;
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kCPU: return "cpu";
    case Backend::kCPUReference: return "cpu-reference";
    case Backend::kCUDA: return "cuda";
  }
  return "unknown";
}

// Saturated where the count does not fit: a count that wrapped (to 0, say) would pass a huge view
// off as an empty one.
int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 0) return 0;
    if (__builtin_mul_overflow(n, shape[d], &n)) n = INT64_MAX;
  }
  return ndim > 0 ? n : 0;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

TensorView make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device,
                       int device_index) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.device_index = device_index;
  t.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (int64_t s : shape) t.shape[d++] = s;
  // Row-major strides wrap (without undefined behaviour) for shapes past 2^63 elements, which
  // the API refuses by their count.
  uint64_t stride = 1;
  for (d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = static_cast<int64_t>(stride);
    stride *= static_cast<uint64_t>(t.shape[d]);
  }
  return t;
}

}  // namespace flashattn

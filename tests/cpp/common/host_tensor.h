// Host-side tensors for the tests: storage in the tensor's own dtype, any strides, values read and
// written as float. Written independently of src/ (no library headers beyond the public API) so
// that a bug in the library's conversions cannot hide itself in the tests.
//
//   HostTensor t(DType::kFloat16, {B, S, H, D}, /*pad=*/8);  // every stride but the last padded by 8
//   t.set(i, x);  t.get(i);       // i is the logical row-major index; set() rounds to the dtype
//   t.view();                     // a flashattn::TensorView over the host memory
//   t.view_at(dev_ptr, Device::kCUDA);   // the same layout over a copy of storage() elsewhere
//   t.poison();  t.count_nonfinite();  t.padding_intact();   // catch unwritten / stray writes
// Copies share storage, like views; converted() makes a fresh contiguous tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace fa_test {

using flashattn::Device;
using flashattn::DType;
using flashattn::TensorView;

// Rounding to the 16-bit formats, to nearest with ties to even, overflow to infinity.
float round_fp16(float x);
float round_bf16(float x);
float round_to_dtype(DType dtype, float x);  // identity for float32 and int32

// Bit encodings of values that are already representable in the format.
uint16_t encode_fp16(float representable);
float decode_fp16(uint16_t bits);
uint16_t encode_bf16(float representable);
float decode_bf16(uint16_t bits);

const char* dtype_str(DType dtype);

class HostTensor {
 public:
  HostTensor() = default;
  // Row-major shape. Every stride except the last is the natural one plus `pad` elements, so a
  // pad > 0 gives padded rows, padded heads and gaps between batches at once.
  HostTensor(DType dtype, std::vector<int64_t> shape, int64_t pad = 0);
  // Explicit strides over a fresh allocation of `storage_elems` elements.
  static HostTensor strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                            int64_t storage_elems);
  // A view of part of `base`'s storage (shared, not copied): element offset plus shape and strides.
  static HostTensor alias(const HostTensor& base, int64_t offset, std::vector<int64_t> shape,
                          std::vector<int64_t> strides);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int d) const { return shape_[static_cast<size_t>(d)]; }
  int64_t stride(int d) const { return stride_[static_cast<size_t>(d)]; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;

  // Storage offset (in elements, from storage()) of logical row-major index `linear`.
  int64_t storage_index(int64_t linear) const;
  float get(int64_t linear) const;
  void set(int64_t linear, float value);
  // Logical values in row-major order.
  std::vector<float> to_float() const;
  void from_float(const std::vector<float>& values);

  TensorView view() const;
  TensorView view_at(void* storage_base, Device device, int device_index = 0) const;
  void* storage() const { return storage_.get(); }
  int64_t storage_elems() const { return storage_elems_; }
  size_t storage_bytes() const;
  int64_t offset() const { return offset_; }

  // Fills all of the storage, padding included, with all-ones bytes (NaN in every float dtype).
  void poison();
  int64_t count_nonfinite() const;
  // True when no storage element outside this view changed since poison().
  bool padding_intact() const;
  // A contiguous copy in `dtype`, values rounded to it.
  HostTensor converted(DType dtype) const;
  std::string shape_str() const;

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_, stride_;
  int64_t offset_ = 0;
  int64_t storage_elems_ = 0;
  std::shared_ptr<unsigned char> storage_;
};

// A 1-D int32 tensor holding `values`.
HostTensor int32_tensor(const std::vector<int32_t>& values);

}  // namespace fa_test

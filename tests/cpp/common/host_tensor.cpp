#include "common/host_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>

namespace fa_test {
namespace {

// Rounds |x| to a binary format with `mantissa_bits` stored bits whose smallest normal exponent
// is `min_exp`, using a double so that the quantum division is exact; ties go to even because
// nearbyint follows the default rounding mode.
float round_format(float x, int mantissa_bits, int min_exp, double overflow_at) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0f) return x;
  const double a = std::fabs(static_cast<double>(x));
  int e = 0;
  std::frexp(a, &e);
  const int exp = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, exp - mantissa_bits);
  const double r = std::nearbyint(a / quantum) * quantum;
  if (r >= overflow_at) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return static_cast<float>(std::copysign(r, static_cast<double>(x)));
}

int element_size(DType dtype) {
  return (dtype == DType::kFloat16 || dtype == DType::kBFloat16) ? 2 : 4;
}

struct AlignedFree {
  void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

std::shared_ptr<unsigned char> allocate(size_t bytes) {
  // 64 bytes of slack: a zero-sized tensor still gets a distinct, aligned, non-null pointer.
  auto* p = static_cast<unsigned char*>(::operator new[](bytes + 64, std::align_val_t(64)));
  std::memset(p, 0, bytes + 64);
  return std::shared_ptr<unsigned char>(p, AlignedFree());
}

}  // namespace

float round_fp16(float x) { return round_format(x, 10, -14, 65520.0); }
float round_bf16(float x) { return round_format(x, 7, -126, std::ldexp(2.0 - std::ldexp(1.0, -8), 127)); }

float round_to_dtype(DType dtype, float x) {
  switch (dtype) {
    case DType::kFloat16: return round_fp16(x);
    case DType::kBFloat16: return round_bf16(x);
    default: return x;
  }
}

uint16_t encode_fp16(float v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(v));
  if (std::isnan(v)) return 0x7e00;
  if (std::isinf(v)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a / std::ldexp(1.0, -24));
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const auto exp_field = static_cast<uint16_t>(e - 1 + 15);
  const auto mant = static_cast<uint16_t>((m * 2.0 - 1.0) * 1024.0);
  return sign | static_cast<uint16_t>(exp_field << 10) | mant;
}

float decode_fp16(uint16_t bits) {
  const int exp_field = (bits >> 10) & 0x1f;
  const int mant = bits & 0x3ff;
  double mag;
  if (exp_field == 0x1f) {
    mag = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp_field == 0) {
    mag = std::ldexp(static_cast<double>(mant), -24);
  } else {
    mag = std::ldexp(1.0 + mant / 1024.0, exp_field - 15);
  }
  return static_cast<float>((bits & 0x8000) ? -mag : mag);
}

uint16_t encode_bf16(float v) {
  if (std::isnan(v)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

float decode_bf16(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

const char* dtype_str(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kInt32: return "int32";
  }
  return "?";
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape, int64_t pad) {
  dtype_ = dtype;
  shape_ = std::move(shape);
  stride_.assign(shape_.size(), 1);
  for (int d = ndim() - 2; d >= 0; --d) stride_[d] = stride_[d + 1] * shape_[d + 1] + pad;
  storage_elems_ = ndim() == 0 ? 0 : (shape_[0] == 0 ? 0 : stride_[0] * shape_[0]);
  if (numel() == 0) storage_elems_ = 0;
  storage_ = allocate(static_cast<size_t>(storage_elems_) * element_size(dtype_));
}

HostTensor HostTensor::strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                               int64_t storage_elems) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.stride_ = std::move(strides);
  t.storage_elems_ = storage_elems;
  t.storage_ = allocate(static_cast<size_t>(storage_elems) * element_size(dtype));
  return t;
}

HostTensor HostTensor::alias(const HostTensor& base, int64_t offset, std::vector<int64_t> shape,
                             std::vector<int64_t> strides) {
  HostTensor t = base;
  t.offset_ = base.offset_ + offset;
  t.shape_ = std::move(shape);
  t.stride_ = std::move(strides);
  return t;
}

int64_t HostTensor::numel() const {
  if (shape_.empty()) return 0;
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

int64_t HostTensor::storage_index(int64_t linear) const {
  int64_t idx = offset_;
  for (int d = ndim() - 1; d >= 0; --d) {
    idx += (linear % shape_[d]) * stride_[d];
    linear /= shape_[d];
  }
  return idx;
}

float HostTensor::get(int64_t linear) const {
  const int64_t i = storage_index(linear);
  const unsigned char* base = storage_.get();
  switch (dtype_) {
    case DType::kFloat16: return decode_fp16(reinterpret_cast<const uint16_t*>(base)[i]);
    case DType::kBFloat16: return decode_bf16(reinterpret_cast<const uint16_t*>(base)[i]);
    case DType::kInt32: return static_cast<float>(reinterpret_cast<const int32_t*>(base)[i]);
    case DType::kFloat32: break;
  }
  return reinterpret_cast<const float*>(base)[i];
}

void HostTensor::set(int64_t linear, float value) {
  const int64_t i = storage_index(linear);
  unsigned char* base = storage_.get();
  switch (dtype_) {
    case DType::kFloat16: reinterpret_cast<uint16_t*>(base)[i] = encode_fp16(round_fp16(value)); break;
    case DType::kBFloat16: reinterpret_cast<uint16_t*>(base)[i] = encode_bf16(round_bf16(value)); break;
    case DType::kInt32: reinterpret_cast<int32_t*>(base)[i] = static_cast<int32_t>(value); break;
    case DType::kFloat32: reinterpret_cast<float*>(base)[i] = value; break;
  }
}

std::vector<float> HostTensor::to_float() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = get(i);
  return out;
}

void HostTensor::from_float(const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != numel()) throw std::invalid_argument("from_float: size mismatch");
  for (int64_t i = 0; i < numel(); ++i) set(i, values[static_cast<size_t>(i)]);
}

TensorView HostTensor::view() const { return view_at(storage_.get(), Device::kCPU, 0); }

TensorView HostTensor::view_at(void* storage_base, Device device, int device_index) const {
  TensorView t;
  t.data = static_cast<unsigned char*>(storage_base) + offset_ * element_size(dtype_);
  t.dtype = dtype_;
  t.device = device;
  t.device_index = device_index;
  t.ndim = ndim();
  for (int d = 0; d < ndim(); ++d) {
    t.shape[d] = shape_[d];
    t.stride[d] = stride_[d];
  }
  return t;
}

size_t HostTensor::storage_bytes() const { return static_cast<size_t>(storage_elems_) * element_size(dtype_); }

void HostTensor::poison() { std::memset(storage_.get(), 0xff, storage_bytes()); }

int64_t HostTensor::count_nonfinite() const {
  int64_t n = 0;
  for (int64_t i = 0; i < numel(); ++i) n += std::isfinite(get(i)) ? 0 : 1;
  return n;
}

bool HostTensor::padding_intact() const {
  std::vector<bool> in_view(static_cast<size_t>(storage_elems_), false);
  for (int64_t i = 0; i < numel(); ++i) in_view[static_cast<size_t>(storage_index(i))] = true;
  const int es = element_size(dtype_);
  for (int64_t e = 0; e < storage_elems_; ++e) {
    if (in_view[static_cast<size_t>(e)]) continue;
    for (int byte = 0; byte < es; ++byte) {
      if (storage_.get()[e * es + byte] != 0xff) return false;
    }
  }
  return true;
}

HostTensor HostTensor::converted(DType dtype) const {
  HostTensor t(dtype, shape_);
  for (int64_t i = 0; i < numel(); ++i) t.set(i, get(i));
  return t;
}

std::string HostTensor::shape_str() const {
  std::ostringstream os;
  os << dtype_str(dtype_) << "(";
  for (int d = 0; d < ndim(); ++d) os << (d ? "," : "") << shape_[d];
  os << ")";
  return os.str();
}

HostTensor int32_tensor(const std::vector<int32_t>& values) {
  HostTensor t(DType::kInt32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<float>(values[i]));
  return t;
}

}  // namespace fa_test

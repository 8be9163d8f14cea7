#include "convert.h"

#include <string>

namespace flashattn_py {
namespace {

using flashattn::Device;
using flashattn::DType;
using flashattn::TensorView;
namespace dl = nb::dlpack;

std::string describe_dtype(dl::dtype t) {
  const char* kind = "unknown";
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Int: kind = "int"; break;
    case dl::dtype_code::UInt: kind = "uint"; break;
    case dl::dtype_code::Float: kind = "float"; break;
    case dl::dtype_code::Bfloat: kind = "bfloat"; break;
    case dl::dtype_code::Complex: kind = "complex"; break;
    case dl::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  return std::string(kind) + std::to_string(t.bits);
}

// What a refused dtype should have been, by argument: the library's own checks say the same once
// the array is a view, but a dtype with no DType (int64, float64) stops here first.
std::string expected_dtypes(const std::string& arg) {
  if (arg == "block_table" || arg.rfind("cu_seqlens", 0) == 0 || arg.rfind("seqused", 0) == 0) {
    return "expected int32 (indices)";
  }
  if (arg == "alibi_slopes" || arg == "lse") return "expected float32";
  return "expected float16, bfloat16 or float32";
}

DType to_dtype(const char* arg, dl::dtype t) {
  if (t.lanes == 1) {
    if (t == nb::dtype<float>()) return DType::kFloat32;
    if (t == nb::dtype<int32_t>()) return DType::kInt32;
    if (t.code == static_cast<uint8_t>(dl::dtype_code::Float) && t.bits == 16) return DType::kFloat16;
    if (t.code == static_cast<uint8_t>(dl::dtype_code::Bfloat) && t.bits == 16) return DType::kBFloat16;
  }
  throw nb::type_error((std::string("argument '") + arg + "': dtype " + describe_dtype(t) + " is not supported; " +
                        expected_dtypes(arg))
                           .c_str());
}

Device to_device(const char* arg, int device_type) {
  // Pinned host memory is ordinary CPU memory to the CPU backend.
  if (device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value) return Device::kCPU;
  if (device_type == nb::device::cuda::value) return Device::kCUDA;
  throw nb::value_error((std::string("argument '") + arg + "': DLPack device type " + std::to_string(device_type) +
                         " is not supported; expected a CPU or CUDA array")
                            .c_str());
}

template <typename Array>
TensorView view_of(const char* arg, const Array& a, void* data) {
  if (a.ndim() < 1 || a.ndim() > TensorView::kMaxDims) {
    throw nb::value_error((std::string("argument '") + arg + "': has " + std::to_string(a.ndim()) +
                           " dimensions; expected 1 to " + std::to_string(TensorView::kMaxDims))
                              .c_str());
  }
  TensorView v;
  v.data = data;
  v.dtype = to_dtype(arg, a.dtype());
  v.device = to_device(arg, a.device_type());
  v.device_index = v.device == Device::kCUDA ? a.device_id() : 0;
  v.ndim = static_cast<int>(a.ndim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = static_cast<int64_t>(a.shape(d));
    v.stride[d] = a.stride(d);
  }
  return v;
}

}  // namespace

TensorView to_view(const char* arg, const InArray& a) { return view_of(arg, a, const_cast<void*>(a.data())); }
TensorView to_view(const char* arg, const OutArray& a) { return view_of(arg, a, a.data()); }

TensorView to_view(const char* arg, const std::optional<InArray>& a) {
  return a ? to_view(arg, *a) : TensorView{};
}
TensorView to_view(const char* arg, const std::optional<OutArray>& a) {
  return a ? to_view(arg, *a) : TensorView{};
}

void raise_if_error(const flashattn::Status& status) {
  using flashattn::StatusCode;
  const char* msg = status.message.c_str();
  switch (status.code) {
    case StatusCode::kOk:
      return;
    case StatusCode::kInvalidArgument:
      // The library reports dtype problems as invalid arguments; Python callers expect TypeError.
      if (status.message.find("': dtype ") != std::string::npos) throw nb::type_error(msg);
      throw nb::value_error(msg);
    case StatusCode::kUnsupported:
      PyErr_SetString(PyExc_NotImplementedError, msg);
      throw nb::python_error();
    case StatusCode::kRuntimeError:
      break;
  }
  PyErr_SetString(PyExc_RuntimeError, msg);
  throw nb::python_error();
}

}  // namespace flashattn_py

#include "overlap.h"

#include <utility>
#include <cstdint>

namespace flashattn {
namespace {

// Bytes from a view's first element to one past its last; strides are non-negative (check_tensor).
struct Span {
  bool known = false;   // false where the span does not fit in 64 bits (then nothing is proven)
  uintptr_t first = 0;  // the first element's address
  uintptr_t last = 0;   // the last element's address
  uintptr_t end = 0;    // one past the last element's last byte
  bool dense = false;   // every byte of [first, end) belongs to an element
};

Span span_of(const TensorView& t) {
  const int64_t size = dtype_size(t.dtype);
  int64_t reach = 0;  // from the first element to the last: in elements, then in bytes
  Span s;
  for (int d = 0; d < t.ndim; ++d) {
    int64_t step = 0;
    if (__builtin_mul_overflow(t.stride[d], t.shape[d] - 1, &step) || __builtin_add_overflow(reach, step, &reach)) {
      return s;
    }
  }
  if (__builtin_mul_overflow(reach, size, &reach)) return s;
  s.known = true;
  s.first = reinterpret_cast<uintptr_t>(t.data);
  s.last = s.first + static_cast<uintptr_t>(reach);
  s.end = s.last + static_cast<uintptr_t>(size);
  // Dense: the dimensions, by stride from the smallest up, each step exactly past the ones inside.
  int order[TensorView::kMaxDims];
  const int n = dims_by_stride(t, order);
  int64_t packed = 1;
  s.dense = true;
  for (int i = 0; i < n && s.dense; ++i) {
    s.dense = t.stride[order[i]] == packed;
    packed *= t.shape[order[i]];
  }
  return s;
}

bool inside(uintptr_t address, const Span& s) { return address >= s.first && address < s.end; }

}  // namespace

int dims_by_stride(const TensorView& t, int* order) {
  int n = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] > 1) order[n++] = d;
  }
  for (int i = 1; i < n; ++i) {  // an insertion sort of at most 4
    for (int j = i; j > 0 && t.stride[order[j]] < t.stride[order[j - 1]]; --j) std::swap(order[j], order[j - 1]);
  }
  return n;
}

bool provably_overlap(const TensorView& a, const TensorView& b) {
  if (!a.defined() || !b.defined() || a.numel() == 0 || b.numel() == 0) return false;
  if (a.device != b.device || a.device_index != b.device_index) return false;
  const Span x = span_of(a), y = span_of(b);
  if (!x.known || !y.known) return a.data == b.data;
  if (x.first == y.first) return true;
  if (x.dense && (inside(y.first, x) || inside(y.last, x))) return true;
  return y.dense && (inside(x.first, y) || inside(x.last, y));
}

}  // namespace flashattn

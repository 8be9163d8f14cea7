// Scratch memory for the CPU kernels: 64-byte aligned, grown on demand, reused across tasks.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

namespace flashattn {

class AlignedBuffer {
 public:
  float* get(size_t n) {
    if (n > capacity_) {
      data_.reset(new (std::align_val_t(64)) float[n]);
      capacity_ = n;
    }
    return data_.get();
  }
  float* zeros(size_t n) {
    float* p = get(n);
    std::memset(p, 0, n * sizeof(float));
    return p;
  }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<float[], Free> data_;
  size_t capacity_ = 0;
};

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

}  // namespace flashattn

// Work distribution for the CPU backend: OpenMP with dynamic scheduling, because causal and
// variable-length tasks differ widely in cost.
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashattn {

inline int resolve_threads(int requested) {
#if defined(_OPENMP)
  return requested > 0 ? requested : omp_get_max_threads();
#else
  (void)requested;
  return 1;
#endif
}

template <typename Fn>
void parallel_for(int64_t n, int requested_threads, Fn&& fn) {
  const int threads = resolve_threads(requested_threads);
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) fn(i);
#else
  (void)threads;
  for (int64_t i = 0; i < n; ++i) fn(i);
#endif
}

}  // namespace flashattn

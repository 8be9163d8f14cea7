// Work distribution for the CPU backend: OpenMP with dynamic scheduling, because causal and
// variable-length tasks differ widely in cost.
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashattn {

// At most the processors there are: more would only take turns on them, and OpenMP creates every
// thread asked for (100000 crashed the process; INT_MAX aborts on its allocation).
inline int resolve_threads(int requested) {
#if defined(_OPENMP)
  if (requested <= 0) return omp_get_max_threads();
  const int processors = omp_get_num_procs();
  return requested < processors ? requested : processors;
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

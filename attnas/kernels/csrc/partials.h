// Per-thread partial sums reduced in a fixed thread order (no atomics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <omp.h>

namespace {

// Per-thread partial sums, reduced over threads in a fixed order.
struct Partials {
  std::vector<double> v;
  int64_t n;
  Partials(int nthreads, int64_t n_) : v((std::size_t)(nthreads * n_), 0.0), n(n_) {}
  double* of(int t) { return v.data() + (int64_t)t * n; }
  // Called first by every thread of the parallel region that fills the partials: one thread
  // sets `used` to the region's thread count (the rows `sum` adds up; the single's barrier
  // publishes it), and each gets its own row.
  double* enter(int& used) {
    #pragma omp single
    used = omp_get_num_threads();
    return of(omp_get_thread_num());
  }
  double sum(int64_t i, int used) const {
    double s = 0.0;
    for (int t = 0; t < used; ++t) s += v[(std::size_t)(t * n + i)];
    return s;
  }
};

}  // namespace

// Per-thread partial sums reduced in a fixed thread order (no atomics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// Per-thread partial sums, reduced over threads in a fixed order.
struct Partials {
  std::vector<double> v;
  int64_t n;
  Partials(int nthreads, int64_t n_) : v((std::size_t)(nthreads * n_), 0.0), n(n_) {}
  double* of(int t) { return v.data() + (int64_t)t * n; }
  double sum(int64_t i, int used) const {
    double s = 0.0;
    for (int t = 0; t < used; ++t) s += v[(std::size_t)(t * n + i)];
    return s;
  }
};

}  // namespace

// sigmoid1 and sigmoid_inplace on top of exp_nonpos_f32.
#pragma once
#include "vector_exp.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

typedef float vf16 __attribute__((vector_size(64)));  // one AVX-512 register
typedef int32_t vi16 __attribute__((vector_size(64)));

template <typename T>
inline T sigmoid1(T z) { return (T)1 / ((T)1 + std::exp(-z)); }

inline void sigmoid_inplace(double* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = sigmoid1(z[i]);
}
inline void sigmoid_inplace(float* z, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    vf16 v;
    std::memcpy(&v, z + i, sizeof(v));
    const vf16 e = exp_nonpos_f32<vf16, vi16>(v < 0 ? v : -v);  // exp(-|z|) in (0, 1]
    const vf16 r = 1.0f / (1.0f + e);
    v = v >= 0 ? r : e * r;
    std::memcpy(z + i, &v, sizeof(v));
  }
  for (; i < n; ++i) z[i] = sigmoid1(z[i]);
}

}  // namespace

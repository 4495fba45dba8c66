// 32-byte GCC vectors and unaligned loads and stores (small_conv, attention_gates, fused_phi, layout).
#pragma once

#include <cstring>

namespace {

template <typename T> struct Lanes;  // 32-byte vectors (GCC vector extension)
template <> struct Lanes<float> { typedef float V __attribute__((vector_size(32))); enum { L = 8 }; };
template <> struct Lanes<double> { typedef double V __attribute__((vector_size(32))); enum { L = 4 }; };

template <typename T>
inline typename Lanes<T>::V loadu(const T* p) {
  typename Lanes<T>::V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
inline void storeu(T* p, typename Lanes<T>::V v) { std::memcpy(p, &v, sizeof(v)); }

// r[i] (row i of an L x L block) <- column i, in registers: unpacks, shuffles, 128-bit lane permutes.
inline void transpose_lanes(Lanes<float>::V* r) {
  typedef Lanes<float>::V V;
  V t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + 2 + h], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] = __builtin_shufflevector(t[i + h], t[i + 2 + h], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int i = 0; i < 4; ++i) {
    r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

inline void transpose_lanes(Lanes<double>::V* r) {
  typedef Lanes<double>::V V;
  const V t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 2, 6), t1 = __builtin_shufflevector(r[0], r[1], 1, 5, 3, 7);
  const V t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 2, 6), t3 = __builtin_shufflevector(r[2], r[3], 1, 5, 3, 7);
  r[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  r[1] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  r[2] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  r[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

}  // namespace

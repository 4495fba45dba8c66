"""C++ source shared by the compiled kernels: a vectorised float32 ``exp`` for ``x <= 0``, and
the sigmoid built on it.

Used by the local-attention kernel (the softmax of logits minus their maximum), the
attention-gate kernels and the gate batch-norm kernel (sigmoids as ``exp(-|z|)``). Prepended
to their sources (``SIGMOID`` after ``EXP_NONPOS``).
"""

#: ``exp_nonpos_f32<V, VI>(x)``: ``exp(x)`` for a GCC vector ``V`` of float with ``x <= 0``
#: (``VI``: the int32 vector of as many lanes). Cody-Waite reduction and a degree-6
#: polynomial, relative error ~1e-7; exactly 0 below -87 (and for -inf).
EXP_NONPOS = r"""
template <typename V, typename VI>
inline V exp_nonpos_f32(V x) {
  const VI tiny = x < -87.0f;
  x = tiny ? V{} - 87.0f : x;
  const V n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  V r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  V p = V{} + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  V scale;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
  return tiny ? V{} : p * scale;
}
"""


#: ``sigmoid1(z)`` (scalar) and ``sigmoid_inplace(z, n)``: ``z[i] = sigmoid(z[i])`` for
#: ``i < n``, float32 sixteen lanes at a time through ``exp_nonpos_f32`` (``exp(-|z|)``, so no
#: overflow), float64 by ``std::exp``. Needs ``EXP_NONPOS`` before it.
SIGMOID = r"""
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
"""

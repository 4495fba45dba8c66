"""C++ source shared by the compiled kernels: 32-byte GCC vectors and unaligned loads and stores.

Prepended to the sources of the small-convolution kernel (and so of the attention-gate
kernels, which include it) and of the fused-phi kernel.
"""

#: ``Lanes<T>::V`` (8 floats or 4 doubles, ``Lanes<T>::L`` lanes), ``loadu(p)`` and
#: ``storeu(p, v)``, in an anonymous namespace.
LANES = r"""
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

}  // namespace
"""

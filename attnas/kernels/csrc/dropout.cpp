// Optional compiled CPU kernel for dropout masks (plain C++ built on first use).
//
// Writes the mask of :func:`attnas.ops.shared.dropout.dropout_mask` in one vectorised pass: element
// ``i`` (flat, row-major) is ``scale`` when the top 32 bits of ``splitmix64(seed + (i + 1)
// * 0x9E3779B97F4A7C15)`` are at least ``threshold``, else 0. The hash is counter-based, so
// the mask does not depend on how the elements are split over OpenMP threads
// (``torch.get_num_threads()``). Built and cached by
// :class:`attnas.ops._compiled.CompiledLibrary`; the PyTorch expression of the same hash in
// :mod:`attnas.ops.shared.dropout` gives the same mask bit for bit when it is unavailable.

#include <cstdint>
#include <omp.h>

namespace {

const int64_t CHUNK = 4096;

template <typename T>
void mask_impl(T* out, int64_t n, uint64_t seed, uint32_t threshold, T scale, int nthreads) {
  const int64_t chunks = (n + CHUNK - 1) / CHUNK;
  #pragma omp parallel for num_threads(nthreads) schedule(static) if (n > 16 * CHUNK)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
    #pragma omp simd
    for (int64_t i = c * CHUNK; i < end; ++i) {
      uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64 (Steele et al. 2014)
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      out[i] = (uint32_t)(z >> 32) >= threshold ? scale : (T)0;
    }
  }
}

}  // namespace

extern "C" {

// dtype 0: float32, 1: float64. out: n contiguous elements, fully written.
int attnas_dropout_mask(int dtype, void* out, int64_t n, uint64_t seed, uint32_t threshold, double scale,
                        int nthreads) {
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    mask_impl<float>((float*)out, n, seed, threshold, (float)scale, nthreads);
  else if (dtype == 1)
    mask_impl<double>((double*)out, n, seed, threshold, scale, nthreads);
  else
    return 1;
  return 0;
}

}  // extern "C"

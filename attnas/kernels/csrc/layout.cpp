// Optional compiled CPU kernel: channels-last <-> NCHW channel groups, by register transposes.
//
// A channels-last ``(B, C, H, W)`` tensor holds, per image, a ``P x C`` matrix (``P = H W``
// positions, channels contiguous); NCHW holds its transpose. PyTorch's strided copy between the
// two runs element by element (for a ``64 x 16 x 32 x 32`` float32 tensor on two threads of the
// development machine, ``benchmarks/bench_layout.py``: 0.69 ms to NCHW with the split, against
// 0.59 ms here; 2.55 ms for the backward's concatenation and copy back, against 0.64 ms). This
// kernel transposes ``L x L`` blocks in registers
// (``L`` = 8 floats or 4 doubles: unpack, shuffle and 128-bit lane permutes), and reads or writes
// the NCHW side as ``K`` separate tensors of ``c = C / K`` channels each (the channel groups of
// the HOGA cell), so that splitting and, in the backward, concatenating the groups cost no
// extra pass:
//
// * ``attnas_cl_to_groups``: ``x`` channels-last -> ``K`` NCHW tensors ``(B, c, H, W)``;
// * ``attnas_groups_to_cl``: ``K`` NCHW tensors (a null pointer: zeros) -> channels-last.
//
// Edges of blocks that do not fill ``L`` channels or positions are copied element by element.
// Built and cached by :class:`attnas.ops._compiled.CompiledLibrary`; :mod:`attnas.ops.memory_format`
// falls back to PyTorch's copies when it is unavailable.
#include "lanes.h"

#include <cstdint>
#include <vector>
#include <omp.h>

namespace {

// to_groups: cl (B, P, C) -> groups; else groups -> cl. Work split over (image, position block);
// each thread keeps the C plane pointers of its current image (null: an absent group), so that
// the inner loops do no index arithmetic beyond an add (a division per channel and block made
// this kernel several times slower than a copy).
template <typename T>
void convert(T* cl, T* const* groups, int64_t B, int64_t P, int64_t C, int64_t c, bool to_groups, int nthreads) {
  typedef typename Lanes<T>::V V;
  constexpr int L = Lanes<T>::L;
  const int64_t blocks = (P + L - 1) / L, full_c = C / L * L;
  #pragma omp parallel num_threads(nthreads) if (B * P * C > 32768)
  {
    std::vector<T*> pl((size_t)C);
    int64_t current = -1;
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < B * blocks; ++it) {
      const int64_t b = it / blocks, p0 = it % blocks * L;
      if (b != current) {
        for (int64_t ch = 0; ch < C; ++ch) {
          T* base = groups[ch / c];
          pl[ch] = base ? base + (b * c + ch % c) * P : nullptr;
        }
        current = b;
      }
      T* rows = cl + (b * P + p0) * C;  // position p0 + i, channel ch at rows[i * C + ch]
      if (p0 + L <= P) {
        for (int64_t c0 = 0; c0 < full_c; c0 += L) {
          V r[L];
          T* const* dst = pl.data() + c0;
          if (to_groups) {
            for (int i = 0; i < L; ++i) r[i] = loadu(rows + i * C + c0);
            transpose_lanes(r);
            for (int j = 0; j < L; ++j)
              if (dst[j]) storeu(dst[j] + p0, r[j]);
          } else {
            for (int j = 0; j < L; ++j) r[j] = dst[j] ? loadu(dst[j] + p0) : V{};
            transpose_lanes(r);
            for (int i = 0; i < L; ++i) storeu(rows + i * C + c0, r[i]);
          }
        }
      }
      const int64_t first_c = p0 + L <= P ? full_c : 0, n = P - p0 < L ? P - p0 : L;
      for (int64_t ch = first_c; ch < C; ++ch) {  // the edges, element by element
        T* plane = pl[ch];
        for (int64_t i = 0; i < n; ++i) {
          if (to_groups) { if (plane) plane[p0 + i] = rows[i * C + ch]; }
          else rows[i * C + ch] = plane ? plane[p0 + i] : (T)0;
        }
      }
    }
  }
}

}  // namespace

extern "C" {

// dtype 0: float32, 1: float64. cl: (B, C, H, W) channels-last, P = H W; groups: K = C / c
// pointers to NCHW tensors (B, c, H, W). cl_to_groups writes every non-null group;
// groups_to_cl writes all of cl (zeros for null groups).
int attnas_cl_to_groups(int dtype, const void* cl, void* const* groups, int64_t B, int64_t P, int64_t C, int64_t c,
                        int nthreads) {
  if (B < 0 || P < 0 || c < 1 || C % c) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0) convert<float>((float*)cl, (float* const*)groups, B, P, C, c, true, nthreads);
  else if (dtype == 1) convert<double>((double*)cl, (double* const*)groups, B, P, C, c, true, nthreads);
  else return 1;
  return 0;
}

int attnas_groups_to_cl(int dtype, const void* const* groups, void* cl, int64_t B, int64_t P, int64_t C, int64_t c,
                        int nthreads) {
  if (B < 0 || P < 0 || c < 1 || C % c) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0) convert<float>((float*)cl, (float* const*)groups, B, P, C, c, false, nthreads);
  else if (dtype == 1) convert<double>((double*)cl, (double* const*)groups, B, P, C, c, false, nthreads);
  else return 1;
  return 0;
}

}  // extern "C"

// Optional compiled CPU kernel for convolutions with few channels per group.
//
// A direct stride-1 "same" convolution (odd ``k x k`` kernel, dilation ``d``, zero padding
// ``d (k - 1) / 2``) on NCHW-contiguous float32 / float64 tensors, with ``groups`` groups of
// ``cin_g`` input and ``cout_g`` output channels each, forward and backward (input and weight
// gradients). It is written for AutoLA's gates: the depth-wise ``3 x 3`` convolutions of the
// normalization attention (``cin_g = cout_g = 1``) and the ``2 -> 1`` convolutions of the
// spatial attention and CBAM (``k = 3`` or ``7``), where oneDNN's general convolution reaches
// only 8-15 GFLOP/s on this CPU.
//
// Every thread works on whole images: it copies the planes of one (image, group) into a
// zero-padded buffer, so that the inner loop over a row is a branch-free, vectorised
// ``acc[x] += w * row[x + kx d]``. The input gradient is the same loop over the padded output
// gradient with the kernel flipped; the weight gradient is accumulated per thread over its
// images and summed at the end (deterministic for a given thread count). Built and cached by
// :class:`attnas.ops._compiled.CompiledLibrary`; :mod:`attnas.ops.autola.small_conv` falls back to
// ``torch.nn.functional.conv2d`` when it is unavailable.
#pragma once
#include "lanes.h"
#include "partials.h"

#include <cstdint>
#include <cstring>
#include <vector>
#include <omp.h>

namespace {

struct Shape {
  int64_t B; int Cin, Cout, G, H, W, K, d;
  int cin_g() const { return Cin / G; }
  int cout_g() const { return Cout / G; }
  int r() const { return d * (K - 1) / 2; }
  int Hp() const { return H + 2 * r(); }
  int Wp() const { return W + 2 * r(); }
};

// Copy n planes of H x W into zero-padded planes of Hp x Wp (borders already zero).
template <typename T>
void pad_planes(const T* src, T* dst, int n, const Shape& s) {
  const int r = s.r(), Wp = s.Wp(), Hp = s.Hp();
  for (int p = 0; p < n; ++p)
    for (int y = 0; y < s.H; ++y)
      std::memcpy(dst + (int64_t)p * Hp * Wp + (int64_t)(y + r) * Wp + r,
                  src + (int64_t)p * s.H * s.W + (int64_t)y * s.W, sizeof(T) * s.W);
}

// Rows y .. y + R - 1 of correlate_plane over the full vectors of a row (x < full): one
// accumulator per row, so that R independent chains of additions are in flight.
template <typename T, int R>
inline void correlate_rows(const T* pad, const T* wk, T* out, int y, int full, const Shape& s) {
  typedef typename Lanes<T>::V V;
  const int L = Lanes<T>::L;
  const int Wp = s.Wp(), K = s.K, d = s.d, W = s.W;
  for (int x0 = 0; x0 < full; x0 += L) {
    V a[R];
    for (int r = 0; r < R; ++r) a[r] = loadu(out + (int64_t)(y + r) * W + x0);
    for (int ky = 0; ky < K; ++ky) {
      const T* row = pad + (int64_t)(y + ky * d) * Wp + x0;
      for (int kx = 0; kx < K; ++kx) {
        const T wv = wk[ky * K + kx];
        const T* in = row + kx * d;
        for (int r = 0; r < R; ++r) a[r] += wv * loadu(in + (int64_t)r * Wp);
      }
    }
    for (int r = 0; r < R; ++r) storeu(out + (int64_t)(y + r) * W + x0, a[r]);
  }
}

// out[y, x] += sum_{ky, kx} w[ky * K + kx] * pad[y + ky d, x + kx d], one plane; w flipped if asked.
// Full vectors of four rows at a time (four independent accumulators, whatever the width),
// the remaining rows one at a time, the columns past the last full vector scalar.
template <typename T>
inline void correlate_plane(const T* pad, const T* w, T* out, const Shape& s, bool flip) {
  const int L = Lanes<T>::L;
  const int Wp = s.Wp(), K = s.K, d = s.d, W = s.W, KK = K * K;
  T wk[64 * 64];
  for (int t = 0; t < KK; ++t) wk[t] = flip ? w[KK - 1 - t] : w[t];
  const int full = W / L * L;
  int y = 0;
  for (; y + 4 <= s.H; y += 4) correlate_rows<T, 4>(pad, wk, out, y, full, s);
  for (; y < s.H; ++y) correlate_rows<T, 1>(pad, wk, out, y, full, s);
  for (y = 0; y < s.H; ++y) {
    T* o = out + (int64_t)y * W;
    for (int x = full; x < W; ++x) {
      T a = o[x];
      for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) a += wk[ky * K + kx] * pad[(int64_t)(y + ky * d) * Wp + x + kx * d];
      o[x] = a;
    }
  }
}

// acc[ky * K + kx] += sum_{y, x} g[y, x] * pad[y + ky d, x + kx d]: one kernel row at a time, a
// vector accumulator per tap of the row (KR = K known at compile time, else KR = 0: any K).
template <typename T, int KR>
inline void weight_taps(const T* g, const T* pad, double* acc, const Shape& s) {
  typedef typename Lanes<T>::V V;
  const int L = Lanes<T>::L;
  const int Wp = s.Wp(), K = KR > 0 ? KR : s.K, d = s.d, W = s.W;
  const int full = W / L * L;
  for (int ky = 0; ky < K; ++ky) {
    V v[KR > 0 ? KR : 1];
    T tail[64] = {};
    if (KR > 0) {
      for (int kx = 0; kx < K; ++kx) v[kx] = V{} ;
      for (int y = 0; y < s.H; ++y) {
        const T* gr = g + (int64_t)y * W;
        const T* row = pad + (int64_t)(y + ky * d) * Wp;
        for (int x0 = 0; x0 < full; x0 += L) {
          const V gv = loadu(gr + x0);
          for (int kx = 0; kx < K; ++kx) v[kx] += gv * loadu(row + x0 + kx * d);
        }
        for (int x = full; x < W; ++x)
          for (int kx = 0; kx < K; ++kx) tail[kx] += gr[x] * row[x + kx * d];
      }
      for (int kx = 0; kx < K; ++kx) {
        T sum = tail[kx];
        for (int l = 0; l < L; ++l) sum += v[kx][l];
        acc[ky * K + kx] += (double)sum;
      }
    } else {
      for (int kx = 0; kx < K; ++kx) {
        T sum = 0;
        for (int y = 0; y < s.H; ++y) {
          const T* gr = g + (int64_t)y * W;
          const T* in = pad + (int64_t)(y + ky * d) * Wp + kx * d;
          #pragma omp simd reduction(+ : sum)
          for (int x = 0; x < W; ++x) sum += gr[x] * in[x];
        }
        acc[ky * K + kx] += (double)sum;
      }
    }
  }
}

template <typename T>
inline void weight_grad(const T* g, const T* pad, double* acc, const Shape& s) {
  if (s.K == 3) weight_taps<T, 3>(g, pad, acc, s);
  else if (s.K == 5) weight_taps<T, 5>(g, pad, acc, s);
  else if (s.K == 7) weight_taps<T, 7>(g, pad, acc, s);
  else weight_taps<T, 0>(g, pad, acc, s);
}

template <typename T>
void forward(const T* x, const T* w, const T* bias, T* out, const Shape& s, int nthreads) {
  const int cin_g = s.cin_g(), cout_g = s.cout_g(), KK = s.K * s.K;
  const int64_t plane = (int64_t)s.H * s.W, pplane = (int64_t)s.Hp() * s.Wp();
  const int64_t items = s.B * s.G;
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> pad((size_t)(cin_g * pplane), (T)0);
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t b = it / s.G; const int g = (int)(it % s.G);
      pad_planes(x + (b * s.Cin + (int64_t)g * cin_g) * plane, pad.data(), cin_g, s);
      for (int oo = 0; oo < cout_g; ++oo) {
        const int o = g * cout_g + oo;
        T* dst = out + (b * s.Cout + o) * plane;
        const T b0 = bias ? bias[o] : (T)0;
        for (int64_t i = 0; i < plane; ++i) dst[i] = b0;
        for (int ci = 0; ci < cin_g; ++ci)
          correlate_plane(pad.data() + ci * pplane, w + ((int64_t)o * cin_g + ci) * KK, dst, s, false);
      }
    }
  }
}

// gx (may be null) and gw (may be null, written) from gout; x is needed for gw only.
template <typename T>
void backward(const T* x, const T* w, const T* gout, T* gx, T* gw, const Shape& s, int nthreads) {
  const int cin_g = s.cin_g(), cout_g = s.cout_g(), KK = s.K * s.K;
  const int64_t plane = (int64_t)s.H * s.W, pplane = (int64_t)s.Hp() * s.Wp();
  const int64_t items = s.B * s.G;
  const int64_t wsize = (int64_t)s.Cout * cin_g * KK;
  Partials partial(nthreads, wsize);
  int used = 1;
  #pragma omp parallel num_threads(nthreads)
  {
    double* acc = partial.enter(used);
    std::vector<T> gpad(gx ? (size_t)(cout_g * pplane) : 0, (T)0);
    std::vector<T> xpad(gw ? (size_t)(cin_g * pplane) : 0, (T)0);
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t b = it / s.G; const int g = (int)(it % s.G);
      const T* go = gout + (b * s.Cout + (int64_t)g * cout_g) * plane;
      if (gx) {
        pad_planes(go, gpad.data(), cout_g, s);
        for (int ci = 0; ci < cin_g; ++ci) {
          T* dst = gx + (b * s.Cin + (int64_t)g * cin_g + ci) * plane;
          for (int64_t i = 0; i < plane; ++i) dst[i] = (T)0;
          for (int oo = 0; oo < cout_g; ++oo)
            correlate_plane(gpad.data() + oo * pplane, w + ((int64_t)(g * cout_g + oo) * cin_g + ci) * KK,
                            dst, s, true);
        }
      }
      if (gw) {
        pad_planes(x + (b * s.Cin + (int64_t)g * cin_g) * plane, xpad.data(), cin_g, s);
        for (int oo = 0; oo < cout_g; ++oo)
          for (int ci = 0; ci < cin_g; ++ci)
            weight_grad(go + oo * plane, xpad.data() + ci * pplane,
                        acc + ((int64_t)(g * cout_g + oo) * cin_g + ci) * KK, s);
      }
    }
  }
  if (gw)
    for (int64_t i = 0; i < wsize; ++i) gw[i] = (T)partial.sum(i, used);
}

// Depth-wise pair: two banks of k x k filters (w1 dilation s1.d, w2 dilation s2.d, one filter
// per output channel) on one input, output channel o reading input channel o % Cin (so the
// G = Cout / Cin edges of a node share their input without copying it). Work per (image,
// input channel): the input plane is read once for both banks and all its outputs.
template <typename T>
void dw_pair_forward(const T* x, const T* w1, const T* b1, const T* w2, const T* b2, T* z1, T* z2, const Shape& s1,
                     const Shape& s2, int nthreads) {
  const int KK = s1.K * s1.K, Cin = s1.Cin, Cout = s1.Cout;
  const int64_t plane = (int64_t)s1.H * s1.W;
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> pad1((size_t)(s1.Hp() * s1.Wp()), (T)0), pad2((size_t)(s2.Hp() * s2.Wp()), (T)0);
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < s1.B * Cin; ++it) {
      const int64_t b = it / Cin; const int ci = (int)(it % Cin);
      const T* src = x + it * plane;
      pad_planes(src, pad1.data(), 1, s1);
      pad_planes(src, pad2.data(), 1, s2);
      for (int o = ci; o < Cout; o += Cin) {
        T* d1 = z1 + (b * Cout + o) * plane; T* d2 = z2 + (b * Cout + o) * plane;
        const T v1 = b1 ? b1[o] : (T)0, v2 = b2 ? b2[o] : (T)0;
        for (int64_t i = 0; i < plane; ++i) { d1[i] = v1; d2[i] = v2; }
        correlate_plane(pad1.data(), w1 + (int64_t)o * KK, d1, s1, false);
        correlate_plane(pad2.data(), w2 + (int64_t)o * KK, d2, s2, false);
      }
    }
  }
}

// gx (may be null; written) = sum over the outputs of each input channel of both banks'
// transposed correlations; gw1, gw2 (may be null; written) the filters' gradients.
template <typename T>
void dw_pair_backward(const T* x, const T* w1, const T* w2, const T* g1, const T* g2, T* gx, T* gw1, T* gw2,
                      const Shape& s1, const Shape& s2, int nthreads) {
  const int KK = s1.K * s1.K, Cin = s1.Cin, Cout = s1.Cout;
  const int64_t plane = (int64_t)s1.H * s1.W, wsize = (int64_t)Cout * KK;
  const bool want_w = gw1 && gw2;
  Partials partial(nthreads, want_w ? 2 * wsize : 1);
  int used = 1;
  #pragma omp parallel num_threads(nthreads)
  {
    double* acc = partial.enter(used);
    const size_t n1 = (size_t)(s1.Hp() * s1.Wp()), n2 = (size_t)(s2.Hp() * s2.Wp());
    std::vector<T> gpad1(gx ? n1 : 0, (T)0), gpad2(gx ? n2 : 0, (T)0);
    std::vector<T> xpad1(want_w ? n1 : 0, (T)0), xpad2(want_w ? n2 : 0, (T)0);
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < s1.B * Cin; ++it) {
      const int64_t b = it / Cin; const int ci = (int)(it % Cin);
      if (want_w) {
        pad_planes(x + it * plane, xpad1.data(), 1, s1);
        pad_planes(x + it * plane, xpad2.data(), 1, s2);
      }
      T* dst = gx ? gx + it * plane : nullptr;
      if (dst)
        for (int64_t i = 0; i < plane; ++i) dst[i] = (T)0;
      for (int o = ci; o < Cout; o += Cin) {
        const T* go1 = g1 + (b * Cout + o) * plane; const T* go2 = g2 + (b * Cout + o) * plane;
        if (dst) {
          pad_planes(go1, gpad1.data(), 1, s1);
          correlate_plane(gpad1.data(), w1 + (int64_t)o * KK, dst, s1, true);
          pad_planes(go2, gpad2.data(), 1, s2);
          correlate_plane(gpad2.data(), w2 + (int64_t)o * KK, dst, s2, true);
        }
        if (want_w) {
          weight_grad(go1, xpad1.data(), acc + (int64_t)o * KK, s1);
          weight_grad(go2, xpad2.data(), acc + wsize + (int64_t)o * KK, s2);
        }
      }
    }
  }
  if (want_w)
    for (int64_t i = 0; i < wsize; ++i) {
      gw1[i] = (T)partial.sum(i, used);
      gw2[i] = (T)partial.sum(wsize + i, used);
    }
}

bool valid(const Shape& s) {
  return s.B >= 0 && s.G >= 1 && s.Cin % s.G == 0 && s.Cout % s.G == 0 && s.Cin >= s.G && s.Cout >= s.G &&
         s.H >= 1 && s.W >= 1 && s.K >= 1 && s.K % 2 == 1 && s.K <= 63 && s.d >= 1;
}

}  // namespace

extern "C" {

// dtype 0: float32, 1: float64. All tensors NCHW contiguous; bias may be null.
int attnas_small_conv_forward(int dtype, const void* x, const void* w, const void* bias, void* out, int64_t B,
                              int Cin, int Cout, int G, int H, int W, int K, int d, int nthreads) {
  Shape s{B, Cin, Cout, G, H, W, K, d};
  if (!valid(s)) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    forward<float>((const float*)x, (const float*)w, (const float*)bias, (float*)out, s, nthreads);
  else if (dtype == 1)
    forward<double>((const double*)x, (const double*)w, (const double*)bias, (double*)out, s, nthreads);
  else
    return 1;
  return 0;
}

// Depth-wise pair (see dw_pair_forward): x (B, Cin, H, W); w1, w2 (Cout, 1, K, K), Cout a
// multiple of Cin; b1, b2 (Cout,) or null; z1, z2 (B, Cout, H, W).
int attnas_dw_pair_forward(int dtype, const void* x, const void* w1, const void* b1, const void* w2, const void* b2,
                           void* z1, void* z2, int64_t B, int Cin, int Cout, int H, int W, int K, int d1, int d2,
                           int nthreads) {
  Shape s1{B, Cin, Cout, Cin, H, W, K, d1}, s2{B, Cin, Cout, Cin, H, W, K, d2};  // G unused here
  if (Cin < 1 || Cout % Cin || !valid(s1) || !valid(s2)) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    dw_pair_forward<float>((const float*)x, (const float*)w1, (const float*)b1, (const float*)w2, (const float*)b2,
                           (float*)z1, (float*)z2, s1, s2, nthreads);
  else if (dtype == 1)
    dw_pair_forward<double>((const double*)x, (const double*)w1, (const double*)b1, (const double*)w2,
                            (const double*)b2, (double*)z1, (double*)z2, s1, s2, nthreads);
  else
    return 1;
  return 0;
}

// g1, g2 like z1, z2; gx like x (or null); gw1, gw2 like w1, w2 (both, or both null).
int attnas_dw_pair_backward(int dtype, const void* x, const void* w1, const void* w2, const void* g1, const void* g2,
                            void* gx, void* gw1, void* gw2, int64_t B, int Cin, int Cout, int H, int W, int K, int d1,
                            int d2, int nthreads) {
  Shape s1{B, Cin, Cout, Cin, H, W, K, d1}, s2{B, Cin, Cout, Cin, H, W, K, d2};  // G unused here
  if (Cin < 1 || Cout % Cin || !valid(s1) || !valid(s2) || (!gw1) != (!gw2)) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    dw_pair_backward<float>((const float*)x, (const float*)w1, (const float*)w2, (const float*)g1, (const float*)g2,
                            (float*)gx, (float*)gw1, (float*)gw2, s1, s2, nthreads);
  else if (dtype == 1)
    dw_pair_backward<double>((const double*)x, (const double*)w1, (const double*)w2, (const double*)g1,
                             (const double*)g2, (double*)gx, (double*)gw1, (double*)gw2, s1, s2, nthreads);
  else
    return 1;
  return 0;
}

// gx and gw may each be null (not wanted).
int attnas_small_conv_backward(int dtype, const void* x, const void* w, const void* gout, void* gx, void* gw,
                               int64_t B, int Cin, int Cout, int G, int H, int W, int K, int d, int nthreads) {
  Shape s{B, Cin, Cout, G, H, W, K, d};
  if (!valid(s)) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    backward<float>((const float*)x, (const float*)w, (const float*)gout, (float*)gx, (float*)gw, s, nthreads);
  else if (dtype == 1)
    backward<double>((const double*)x, (const double*)w, (const double*)gout, (double*)gx, (double*)gw, s,
                     nthreads);
  else
    return 1;
  return 0;
}

}  // extern "C"

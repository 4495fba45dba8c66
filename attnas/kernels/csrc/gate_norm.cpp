// Optional compiled CPU kernel: ``sigmoid(BN(z))`` of the relaxed HOGA cell's spatial gates.
//
// The spatial attention and CBAM gates (AutoLA Eqs. 6, 8) end in a batch norm of a map with one
// channel per edge, then a sigmoid. PyTorch's CPU batch norm parallelises over channels, so on
// these one-to-four-channel maps it runs on one thread, and the sigmoid and both backward
// passes are separate kernels. Here the training-mode batch norm (batch statistics) and the
// sigmoid are one operation each way, over ``z`` ``(B, G, P)`` (``G`` channels, ``P``
// positions), parallel over the ``B G`` planes:
//
// forward
//   1. the mean and centred sum of squares of every plane (two passes over a plane in cache),
//      merged per channel in image order (Chan et al.'s pairwise update, in ``double``);
//   2. ``s = sigmoid(gamma (z - mean) / sqrt(var + eps) + beta)``.
//
// backward (``ds`` given; ``s`` and ``z`` saved)
//   1. per plane, ``sum dbn`` and ``sum dbn z`` with ``dbn = ds s (1 - s)``;
//   2. ``dz = k dbn + b z + c`` per channel (the batch-norm backward in closed form), and the
//      gradients of ``gamma`` and ``beta``.
//
// Per-plane sums are reduced in image order, so results do not depend on the thread count.
// Built and cached by :class:`attnas.ops._compiled.CompiledLibrary`; :mod:`attnas.ops.gate_norm`
// falls back to ``F.batch_norm`` and ``torch.sigmoid`` when it is unavailable.
#include "vector_exp.h"
#include "sigmoid.h"

#include <cmath>
#include <cstdint>
#include <vector>
#include <omp.h>

namespace {

// mean[g], var[g] (biased) of z (B, G, P) over images and positions; plane moments merged in
// image order.
template <typename T>
void channel_moments(const T* z, int64_t B, int64_t G, int64_t P, double* mean, double* var, int nthreads) {
  std::vector<double> pm((size_t)(B * G)), pq((size_t)(B * G));
  #pragma omp parallel for num_threads(nthreads) schedule(static) if (B * G * P > 16384)
  for (int64_t it = 0; it < B * G; ++it) {
    const T* r = z + it * P;
    double s = 0;
    #pragma omp simd reduction(+ : s)
    for (int64_t p = 0; p < P; ++p) s += (double)r[p];
    const double m = s / (double)P;
    double q = 0;
    #pragma omp simd reduction(+ : q)
    for (int64_t p = 0; p < P; ++p) q += ((double)r[p] - m) * ((double)r[p] - m);
    pm[it] = m;
    pq[it] = q;
  }
  for (int64_t g = 0; g < G; ++g) {
    double n = 0, mu = 0, m2 = 0;
    for (int64_t b = 0; b < B; ++b) {  // Chan et al.: merge a plane of P values
      const double nb = (double)P, delta = pm[b * G + g] - mu, tot = n + nb;
      mu += delta * nb / tot;
      m2 += pq[b * G + g] + delta * delta * n * nb / tot;
      n = tot;
    }
    mean[g] = mu;
    var[g] = m2 / n;
  }
}

template <typename T>
void forward(const T* z, const T* gamma, const T* beta, double eps, T* s, T* stats, int64_t B, int64_t G, int64_t P,
             int nthreads) {
  std::vector<double> mean((size_t)G), var((size_t)G);
  channel_moments(z, B, G, P, mean.data(), var.data(), nthreads);
  std::vector<T> k((size_t)G), c((size_t)G);
  for (int64_t g = 0; g < G; ++g) {
    const double inv = 1.0 / std::sqrt(var[g] + eps);
    stats[g] = (T)mean[g]; stats[G + g] = (T)var[g]; stats[2 * G + g] = (T)inv;
    k[g] = (T)(gamma[g] * inv);
    c[g] = (T)(beta[g] - mean[g] * gamma[g] * inv);
  }
  #pragma omp parallel for num_threads(nthreads) schedule(static) if (B * G * P > 16384)
  for (int64_t it = 0; it < B * G; ++it) {
    const int64_t g = it % G;
    const T* r = z + it * P;
    T* o = s + it * P;
    const T kg = k[g], cg = c[g];
    #pragma omp simd
    for (int64_t p = 0; p < P; ++p) o[p] = r[p] * kg + cg;
    sigmoid_inplace(o, P);
  }
}

template <typename T>
void backward(const T* ds, const T* z, const T* s, const T* gamma, const T* stats, T* dz, T* dgamma, T* dbeta,
              int64_t B, int64_t G, int64_t P, int nthreads) {
  std::vector<double> su((size_t)(B * G)), sv((size_t)(B * G));
  #pragma omp parallel for num_threads(nthreads) schedule(static) if (B * G * P > 16384)
  for (int64_t it = 0; it < B * G; ++it) {
    const T* d = ds + it * P; const T* o = s + it * P; const T* r = z + it * P;
    T u = 0, v = 0;
    #pragma omp simd reduction(+ : u, v)
    for (int64_t p = 0; p < P; ++p) { const T q = d[p] * o[p] * ((T)1 - o[p]); u += q; v += q * r[p]; }
    su[it] = (double)u;
    sv[it] = (double)v;
  }
  const double N = (double)(B * P);
  std::vector<T> kk((size_t)G), bb((size_t)G), cc((size_t)G);
  for (int64_t g = 0; g < G; ++g) {
    double u = 0, v = 0;
    for (int64_t b = 0; b < B; ++b) { u += su[b * G + g]; v += sv[b * G + g]; }
    const double mean = stats[g], inv = stats[2 * G + g];
    const double dxhat = inv * (v - mean * u);  // sum dbn xhat
    dbeta[g] = (T)u;
    dgamma[g] = (T)dxhat;
    const double k = (double)gamma[g] * inv;
    kk[g] = (T)k;
    bb[g] = (T)(-k * inv * dxhat / N);
    cc[g] = (T)(k * (-u / N + mean * inv * dxhat / N));
  }
  #pragma omp parallel for num_threads(nthreads) schedule(static) if (B * G * P > 16384)
  for (int64_t it = 0; it < B * G; ++it) {
    const int64_t g = it % G;
    const T* d = ds + it * P; const T* o = s + it * P; const T* r = z + it * P;
    T* out = dz + it * P;
    const T k = kk[g], b = bb[g], c = cc[g];
    #pragma omp simd
    for (int64_t p = 0; p < P; ++p) out[p] = k * (d[p] * o[p] * ((T)1 - o[p])) + b * r[p] + c;
  }
}

}  // namespace

extern "C" {

// dtype 0: float32, 1: float64. z, s (B, G, P) contiguous; gamma, beta (G,); stats (3, G):
// batch mean, biased variance, 1 / sqrt(var + eps).
int attnas_gate_norm_forward(int dtype, const void* z, const void* gamma, const void* beta, double eps, void* s,
                             void* stats, int64_t B, int64_t G, int64_t P, int nthreads) {
  if (B < 1 || G < 1 || P < 1 || B * P < 2) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    forward<float>((const float*)z, (const float*)gamma, (const float*)beta, eps, (float*)s, (float*)stats, B, G, P,
                   nthreads);
  else if (dtype == 1)
    forward<double>((const double*)z, (const double*)gamma, (const double*)beta, eps, (double*)s, (double*)stats, B,
                    G, P, nthreads);
  else
    return 1;
  return 0;
}

// ds like s; dz like z; dgamma, dbeta (G,).
int attnas_gate_norm_backward(int dtype, const void* ds, const void* z, const void* s, const void* gamma,
                              const void* stats, void* dz, void* dgamma, void* dbeta, int64_t B, int64_t G, int64_t P,
                              int nthreads) {
  if (B < 1 || G < 1 || P < 1 || B * P < 2) return 2;
  if (nthreads < 1) nthreads = 1;
  if (dtype == 0)
    backward<float>((const float*)ds, (const float*)z, (const float*)s, (const float*)gamma, (const float*)stats,
                    (float*)dz, (float*)dgamma, (float*)dbeta, B, G, P, nthreads);
  else if (dtype == 1)
    backward<double>((const double*)ds, (const double*)z, (const double*)s, (const double*)gamma,
                     (const double*)stats, (double*)dz, (double*)dgamma, (double*)dbeta, B, G, P, nthreads);
  else
    return 1;
  return 0;
}

}  // extern "C"

// Kernel local_attention: SASA local self-attention (attnas.ops.fullattn.local_self_attention), fused.
//
// The eager definition materialises every k x k window. This kernel handles a tile of 16
// query positions of one (image, head) at a time: the k*k logits, the softmax and the
// weighted sum of the values stay in L1 cache, with the keys and values read straight from
// flat, zero-padded maps (the layout of attnas/kernels/local_attention_flat.py). The backward
// pass is fused the same way: a first sweep over query tiles forms the logit gradients and dq
// (gathers only), a second sweep sends dk/dv back to the neighbours offset by offset over
// whole rows (so no store is re-read before it leaves the store buffer). Images x heads are
// split over OpenMP threads (torch.get_num_threads(); the library links the same libgomp as
// PyTorch). Bound by attnas/kernels/local_attention.py.
//
// float32 uses the polynomial exp of vector_exp.h (relative error ~1e-7, vectorised); float64
// uses std::exp.
#include "vector_exp.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <omp.h>

#define TILE 16

namespace {

// One tile of TILE query positions as a GCC vector (AVX-512: one register for float).
typedef float vfloat __attribute__((vector_size(TILE * sizeof(float))));
typedef double vdouble __attribute__((vector_size(TILE * sizeof(double))));
typedef int32_t vint __attribute__((vector_size(TILE * sizeof(int32_t))));

template <typename V, typename T>
inline V load(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename T>
inline void store(T* p, V v) {
  __builtin_memcpy(p, &v, sizeof(V));
}
// TILE elements p[0], p[s], ..., p[(TILE-1)*s] (S: stride known at compile time, 0 = runtime s)
template <typename V, int S, typename T>
inline V load_strided(const T* p, int64_t s) {
  if (S == 1) return load<V>(p);
  V v;
  for (int t = 0; t < TILE; ++t) v[t] = p[s * t];
  return v;
}

// exp(x) for x <= 0 (logits minus their maximum): attnas.ops._vector_exp's polynomial.
inline vfloat exp_nonpos(vfloat x) { return exp_nonpos_f32<vfloat, vint>(x); }
inline vdouble exp_nonpos(vdouble x) {
  for (int t = 0; t < TILE; ++t) x[t] = std::exp(x[t]);
  return x;
}

// Sizes and strides. q (and dq): image stride qsb, channel stride qsc; k, v (and dk, dv):
// ksb, ksc (a channel row holds the whole padded map: dk/dv rows are zeroed over ksc);
// out and the output gradient: contiguous [B, C, Nq].
struct Geo {
  int64_t B, H, d, Nq, Npad, ks, s, Wp, qsb, qsc, ksb, ksc;
};

// Window size as a compile-time constant (KS > 0: accumulators live in registers) or at
// run time (KS == 0, any ks <= KMAX).
#define KMAX 15

// Attention weights of the query tile at p0 of one (image, head) into A[o] (o = a*ks + b):
// softmax over o of  q.k(o) + q.r_row(a) + q.r_col(b) + mask.  qv: the tile's d query vectors.
template <typename T, typename V, int S, int KS>
inline void tile_attention(const V* __restrict__ qv, const T* __restrict__ k, const T* __restrict__ Rh,
                           const T* __restrict__ mask, V* __restrict__ A, int64_t p0, const Geo& g) {
  const int64_t s = S > 0 ? S : g.s;
  const int64_t ks = KS > 0 ? KS : g.ks, d = g.d, Nq = g.Nq, L = g.ksc, Wp = g.Wp;
  V rel[2 * KMAX];
  for (int64_t j = 0; j < 2 * ks; ++j) {
    V acc = load<V>(mask + j * Nq + p0);
    for (int64_t c = 0; c < d; ++c) acc += Rh[j * d + c] * qv[c];
    rel[j] = acc;
  }
  V mx = V{} - INFINITY;
  for (int64_t a = 0; a < ks; ++a) {
    V acc[KMAX];
    for (int64_t b = 0; b < ks; ++b) acc[b] = rel[a] + rel[ks + b];
    const T* ka = k + a * Wp + s * p0;
    for (int64_t c = 0; c < d; ++c) {
      const V qc = qv[c];
      const T* kc = ka + c * L;
      for (int64_t b = 0; b < ks; ++b) acc[b] += qc * load_strided<V, S>(kc + b, s);
    }
    for (int64_t b = 0; b < ks; ++b) {
      A[a * ks + b] = acc[b];
      mx = acc[b] > mx ? acc[b] : mx;
    }
  }
  const int64_t K2 = ks * ks;
  V sm = V{};
  for (int64_t o = 0; o < K2; ++o) {
    const V e = exp_nonpos(A[o] - mx);
    A[o] = e;
    sm += e;
  }
  const V inv = T(1) / sm;
  for (int64_t o = 0; o < K2; ++o) A[o] *= inv;
}

// sum over the window of w[o] * x[c](o) for one channel row x (keys or values)
template <typename T, typename V, int S, int KS>
inline V window_dot(const V* __restrict__ w, const T* __restrict__ x, int64_t p0, const Geo& g) {
  const int64_t s = S > 0 ? S : g.s;
  const int64_t ks = KS > 0 ? KS : g.ks, Wp = g.Wp;
  V acc[KMAX];
  for (int64_t b = 0; b < ks; ++b) acc[b] = V{};
  for (int64_t a = 0; a < ks; ++a) {
    const T* xa = x + a * Wp + s * p0;
    for (int64_t b = 0; b < ks; ++b) acc[b] += w[a * ks + b] * load_strided<V, S>(xa + b, s);
  }
  for (int64_t b = 1; b < ks; ++b) acc[0] += acc[b];
  return acc[0];
}

template <typename T, typename V, int S, int KS>
void forward_impl(const T* q, const T* k, const T* v, const T* R, const T* mask, T* out, T* attn, Geo g,
                  int nthreads) {
  const int64_t ks = KS > 0 ? KS : g.ks;
  const int64_t K2 = ks * ks, C = g.H * g.d, d = g.d, Nq = g.Nq, L = g.ksc, Lq = g.qsc;
#pragma omp parallel num_threads(nthreads)
  {
    std::vector<V> A(K2), qv(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < g.B * g.H; ++bh) {
      const int64_t b = bh / g.H, h = bh % g.H;
      const T* qb = q + b * g.qsb + h * d * Lq;
      const T* kb = k + b * g.ksb + h * d * L;
      const T* vb = v + b * g.ksb + h * d * L;
      T* ob = out + (b * C + h * d) * Nq;
      T* ab = attn ? attn + bh * K2 * Nq : nullptr;
      const T* Rh = R + h * 2 * ks * d;
      for (int64_t p0 = 0; p0 < g.Npad; p0 += TILE) {
        for (int64_t c = 0; c < d; ++c) qv[c] = load<V>(qb + c * Lq + p0);
        tile_attention<T, V, S, KS>(qv.data(), kb, Rh, mask, A.data(), p0, g);
        if (ab)
          for (int64_t o = 0; o < K2; ++o) store(ab + o * Nq + p0, A[o]);
        for (int64_t c = 0; c < d; ++c) store(ob + c * Nq + p0, window_dot<T, V, S, KS>(A.data(), vb + c * L, p0, g));
      }
      for (int64_t c = 0; c < d; ++c)
        for (int64_t n = g.Npad; n < Nq; ++n) ob[c * Nq + n] = 0;
    }
  }
}

template <typename T, typename V, int S, int KS>
void backward_impl(const T* q, const T* k, const T* v, const T* R, const T* mask, const T* attn, const T* go,
                   T* dq, T* dk, T* dv, T* dR, Geo g, int nthreads) {
  const int64_t ks = KS > 0 ? KS : g.ks;
  const int64_t K2 = ks * ks, C = g.H * g.d, d = g.d, Nq = g.Nq, L = g.ksc, Lq = g.qsc, Wp = g.Wp;
  const int64_t s = S > 0 ? S : g.s, Npad = g.Npad;
#pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> dLbuf(K2 * Nq), Abuf(attn ? 0 : K2 * Nq);
    std::vector<V> tileA(K2), dLt(K2), drel(2 * ks), dRacc(2 * ks * d), qv(d), gv(d);
    T* dL = dLbuf.data();
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < g.B * g.H; ++bh) {
      const int64_t b = bh / g.H, h = bh % g.H;
      const int64_t base = (b * C + h * d);
      const T* qb = q + b * g.qsb + h * d * Lq;
      const T* kb = k + b * g.ksb + h * d * L;
      const T* vb = v + b * g.ksb + h * d * L;
      const T* gb = go + base * Nq;
      T* dqb = dq + b * g.qsb + h * d * Lq;
      T* dkb = dk + b * g.ksb + h * d * L;
      T* dvb = dv + b * g.ksb + h * d * L;
      std::memset(dkb, 0, d * L * sizeof(T));
      std::memset(dvb, 0, d * L * sizeof(T));
      const T* Rh = R + h * 2 * ks * d;
      T* Aall = attn ? const_cast<T*>(attn) + bh * K2 * Nq : Abuf.data();
      for (auto& x : dRacc) x = V{};
      // sweep 1 over query tiles: logit gradients (kept for sweep 2), dq, dR; gathers only
      for (int64_t p0 = 0; p0 < Npad; p0 += TILE) {
        for (int64_t c = 0; c < d; ++c) {
          qv[c] = load<V>(qb + c * Lq + p0);
          gv[c] = load<V>(gb + c * Nq + p0);
        }
        if (attn) {
          for (int64_t o = 0; o < K2; ++o) tileA[o] = load<V>(Aall + o * Nq + p0);
        } else {
          tile_attention<T, V, S, KS>(qv.data(), kb, Rh, mask, tileA.data(), p0, g);
          for (int64_t o = 0; o < K2; ++o) store(Aall + o * Nq + p0, tileA[o]);
        }
        // dA(o) = sum_c g_c v_c(o)
        for (int64_t a = 0; a < ks; ++a) {
          V acc[KMAX];
          for (int64_t bb = 0; bb < ks; ++bb) acc[bb] = V{};
          const T* va = vb + a * Wp + s * p0;
          for (int64_t c = 0; c < d; ++c) {
            const V gc = gv[c];
            const T* vc = va + c * L;
            for (int64_t bb = 0; bb < ks; ++bb) acc[bb] += gc * load_strided<V, S>(vc + bb, s);
          }
          for (int64_t bb = 0; bb < ks; ++bb) dLt[a * ks + bb] = acc[bb];
        }
        V dot = V{};
        for (int64_t o = 0; o < K2; ++o) dot += tileA[o] * dLt[o];
        V dcol[KMAX];
        for (int64_t bb = 0; bb < ks; ++bb) dcol[bb] = V{};
        for (int64_t a = 0; a < ks; ++a) {
          V drow = V{};
          for (int64_t bb = 0; bb < ks; ++bb) {
            const int64_t o = a * ks + bb;
            const V x = tileA[o] * (dLt[o] - dot);  // softmax backward
            dLt[o] = x;
            store(dL + o * Nq + p0, x);
            drow += x;
            dcol[bb] += x;
          }
          drel[a] = drow;
        }
        for (int64_t bb = 0; bb < ks; ++bb) drel[ks + bb] = dcol[bb];
        for (int64_t c = 0; c < d; ++c) {
          V acc = window_dot<T, V, S, KS>(dLt.data(), kb + c * L, p0, g);
          for (int64_t j = 0; j < 2 * ks; ++j) {
            acc += Rh[j * d + c] * drel[j];
            dRacc[j * d + c] += drel[j] * qv[c];
          }
          store(dqb + c * Lq + p0, acc);
        }
      }
      for (int64_t c = 0; c < d; ++c)
        for (int64_t n = Npad; n < Nq; ++n) dqb[c * Lq + n] = 0;
      T* dRb = dR + bh * 2 * ks * d;
      for (int64_t jc = 0; jc < 2 * ks * d; ++jc) {
        T sum = 0;
        for (int t = 0; t < TILE; ++t) sum += dRacc[jc][t];
        dRb[jc] = sum;
      }
      // sweep 2: every query sends its share back to each neighbour, offset by offset over
      // whole rows (consecutive stores never overlap a pending one)
      for (int64_t a = 0; a < ks; ++a)
        for (int64_t bb = 0; bb < ks; ++bb) {
          const int64_t o = a * ks + bb, off = a * Wp + bb;
          const T* __restrict__ Ao = Aall + o * Nq;
          const T* __restrict__ dLo = dL + o * Nq;
          for (int64_t c = 0; c < d; ++c) {
            const T* __restrict__ gc = gb + c * Nq;
            const T* __restrict__ qc = qb + c * Lq;
            T* __restrict__ dvc = dvb + c * L + off;
            T* __restrict__ dkc = dkb + c * L + off;
            if (S == 1) {
              for (int64_t n = 0; n < Npad; n += TILE) {
                store(dvc + n, load<V>(dvc + n) + load<V>(Ao + n) * load<V>(gc + n));
                store(dkc + n, load<V>(dkc + n) + load<V>(dLo + n) * load<V>(qc + n));
              }
            } else {
              for (int64_t n = 0; n < Npad; ++n) {
                dvc[s * n] += Ao[n] * gc[n];
                dkc[s * n] += dLo[n] * qc[n];
              }
            }
          }
        }
    }
  }
}

template <typename T, typename V>
void forward_dispatch(const T* q, const T* k, const T* v, const T* R, const T* mask, T* out, T* attn, Geo g,
                      int n) {
  if (g.s == 1 && g.ks == 3) return forward_impl<T, V, 1, 3>(q, k, v, R, mask, out, attn, g, n);
  if (g.s == 1 && g.ks == 5) return forward_impl<T, V, 1, 5>(q, k, v, R, mask, out, attn, g, n);
  if (g.s == 1 && g.ks == 7) return forward_impl<T, V, 1, 7>(q, k, v, R, mask, out, attn, g, n);
  if (g.s == 1) return forward_impl<T, V, 1, 0>(q, k, v, R, mask, out, attn, g, n);
  return forward_impl<T, V, 0, 0>(q, k, v, R, mask, out, attn, g, n);
}

template <typename T, typename V>
void backward_dispatch(const T* q, const T* k, const T* v, const T* R, const T* mask, const T* attn, const T* go,
                       T* dq, T* dk, T* dv, T* dR, Geo g, int n) {
  if (g.s == 1 && g.ks == 3) return backward_impl<T, V, 1, 3>(q, k, v, R, mask, attn, go, dq, dk, dv, dR, g, n);
  if (g.s == 1 && g.ks == 5) return backward_impl<T, V, 1, 5>(q, k, v, R, mask, attn, go, dq, dk, dv, dR, g, n);
  if (g.s == 1 && g.ks == 7) return backward_impl<T, V, 1, 7>(q, k, v, R, mask, attn, go, dq, dk, dv, dR, g, n);
  if (g.s == 1) return backward_impl<T, V, 1, 0>(q, k, v, R, mask, attn, go, dq, dk, dv, dR, g, n);
  return backward_impl<T, V, 0, 0>(q, k, v, R, mask, attn, go, dq, dk, dv, dR, g, n);
}

}  // namespace

extern "C" {

int attnas_local_attention_forward(int dtype, const void* q, const void* k, const void* v, const void* R,
                                   const void* mask, void* out, void* attn, int64_t B, int64_t H, int64_t d,
                                   int64_t Nq, int64_t Npad, int64_t ks, int64_t s, int64_t Wp, int64_t qsb,
                                   int64_t qsc, int64_t ksb, int64_t ksc, int nthreads) {
  if (ks > KMAX || Npad % TILE) return 1;
  Geo g{B, H, d, Nq, Npad, ks, s, Wp, qsb, qsc, ksb, ksc};
  if (dtype == 0)
    forward_dispatch<float, vfloat>((const float*)q, (const float*)k, (const float*)v, (const float*)R,
                                    (const float*)mask, (float*)out, (float*)attn, g, nthreads);
  else
    forward_dispatch<double, vdouble>((const double*)q, (const double*)k, (const double*)v, (const double*)R,
                                      (const double*)mask, (double*)out, (double*)attn, g, nthreads);
  return 0;
}

// dk and dv are fully written (zeroed, then accumulated); dR is [B*H, 2ks, d] per (image, head).
int attnas_local_attention_backward(int dtype, const void* q, const void* k, const void* v, const void* R,
                                    const void* mask, const void* attn, const void* go, void* dq, void* dk,
                                    void* dv, void* dR, int64_t B, int64_t H, int64_t d, int64_t Nq,
                                    int64_t Npad, int64_t ks, int64_t s, int64_t Wp, int64_t qsb, int64_t qsc,
                                    int64_t ksb, int64_t ksc, int nthreads) {
  if (ks > KMAX || Npad % TILE) return 1;
  Geo g{B, H, d, Nq, Npad, ks, s, Wp, qsb, qsc, ksb, ksc};
  if (dtype == 0)
    backward_dispatch<float, vfloat>((const float*)q, (const float*)k, (const float*)v, (const float*)R,
                                     (const float*)mask, (const float*)attn, (const float*)go, (float*)dq,
                                     (float*)dk, (float*)dv, (float*)dR, g, nthreads);
  else
    backward_dispatch<double, vdouble>((const double*)q, (const double*)k, (const double*)v, (const double*)R,
                                       (const double*)mask, (const double*)attn, (const double*)go, (double*)dq,
                                       (double*)dk, (double*)dv, (double*)dR, g, nthreads);
  return 0;
}

}  // extern "C"

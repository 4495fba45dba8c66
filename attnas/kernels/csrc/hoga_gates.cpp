// Optional compiled CPU kernels for the full-size passes of the relaxed HOGA cell.
//
// :class:`~attnas.ops.autola.hoga_relaxed.GroupedMixedOp` evaluates ``G`` mixed edges (AutoLA Eq. 13)
// whose operations are all gates on their input. Written with PyTorch operations, its forward
// and backward make some thirty passes over full-size ``(B, G, c, H, W)`` tensors (pooling,
// broadcast products, sums, the expanded gradients of the poolings); these kernels do the
// same work in six, one (image, edge) plane block at a time, vectorised over positions:
//
// * ``gate_stats``: the spatial average and maximum of every channel (channel attentions,
//   Eqs. 4, 5) and the channel average and maximum at every position (spatial attention,
//   Eq. 6), with the positions of the maxima; its backward routes the four gradients back.
// * ``cbam_pool``: the channel average and maximum of ``x * g_c`` (CBAM's spatial branch,
//   Eq. 8) without forming ``x * g_c``; its backward gives the gradients of ``x`` and ``g_c``.
// * ``combine``: ``out = x * (sum_n w_n s_n + a g_s + chan + spat)``, the mixed edge once the
//   gates are known (``s_n`` the normalization attentions' sigmoids, ``a g_s`` CBAM's gate,
//   ``chan`` the channel gates and the identity, ``spat`` the spatial gates); its backward
//   gives every gradient in one pass, those of the pre-activations ``z_n`` included.
//
// Inputs are contiguous; ``x`` is ``(B, Gx, c, P)`` with ``Gx = G`` (edges on the channel groups
// of one tensor) or ``Gx = 1`` (edges sharing one input), ``P = H W``. Maxima route their
// gradient to the first maximal element (as max pooling does; ``torch.amax`` splits it among
// ties). Built and cached by :class:`attnas.ops._compiled.CompiledLibrary`.
#include "partials.h"

#include <cstddef>
#include <cstdint>
#include <vector>
#include <omp.h>

namespace {

struct Dims {
  int64_t B; int Gx, G, c; int64_t P;
  const int64_t xoff(int64_t b, int g) const { return ((b * Gx + (Gx == 1 ? 0 : g)) * c) * P; }
};

template <typename T>
void gate_stats(const T* x, T* avg, T* mx, int32_t* amx_p, T* cmean, T* cmax, uint8_t* amx_c, const Dims& d,
                int nthreads) {
  const int64_t items = d.B * d.Gx;
  const T inv_p = (T)1 / (T)d.P, inv_c = (T)1 / (T)d.c;
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t it = 0; it < items; ++it) {
    const T* xb = x + it * d.c * d.P;
    T* cm = cmean + it * d.P;
    T* cx = cmax + it * d.P;
    uint8_t* ac = amx_c + it * d.P;
    for (int ch = 0; ch < d.c; ++ch) {
      const T* row = xb + ch * d.P;
      T s = 0;
      #pragma omp simd reduction(+ : s)
      for (int64_t p = 0; p < d.P; ++p) s += row[p];
      T m = row[0];
      #pragma omp simd reduction(max : m)
      for (int64_t p = 0; p < d.P; ++p) m = row[p] > m ? row[p] : m;
      int64_t am = 0;
      while (am < d.P - 1 && !(row[am] == m)) ++am;  // the first maximum (NaN rows: position 0)
      avg[it * d.c + ch] = s * inv_p;
      mx[it * d.c + ch] = m;
      amx_p[it * d.c + ch] = (int32_t)am;
      if (ch == 0) {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) { cm[p] = row[p]; cx[p] = row[p]; ac[p] = 0; }
      } else {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) {
          cm[p] += row[p];
          const bool up = row[p] > cx[p];
          cx[p] = up ? row[p] : cx[p];
          ac[p] = up ? (uint8_t)ch : ac[p];
        }
      }
    }
    #pragma omp simd
    for (int64_t p = 0; p < d.P; ++p) cm[p] *= inv_c;
  }
}

// dx = d_avg / P + d_mx at the spatial maximum + d_cmean / c + d_cmax at the channel maximum.
template <typename T>
void gate_stats_backward(const T* d_avg, const T* d_mx, const int32_t* amx_p, const T* d_cmean, const T* d_cmax,
                         const uint8_t* amx_c, T* dx, const Dims& d, int nthreads) {
  const int64_t items = d.B * d.Gx;
  const T inv_p = (T)1 / (T)d.P, inv_c = (T)1 / (T)d.c;
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t it = 0; it < items; ++it) {
    const T* dm = d_cmean ? d_cmean + it * d.P : nullptr;
    const T* dxm = d_cmax ? d_cmax + it * d.P : nullptr;
    const uint8_t* ac = amx_c + it * d.P;
    for (int ch = 0; ch < d.c; ++ch) {
      T* out = dx + (it * d.c + ch) * d.P;
      const T base = d_avg ? d_avg[it * d.c + ch] * inv_p : (T)0;
      if (dm && dxm) {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) out[p] = base + dm[p] * inv_c + (ac[p] == ch ? dxm[p] : (T)0);
      } else if (dm) {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) out[p] = base + dm[p] * inv_c;
      } else if (dxm) {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) out[p] = base + (ac[p] == ch ? dxm[p] : (T)0);
      } else {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) out[p] = base;
      }
      if (d_mx) out[amx_p[it * d.c + ch]] += d_mx[it * d.c + ch];
    }
  }
}

// ymean, ymax: (B, G, P) channel average and maximum of x_g * gc[b, g, :].
template <typename T>
void cbam_pool(const T* x, const T* gc, T* ymean, T* ymax, uint8_t* amx, const Dims& d, int nthreads) {
  const int64_t items = d.B * d.G;
  const T inv_c = (T)1 / (T)d.c;
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t b = it / d.G; const int g = (int)(it % d.G);
    const T* xb = x + d.xoff(b, g);
    const T* gg = gc + it * d.c;
    T* ym = ymean + it * d.P; T* yx = ymax + it * d.P; uint8_t* a = amx + it * d.P;
    {
      const T w = gg[0];
      #pragma omp simd
      for (int64_t p = 0; p < d.P; ++p) { const T y = w * xb[p]; ym[p] = y; yx[p] = y; a[p] = 0; }
    }
    for (int ch = 1; ch < d.c; ++ch) {
      const T w = gg[ch];
      const T* row = xb + ch * d.P;
      #pragma omp simd
      for (int64_t p = 0; p < d.P; ++p) {
        const T y = w * row[p];
        ym[p] += y;
        const bool up = y > yx[p];
        yx[p] = up ? y : yx[p];
        a[p] = up ? (uint8_t)ch : a[p];
      }
    }
    #pragma omp simd
    for (int64_t p = 0; p < d.P; ++p) ym[p] *= inv_c;
  }
}

// dy = d_ymean / c + d_ymax at the maximum; dx (written) = sum_g gc dy; dgc = sum_p x dy.
template <typename T>
void cbam_pool_backward(const T* x, const T* gc, const T* d_ymean, const T* d_ymax, const uint8_t* amx, T* dx,
                        T* dgc, const Dims& d, int nthreads) {
  const T inv_c = (T)1 / (T)d.c;
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t bx = 0; bx < d.B * d.Gx; ++bx) {
    const int64_t b = bx / d.Gx; const int gx = (int)(bx % d.Gx);
    const T* xb = x + bx * d.c * d.P;
    T* dxb = dx + bx * d.c * d.P;
    const int g0 = d.Gx == 1 ? 0 : gx, g1 = d.Gx == 1 ? d.G : gx + 1;
    for (int ch = 0; ch < d.c; ++ch) {
      T* out = dxb + ch * d.P;
      const T* row = xb + ch * d.P;
      #pragma omp simd
      for (int64_t p = 0; p < d.P; ++p) out[p] = 0;
      for (int g = g0; g < g1; ++g) {
        const int64_t it = b * d.G + g;
        const T* dm = d_ymean + it * d.P; const T* dxm = d_ymax + it * d.P; const uint8_t* a = amx + it * d.P;
        const T w = gc[it * d.c + ch];
        T s = 0;
        #pragma omp simd reduction(+ : s)
        for (int64_t p = 0; p < d.P; ++p) {
          const T dy = dm[p] * inv_c + (a[p] == ch ? dxm[p] : (T)0);
          out[p] += w * dy;
          s += row[p] * dy;
        }
        dgc[it * d.c + ch] = s;
      }
    }
  }
}

// out = x * (sum_n w_n[g] s_n + a[b, g, ch] gs[b, g, p] + chan[b, g, ch] + spat[b, g, p]).
template <typename T>
void combine(const T* x, const T* s0, const T* s1, const T* w0, const T* w1, const T* a, const T* gs,
             const T* chan, const T* spat, T* out, const Dims& d, int nthreads) {
  const int64_t items = d.B * d.G;
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t b = it / d.G; const int g = (int)(it % d.G);
    const T* xb = x + d.xoff(b, g);
    const T* g_s = gs + it * d.P; const T* sp = spat + it * d.P;
    const T v0 = s0 ? w0[g] : (T)0, v1 = s1 ? w1[g] : (T)0;
    for (int ch = 0; ch < d.c; ++ch) {
      const int64_t o = (it * d.c + ch) * d.P;
      const T* row = xb + ch * d.P;
      const T* r0 = s0 ? s0 + o : nullptr; const T* r1 = s1 ? s1 + o : nullptr;
      const T ac = a[it * d.c + ch], cc = chan[it * d.c + ch];
      T* dst = out + o;
      if (r0 && r1) {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) dst[p] = row[p] * (v0 * r0[p] + v1 * r1[p] + ac * g_s[p] + cc + sp[p]);
      } else if (r0 || r1) {
        const T* r = r0 ? r0 : r1; const T v = r0 ? v0 : v1;
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) dst[p] = row[p] * (v * r[p] + ac * g_s[p] + cc + sp[p]);
      } else {
        #pragma omp simd
        for (int64_t p = 0; p < d.P; ++p) dst[p] = row[p] * (ac * g_s[p] + cc + sp[p]);
      }
    }
  }
}

// All gradients of combine from dout: dx (written; summed over the edges of a shared input),
// dz_n = t w_n s_n (1 - s_n) (t = dout x; s_n = sigmoid(z_n)), dw_n[g] = sum t s_n, da = sum_p t gs, dgs = sum_ch t a,
// dchan = sum_p t, dspat = sum_ch t. Work is split over images, so the sums over p and ch
// need no atomics; dw is reduced over threads at the end.
template <typename T>
void combine_backward(const T* dout, const T* x, const T* s0, const T* s1, const T* w0, const T* w1, const T* a,
                      const T* gs, const T* chan, const T* spat, T* dx, T* ds0, T* ds1, T* dw, T* da, T* dgs,
                      T* dchan, T* dspat, const Dims& d, int nthreads) {
  Partials partial(nthreads, 2 * d.G);
  int used = 1;
  #pragma omp parallel num_threads(nthreads)
  {
    double* dwt = partial.enter(used);
    #pragma omp for schedule(static)
    for (int64_t bx = 0; bx < d.B * d.Gx; ++bx) {
      const int64_t b = bx / d.Gx; const int gx = (int)(bx % d.Gx);
      const int g0 = d.Gx == 1 ? 0 : gx, g1 = d.Gx == 1 ? d.G : gx + 1;
      const T* xb = x + bx * d.c * d.P;
      T* dxb = dx + bx * d.c * d.P;
      for (int g = g0; g < g1; ++g) {
        const int64_t it = b * d.G + g;
        const T* g_s = gs + it * d.P; const T* sp = spat + it * d.P;
        T* dg = dgs + it * d.P; T* dsp = dspat + it * d.P;
        const T v0 = s0 ? w0[g] : (T)0, v1 = s1 ? w1[g] : (T)0;
        for (int ch = 0; ch < d.c; ++ch) {
          const int64_t o = (it * d.c + ch) * d.P;
          const T* row = xb + ch * d.P;
          const T* go = dout + o;
          T* dxr = dxb + ch * d.P;
          const bool first = (g == g0);
          const T ac = a[it * d.c + ch], cc = chan[it * d.c + ch];
          const T* r0 = s0 ? s0 + o : nullptr; const T* r1 = s1 ? s1 + o : nullptr;
          T* q0 = s0 ? ds0 + o : nullptr; T* q1 = s1 ? ds1 + o : nullptr;
          T sa = 0, st = 0, sw0 = 0, sw1 = 0;
          #pragma omp simd reduction(+ : sa, st, sw0, sw1)
          for (int64_t p = 0; p < d.P; ++p) {
            const T n0 = r0 ? r0[p] : (T)0, n1 = r1 ? r1[p] : (T)0;
            const T gate = v0 * n0 + v1 * n1 + ac * g_s[p] + cc + sp[p];
            const T tt = go[p] * row[p];
            dxr[p] = (first ? (T)0 : dxr[p]) + go[p] * gate;
            if (q0) q0[p] = tt * v0 * n0 * ((T)1 - n0);  // through the sigmoid: s' = s (1 - s)
            if (q1) q1[p] = tt * v1 * n1 * ((T)1 - n1);
            sw0 += tt * n0; sw1 += tt * n1;
            sa += tt * g_s[p]; st += tt;
            const T tg = tt * ac;
            if (ch == 0) { dg[p] = tg; dsp[p] = tt; } else { dg[p] += tg; dsp[p] += tt; }
          }
          da[it * d.c + ch] = sa;
          dchan[it * d.c + ch] = st;
          dwt[g] += (double)sw0; dwt[d.G + g] += (double)sw1;
        }
      }
    }
  }
  for (int i = 0; i < 2 * d.G; ++i) dw[i] = (T)partial.sum(i, used);
}

bool valid(const Dims& d) {
  return d.B >= 0 && d.G >= 1 && (d.Gx == 1 || d.Gx == d.G) && d.c >= 1 && d.c <= 255 && d.P >= 1 &&
         d.P < 2147483647LL;
}

}  // namespace

#define DISPATCH(dtype, CALL_F, CALL_D) \
  if (!valid(dm)) return 2;             \
  if (nthreads < 1) nthreads = 1;       \
  if (dtype == 0) { CALL_F; }           \
  else if (dtype == 1) { CALL_D; }      \
  else return 1;                        \
  return 0;

#define F_(p) ((float*)(p))
#define D_(p) ((double*)(p))
#define CF_(p) ((const float*)(p))
#define CD_(p) ((const double*)(p))

extern "C" {

int attnas_hoga_gate_stats(int dtype, const void* x, void* avg, void* mx, int32_t* amx_p, void* cmean, void* cmax,
                           uint8_t* amx_c, int64_t B, int Gx, int c, int64_t P, int nthreads) {
  Dims dm{B, Gx, Gx, c, P};
  DISPATCH(dtype, gate_stats(CF_(x), F_(avg), F_(mx), amx_p, F_(cmean), F_(cmax), amx_c, dm, nthreads),
           gate_stats(CD_(x), D_(avg), D_(mx), amx_p, D_(cmean), D_(cmax), amx_c, dm, nthreads))
}

int attnas_hoga_gate_stats_backward(int dtype, const void* d_avg, const void* d_mx, const int32_t* amx_p,
                                    const void* d_cmean, const void* d_cmax, const uint8_t* amx_c, void* dx,
                                    int64_t B, int Gx, int c, int64_t P, int nthreads) {
  Dims dm{B, Gx, Gx, c, P};
  DISPATCH(dtype,
           gate_stats_backward(CF_(d_avg), CF_(d_mx), amx_p, CF_(d_cmean), CF_(d_cmax), amx_c, F_(dx), dm, nthreads),
           gate_stats_backward(CD_(d_avg), CD_(d_mx), amx_p, CD_(d_cmean), CD_(d_cmax), amx_c, D_(dx), dm, nthreads))
}

int attnas_hoga_cbam_pool(int dtype, const void* x, const void* gc, void* ymean, void* ymax, uint8_t* amx,
                          int64_t B, int Gx, int G, int c, int64_t P, int nthreads) {
  Dims dm{B, Gx, G, c, P};
  DISPATCH(dtype, cbam_pool(CF_(x), CF_(gc), F_(ymean), F_(ymax), amx, dm, nthreads),
           cbam_pool(CD_(x), CD_(gc), D_(ymean), D_(ymax), amx, dm, nthreads))
}

int attnas_hoga_cbam_pool_backward(int dtype, const void* x, const void* gc, const void* d_ymean,
                                   const void* d_ymax, const uint8_t* amx, void* dx, void* dgc, int64_t B, int Gx,
                                   int G, int c, int64_t P, int nthreads) {
  Dims dm{B, Gx, G, c, P};
  DISPATCH(dtype,
           cbam_pool_backward(CF_(x), CF_(gc), CF_(d_ymean), CF_(d_ymax), amx, F_(dx), F_(dgc), dm, nthreads),
           cbam_pool_backward(CD_(x), CD_(gc), CD_(d_ymean), CD_(d_ymax), amx, D_(dx), D_(dgc), dm, nthreads))
}

int attnas_hoga_combine(int dtype, const void* x, const void* s0, const void* s1, const void* w0, const void* w1,
                        const void* a, const void* gs, const void* chan, const void* spat, void* out, int64_t B,
                        int Gx, int G, int c, int64_t P, int nthreads) {
  Dims dm{B, Gx, G, c, P};
  DISPATCH(dtype,
           combine(CF_(x), CF_(s0), CF_(s1), CF_(w0), CF_(w1), CF_(a), CF_(gs), CF_(chan), CF_(spat), F_(out), dm,
                   nthreads),
           combine(CD_(x), CD_(s0), CD_(s1), CD_(w0), CD_(w1), CD_(a), CD_(gs), CD_(chan), CD_(spat), D_(out), dm,
                   nthreads))
}

int attnas_hoga_combine_backward(int dtype, const void* dout, const void* x, const void* s0, const void* s1,
                                 const void* w0, const void* w1, const void* a, const void* gs, const void* chan,
                                 const void* spat, void* dx, void* ds0, void* ds1, void* dw, void* da, void* dgs,
                                 void* dchan, void* dspat, int64_t B, int Gx, int G, int c, int64_t P,
                                 int nthreads) {
  Dims dm{B, Gx, G, c, P};
  DISPATCH(dtype,
           combine_backward(CF_(dout), CF_(x), CF_(s0), CF_(s1), CF_(w0), CF_(w1), CF_(a), CF_(gs), CF_(chan),
                            CF_(spat), F_(dx), F_(ds0), F_(ds1), F_(dw), F_(da), F_(dgs), F_(dchan), F_(dspat), dm,
                            nthreads),
           combine_backward(CD_(dout), CD_(x), CD_(s0), CD_(s1), CD_(w0), CD_(w1), CD_(a), CD_(gs), CD_(chan),
                            CD_(spat), D_(dx), D_(ds0), D_(ds1), D_(dw), D_(da), D_(dgs), D_(dchan), D_(dspat), dm,
                            nthreads))
}

}  // extern "C"

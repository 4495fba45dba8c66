// Optional compiled CPU kernels for the discrete AutoLA attention modules (Sec. 3.2).
//
// Each module of :mod:`attnas.ops.autola.attention_modules` gates its input, ``y = x * g(x)``. Written
// in PyTorch, one module is 10-25 operations and autograd nodes, half of them over the full
// ``(B, c, H, W)`` tensor; these kernels compute one module's forward in one call and its
// backward in one call:
//
// * ``norm``: the normalization attention (Eq. 7), ``y = x * sigmoid(dwconv(x) + beta)``,
//   one (image, channel) plane at a time: the depth-wise convolution on a zero-padded copy
//   of the plane, the sigmoid and the product in L1 cache; the gate ``s`` is kept (recomputing
//   it in the backward costs more than storing and reading it). The backward gives
//   ``dx = dy s + conv^T(dy x s (1 - s))``, the filter and bias gradients.
// * ``spatial``: the spatial attention (Eq. 6), ``y = x * sigmoid(BN(conv([mean_c x;
//   max_c x])))`` with a one-channel batch normalisation. One OpenMP region in three phases
//   (per image: the channel pooling and the ``2 -> 1`` convolution; the batch statistics of
//   the map; per image: the gate and the product), the backward likewise (per image: the
//   gate gradient ``sum_c dy x``; the batch normalisation's sums; per image: the
//   convolution's input and filter gradients and ``dx``).
// * ``channel``: the channel attentions (Eqs. 4, 5), ``y = x * sigmoid(f(mean_P x) [+
//   f(max_P x)])`` with the bias-free MLP ``f = W2 relu(W1 .)``, one image at a time
//   (pooling, MLP, product; backward: the gate gradient, the MLP's backward, ``dx``).
//
// ``x`` is read as ``B`` blocks of ``c`` contiguous ``H x W`` planes with an arbitrary batch
// stride (a channel slice of an NCHW tensor needs no copy); every other tensor is contiguous.
// The gradient of a maximum goes to its first maximal element (as in max pooling;
// ``torch.amax`` splits it among ties). Filter and batch-normalisation gradients are summed
// per thread and reduced in a fixed order (deterministic for a given thread count).
// float32 sigmoids use the vectorised polynomial ``exp`` of ``vector_exp.h`` (relative error
// ~1e-7), float64 ones ``std::exp``.
//
// The convolution helpers (``Shape``, ``pad_planes``, ``correlate_plane``, ``weight_grad``)
// are those of ``small_conv.h``. Built and loaded by :mod:`attnas.kernels._build`;
// :mod:`attnas.kernels.attention_gates` wraps it.
#include "small_conv.h"
#include "vector_exp.h"
#include "sigmoid.h"

#include <cmath>

namespace {


// ---------------------------------------------------------------- normalization attention (Eq. 7)

// s = sigmoid(bias + dwconv(plane)) of one plane, from its padded copy.
template <typename T>
inline void norm_gate_plane(const T* pad, const T* w, T bias, T* s, const Shape& sh) {
  const int64_t P = (int64_t)sh.H * sh.W;
  for (int64_t p = 0; p < P; ++p) s[p] = bias;
  correlate_plane(pad, w, s, sh, false);
  sigmoid_inplace(s, P);
}

// y = x s, s = sigmoid(bias + dwconv(x)); s is kept for the backward.
template <typename T>
void norm_forward(const T* x, int64_t sb, const T* w, const T* bias, T* y, T* s, const Shape& sh, int nthreads) {
  const int c = sh.Cin, KK = sh.K * sh.K;
  const int64_t P = (int64_t)sh.H * sh.W;
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> pad((size_t)(sh.Hp() * sh.Wp()), (T)0);
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < sh.B * c; ++it) {
      const int64_t b = it / c; const int ch = (int)(it % c);
      const T* xp = x + b * sb + ch * P;
      T* yp = y + it * P; T* sp = s + it * P;
      pad_planes(xp, pad.data(), 1, sh);
      norm_gate_plane(pad.data(), w + ch * KK, bias ? bias[ch] : (T)0, sp, sh);
      #pragma omp simd
      for (int64_t p = 0; p < P; ++p) yp[p] = xp[p] * sp[p];
    }
  }
}

// dx (may be null) = dy s + conv^T(dz), dz = dy x s (1 - s); dw = sum dz (x) x, db (may be null) = sum dz.
template <typename T>
void norm_backward(const T* x, int64_t sb, const T* w, const T* s, const T* dy, T* dx, T* dw, T* db,
                   const Shape& sh, int nthreads) {
  const int c = sh.Cin, KK = sh.K * sh.K;
  const int64_t P = (int64_t)sh.H * sh.W, pplane = (int64_t)sh.Hp() * sh.Wp();
  Partials part(nthreads, (int64_t)c * (KK + 1));
  int used = 1;
  #pragma omp parallel num_threads(nthreads)
  {
    double* acc = part.enter(used);
    std::vector<T> xpad((size_t)pplane, (T)0), gpad((size_t)pplane, (T)0), dz((size_t)P);
    #pragma omp for schedule(static)
    for (int64_t it = 0; it < sh.B * c; ++it) {
      const int64_t b = it / c; const int ch = (int)(it % c);
      const T* xp = x + b * sb + ch * P;
      const T* go = dy + it * P; const T* sp = s + it * P;
      T* dzp = dz.data();
      T sum = 0;
      #pragma omp simd reduction(+ : sum)
      for (int64_t p = 0; p < P; ++p) {
        const T v = go[p] * xp[p] * sp[p] * ((T)1 - sp[p]);
        dzp[p] = v;
        sum += v;
      }
      acc[(int64_t)c * KK + ch] += (double)sum;
      pad_planes(xp, xpad.data(), 1, sh);
      weight_grad(dzp, xpad.data(), acc + ch * KK, sh);
      if (dx) {
        T* dxp = dx + it * P;
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) dxp[p] = go[p] * sp[p];
        pad_planes(dzp, gpad.data(), 1, sh);
        correlate_plane(gpad.data(), w + ch * KK, dxp, sh, true);
      }
    }
  }
  for (int64_t i = 0; i < (int64_t)c * KK; ++i) dw[i] = (T)part.sum(i, used);
  if (db)
    for (int ch = 0; ch < c; ++ch) db[ch] = (T)part.sum((int64_t)c * KK + ch, used);
}

// ---------------------------------------------------------------- channel attentions (Eqs. 4, 5)

// What a channel attention keeps for its backward, in one buffer of 4 B C values T: pooled
// (B, 2, C) = [mean_P x; max_P x] (the max only with_max), gate (B, C), amax (B, C) the first
// maximal position (int32 in T-sized slots).
template <typename T>
struct ChannelWork {
  T *pooled, *gate; int32_t* amax;
  ChannelWork(T* work, int64_t B, int C)
      : pooled(work), gate(work + 2 * B * C), amax((int32_t*)(work + 3 * B * C)) {}
};

// hpre (h,) = W1 v for pooled values v (C,).
template <typename T>
inline void mlp_hidden(const T* v, const T* w1, T* hpre, int C, int h) {
  for (int k = 0; k < h; ++k) {
    T a = 0;
    for (int ch = 0; ch < C; ++ch) a += w1[k * C + ch] * v[ch];
    hpre[k] = a;
  }
}

// hpre = W1 v; adds W2 relu(hpre) to zc (C,).
template <typename T>
inline void mlp_forward(const T* v, const T* w1, const T* w2, T* hpre, T* zc, int C, int h) {
  mlp_hidden(v, w1, hpre, C, h);
  for (int ch = 0; ch < C; ++ch) {
    T a = 0;
    for (int k = 0; k < h; ++k) a += w2[ch * h + k] * (hpre[k] > 0 ? hpre[k] : (T)0);
    zc[ch] += a;
  }
}

// The gate of one image xb (C planes of P values): gate = sigmoid(f(mean_P) [+ f(max_P)]);
// pooled (2 C) and amax (C) are kept for the backward; hpre: h values of scratch.
template <typename T>
inline void channel_gate_image(const T* xb, int64_t P, const T* w1, const T* w2, int C, int h, int with_max,
                               T* pooled, int32_t* amax, T* gate, T* hpre) {
  const T inv_p = (T)1 / (T)P;
  T* avg = pooled; T* mx = pooled + C;
  for (int ch = 0; ch < C; ++ch) {
    const T* row = xb + ch * P;
    T s = 0;
    #pragma omp simd reduction(+ : s)
    for (int64_t p = 0; p < P; ++p) s += row[p];
    avg[ch] = s * inv_p;
    if (with_max) {
      T m = row[0];
      #pragma omp simd reduction(max : m)
      for (int64_t p = 0; p < P; ++p) m = row[p] > m ? row[p] : m;
      int64_t am = 0;
      while (am < P - 1 && !(row[am] == m)) ++am;  // the first maximum (NaN rows: position 0)
      mx[ch] = m;
      amax[ch] = (int32_t)am;
    }
  }
  for (int ch = 0; ch < C; ++ch) gate[ch] = 0;
  mlp_forward(avg, w1, w2, hpre, gate, C, h);
  if (with_max) mlp_forward(mx, w1, w2, hpre, gate, C, h);
  for (int ch = 0; ch < C; ++ch) gate[ch] = sigmoid1(gate[ch]);
}

// The backward of channel_gate_image's MLP for one image: dz (C) holds d loss / d gate on
// entry; dv (2 C) gets the gradients of the pooled values; a1 (h, C) and a2 (C, h)
// accumulate those of W1 and W2. hpre, dh: h values of scratch.
template <typename T>
inline void channel_mlp_backward_image(const T* pooled, const T* gate, T* dz, const T* w1, const T* w2, int C, int h,
                                       int with_max, double* a1, double* a2, T* hpre, T* dh, T* dv) {
  for (int ch = 0; ch < C; ++ch) dz[ch] *= gate[ch] * ((T)1 - gate[ch]);  // through the sigmoid
  for (int br = 0; br < (with_max ? 2 : 1); ++br) {  // the shared MLP, branch by branch
    const T* v = pooled + br * C;
    T* dvb = dv + br * C;
    mlp_hidden(v, w1, hpre, C, h);
    for (int k = 0; k < h; ++k) {
      T a = 0;
      if (hpre[k] > 0)
        for (int ch = 0; ch < C; ++ch) a += w2[ch * h + k] * dz[ch];
      dh[k] = a;
      const double hk = hpre[k] > 0 ? (double)hpre[k] : 0.0;
      for (int ch = 0; ch < C; ++ch) a2[ch * h + k] += (double)dz[ch] * hk;
      for (int ch = 0; ch < C; ++ch) a1[k * C + ch] += (double)a * (double)v[ch];
    }
    for (int ch = 0; ch < C; ++ch) {
      T a = 0;
      for (int k = 0; k < h; ++k) a += w1[k * C + ch] * dh[k];
      dvb[ch] = a;
    }
  }
}

// dx of one image = du gate + dv_avg / P (+ dv_max at the spatial maximum); du may be dx.
template <typename T>
inline void channel_input_grad_image(const T* du, const T* gate, const T* dv, const int32_t* amax, int with_max,
                                     int C, int64_t P, T* dx) {
  const T inv_p = (T)1 / (T)P;
  for (int ch = 0; ch < C; ++ch) {
    const T* go = du + ch * P;
    T* out = dx + ch * P;
    const T gv = gate[ch], base = dv[ch] * inv_p;
    #pragma omp simd
    for (int64_t p = 0; p < P; ++p) out[p] = go[p] * gv + base;
    if (with_max) out[amax[ch]] += dv[C + ch];
  }
}

// x: B blocks of C planes; w1 (h, C), w2 (C, h); work: see ChannelWork.
template <typename T>
void channel_forward(const T* x, int64_t sb, const T* w1, const T* w2, int with_max, T* y, T* work, int64_t B, int C,
                     int h, int64_t P, int nthreads) {
  const ChannelWork<T> cw(work, B, C);
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> hpre((size_t)h);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const T* xb = x + b * sb;
      T* gb = cw.gate + b * C;
      channel_gate_image(xb, P, w1, w2, C, h, with_max, cw.pooled + 2 * b * C, cw.amax + b * C, gb, hpre.data());
      for (int ch = 0; ch < C; ++ch) {
        const T* row = xb + ch * P;
        T* yr = y + (b * C + ch) * P;
        const T gv = gb[ch];
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) yr[p] = row[p] * gv;
      }
    }
  }
}

// dx (may be null), dw1 (h, C), dw2 (C, h) from dy and the forward's work buffer.
template <typename T>
void channel_backward(const T* x, int64_t sb, const T* w1, const T* w2, int with_max, T* work, const T* dy, T* dx,
                      T* dw1, T* dw2, int64_t B, int C, int h, int64_t P, int nthreads) {
  const ChannelWork<T> cw(work, B, C);
  const int64_t nw = (int64_t)h * C;
  Partials part(nthreads, 2 * nw);
  int used = 1;
  #pragma omp parallel num_threads(nthreads)
  {
    double* a1 = part.enter(used);
    std::vector<T> dz((size_t)C), hpre((size_t)h), dh((size_t)h), dv((size_t)(2 * C));
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const T* xb = x + b * sb;
      for (int ch = 0; ch < C; ++ch) {  // d loss / d gate
        const T* row = xb + ch * P; const T* go = dy + (b * C + ch) * P;
        T s = 0;
        #pragma omp simd reduction(+ : s)
        for (int64_t p = 0; p < P; ++p) s += go[p] * row[p];
        dz[ch] = s;
      }
      channel_mlp_backward_image(cw.pooled + 2 * b * C, cw.gate + b * C, dz.data(), w1, w2, C, h, with_max, a1,
                                 a1 + nw, hpre.data(), dh.data(), dv.data());
      if (dx)
        channel_input_grad_image(dy + b * C * P, cw.gate + b * C, dv.data(), cw.amax + b * C, with_max, C, P,
                                 dx + b * C * P);
    }
  }
  for (int64_t i = 0; i < nw; ++i) { dw1[i] = (T)part.sum(i, used); dw2[i] = (T)part.sum(nw + i, used); }
}

// ---------------------------------------------------------------- spatial attention (Eq. 6), CBAM (Eq. 8)

// What the spatial attention keeps for its backward, in one buffer of 5 B P + 2 values T:
// pooled (B, 2, P) = [mean_c u; max_c u], z (B, P) the convolution's output, g (B, P) the
// gate, amax (B, P) the first maximal channel (int32 in T-sized slots), stats (2): the mean
// and biased variance the map was normalised with. u = x, or x g_c in CBAM.
template <typename T>
struct SpatialWork {
  T *pooled, *z, *g, *stats; int32_t* amax;
  SpatialWork(T* work, int64_t N)
      : pooled(work), z(work + 2 * N), g(work + 3 * N), stats(work + 5 * N), amax((int32_t*)(work + 4 * N)) {}
};

// CBAM's channel attention v2 (Eq. 5) before the spatial one: w1 == nullptr for none.
template <typename T>
struct ChannelFirst {
  const T *w1, *w2; int h; T* work;
};

// x: B blocks of c planes (batch stride sb); w: (1, 2, K, K); bn: gamma, beta (1 value each),
// eps, running mean and variance rm, rv (1 value each). mode 0: batch statistics; 1: batch
// statistics, and rm, rv <- (1 - factor) (rm, rv) + factor (mean, unbiased variance); 2: the
// running statistics rm, rv. With cf.w1, u = x g_c (CBAM) takes the place of x: y = u g.
template <typename T>
void spatial_forward(const T* x, int64_t sb, const T* w, const T* bn_w, const T* bn_b, T* rm, T* rv, T eps,
                     double factor, int mode, T* y, T* work, const ChannelFirst<T>& cf, const Shape& sh,
                     int nthreads) {
  const int c = sh.Cin, KK = sh.K * sh.K;
  const int64_t P = (int64_t)sh.H * sh.W, pplane = (int64_t)sh.Hp() * sh.Wp(), N = sh.B * P;
  const T inv_c = (T)1 / (T)c, gamma = bn_w[0], beta = bn_b[0];
  const SpatialWork<T> wk(work, N);
  const ChannelWork<T> cw(cf.work, sh.B, c);
  T *pooled = wk.pooled, *z = wk.z, *g = wk.g;
  int32_t* amax = wk.amax;
  const bool batch_stats = mode != 2;
  Partials part(nthreads, 1);
  int used = 1;
  double mean = batch_stats ? 0.0 : (double)rm[0], var = batch_stats ? 0.0 : (double)rv[0];
  #pragma omp parallel num_threads(nthreads)
  {
    #pragma omp single
    used = omp_get_num_threads();
    const int t = omp_get_thread_num();
    std::vector<T> pad((size_t)(2 * pplane), (T)0), hpre((size_t)(cf.w1 ? cf.h : 0)), ones((size_t)c, (T)1);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < sh.B; ++b) {
      const T* xb = x + b * sb;
      const T* gc = ones.data();  // u = x gc
      if (cf.w1) {
        channel_gate_image(xb, P, cf.w1, cf.w2, c, cf.h, 1, cw.pooled + 2 * b * c, cw.amax + b * c,
                           cw.gate + b * c, hpre.data());
        gc = cw.gate + b * c;
      }
      T* cm = pooled + 2 * b * P; T* cx = cm + P; int32_t* a = amax + b * P;
      {
        const T s = gc[0];
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) { const T u = xb[p] * s; cm[p] = u; cx[p] = u; a[p] = 0; }
      }
      for (int ch = 1; ch < c; ++ch) {
        const T* row = xb + ch * P;
        const T s = gc[ch];
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) {
          const T u = row[p] * s;
          cm[p] += u;
          const bool up = u > cx[p];
          cx[p] = up ? u : cx[p];
          a[p] = up ? ch : a[p];
        }
      }
      #pragma omp simd
      for (int64_t p = 0; p < P; ++p) cm[p] *= inv_c;
      pad_planes(cm, pad.data(), 2, sh);
      T* zb = z + b * P;
      for (int64_t p = 0; p < P; ++p) zb[p] = 0;
      correlate_plane(pad.data(), w, zb, sh, false);
      correlate_plane(pad.data() + pplane, w + KK, zb, sh, false);
      if (batch_stats) {
        T sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (int64_t p = 0; p < P; ++p) sum += zb[p];
        part.of(t)[0] += (double)sum;
      }
    }
    if (batch_stats) {  // the implicit barrier of the loop above: every z is known
      #pragma omp single
      {
        mean = part.sum(0, used) / (double)N;
        for (int u = 0; u < used; ++u) part.of(u)[0] = 0.0;
      }
      const T m = (T)mean;
      #pragma omp for schedule(static)
      for (int64_t b = 0; b < sh.B; ++b) {
        const T* zb = z + b * P;
        T sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (int64_t p = 0; p < P; ++p) sum += (zb[p] - m) * (zb[p] - m);
        part.of(t)[0] += (double)sum;
      }
      #pragma omp single
      var = part.sum(0, used) / (double)N;
    }
    const T m = (T)mean, scale = gamma / std::sqrt((T)var + eps);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < sh.B; ++b) {
      const T* xb = x + b * sb;
      const T* zb = z + b * P;
      const T* gc = cf.w1 ? cw.gate + b * c : ones.data();
      T* gb = g + b * P;
      #pragma omp simd
      for (int64_t p = 0; p < P; ++p) gb[p] = (zb[p] - m) * scale + beta;
      sigmoid_inplace(gb, P);
      for (int ch = 0; ch < c; ++ch) {
        const T* row = xb + ch * P;
        T* yr = y + (b * c + ch) * P;
        const T s = gc[ch];
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) yr[p] = (row[p] * s) * gb[p];
      }
    }
  }
  wk.stats[0] = (T)mean; wk.stats[1] = (T)var;
  if (mode == 1) {
    rm[0] = (T)((1.0 - factor) * (double)rm[0] + factor * mean);
    rv[0] = (T)((1.0 - factor) * (double)rv[0] + factor * var * (double)N / (double)(N - 1));
  }
}

// dx (may be null), dw (2 K K), dbn = (d gamma, d beta) and, with cf.w1, dw1 (h, c), dw2
// (c, h), from dy and the forward's work buffers (batch_stats: the forward normalised with
// batch statistics).
template <typename T>
void spatial_backward(const T* x, int64_t sb, const T* w, const T* bn_w, T eps, int batch_stats, T* work,
                      const T* dy, T* dx, T* dw, T* dbn, const ChannelFirst<T>& cf, T* dw1, T* dw2, const Shape& sh,
                      int nthreads) {
  const int c = sh.Cin, KK = sh.K * sh.K, h = cf.w1 ? cf.h : 0;
  const int64_t P = (int64_t)sh.H * sh.W, pplane = (int64_t)sh.Hp() * sh.Wp(), N = sh.B * P, nw = (int64_t)h * c;
  const SpatialWork<T> wk(work, N);
  const ChannelWork<T> cw(cf.work, sh.B, c);
  const T* pooled = wk.pooled; const T* z = wk.z; const T* g = wk.g;
  const int32_t* amax = wk.amax;
  const T inv_c = (T)1 / (T)c, m = wk.stats[0], rstd = (T)1 / std::sqrt(wk.stats[1] + eps), gamma = bn_w[0];
  Partials part(nthreads, 2 + 2 * KK + 2 * nw);
  std::vector<T> dzn((size_t)N);
  int used = 1;
  double s1 = 0.0, s2 = 0.0;
  #pragma omp parallel num_threads(nthreads)
  {
    double* acc = part.enter(used);
    std::vector<T> ones((size_t)c, (T)1);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < sh.B; ++b) {  // dzn = d loss / d BN(z): the gate's gradient through the sigmoid
      const T* xb = x + b * sb;
      const T* gb = g + b * P; const T* zb = z + b * P;
      const T* gc = cf.w1 ? cw.gate + b * c : ones.data();
      T* q = dzn.data() + b * P;
      for (int64_t p = 0; p < P; ++p) q[p] = 0;
      for (int ch = 0; ch < c; ++ch) {
        const T* row = xb + ch * P; const T* go = dy + (b * c + ch) * P;
        const T s = gc[ch];
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) q[p] += go[p] * (row[p] * s);
      }
      T a1 = 0, a2 = 0;
      #pragma omp simd reduction(+ : a1, a2)
      for (int64_t p = 0; p < P; ++p) {
        q[p] *= gb[p] * ((T)1 - gb[p]);
        a1 += q[p];
        a2 += q[p] * (zb[p] - m) * rstd;
      }
      acc[0] += (double)a1; acc[1] += (double)a2;
    }
    #pragma omp single
    { s1 = part.sum(0, used); s2 = part.sum(1, used); }
    // dz = gamma rstd (dzn - [batch statistics] (s1 + zhat s2) / N)
    const T k1 = batch_stats ? (T)(s1 / (double)N) : (T)0, k2 = batch_stats ? (T)(s2 / (double)N) : (T)0;
    const T gr = gamma * rstd;
    std::vector<T> gpad((size_t)pplane, (T)0), ppad((size_t)(2 * pplane), (T)0), dp((size_t)(2 * P));
    // CBAM: du = d loss / d u (in dx, or here when dx is not wanted), then the channel gate's
    // backward.
    const bool du_apart = cf.w1 && !dx;
    std::vector<T> du(du_apart ? (size_t)(c * P) : 0), dzc((size_t)c), hpre((size_t)h), dh((size_t)h),
        dv((size_t)(2 * c));
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < sh.B; ++b) {
      const T* zb = z + b * P; const T* gb = g + b * P;
      T* q = dzn.data() + b * P;
      #pragma omp simd
      for (int64_t p = 0; p < P; ++p) q[p] = gr * (q[p] - k1 - (zb[p] - m) * rstd * k2);
      pad_planes(pooled + 2 * b * P, ppad.data(), 2, sh);
      weight_grad(q, ppad.data(), acc + 2, sh);
      weight_grad(q, ppad.data() + pplane, acc + 2 + KK, sh);
      if (!dx && !cf.w1) continue;
      pad_planes(q, gpad.data(), 1, sh);
      T* dm = dp.data(); T* dmx = dm + P;
      for (int64_t p = 0; p < 2 * P; ++p) dm[p] = 0;
      correlate_plane(gpad.data(), w, dm, sh, true);
      correlate_plane(gpad.data(), w + KK, dmx, sh, true);
      const int32_t* a = amax + b * P;
      T* dub = du_apart ? du.data() : dx + b * c * P;
      for (int ch = 0; ch < c; ++ch) {  // the spatial attention's dx is du itself
        const T* go = dy + (b * c + ch) * P;
        T* out = dub + ch * P;
        #pragma omp simd
        for (int64_t p = 0; p < P; ++p) out[p] = go[p] * gb[p] + dm[p] * inv_c + (a[p] == ch ? dmx[p] : (T)0);
      }
      if (!cf.w1) continue;
      const T* xb = x + b * sb;
      for (int ch = 0; ch < c; ++ch) {  // d loss / d g_c
        const T* row = xb + ch * P; const T* u = dub + ch * P;
        T s = 0;
        #pragma omp simd reduction(+ : s)
        for (int64_t p = 0; p < P; ++p) s += u[p] * row[p];
        dzc[ch] = s;
      }
      channel_mlp_backward_image(cw.pooled + 2 * b * c, cw.gate + b * c, dzc.data(), cf.w1, cf.w2, c, h, 1,
                                 acc + 2 + 2 * KK, acc + 2 + 2 * KK + nw, hpre.data(), dh.data(), dv.data());
      if (dx)
        channel_input_grad_image(dub, cw.gate + b * c, dv.data(), cw.amax + b * c, 1, c, P, dx + b * c * P);
    }
  }
  for (int i = 0; i < 2 * KK; ++i) dw[i] = (T)part.sum(2 + i, used);
  dbn[0] = (T)s2; dbn[1] = (T)s1;
  for (int64_t i = 0; i < nw; ++i) {
    dw1[i] = (T)part.sum(2 + 2 * KK + i, used);
    dw2[i] = (T)part.sum(2 + 2 * KK + nw + i, used);
  }
}

Shape plane_shape(int64_t B, int c, int H, int W, int K, int d) { return Shape{B, c, c, c, H, W, K, d}; }

}  // namespace

// The statements after dtype, with T the element type (float for dtype 0, double for 1).
#define GATES_DISPATCH(dtype, ...)                            \
  if (nthreads < 1) nthreads = 1;                             \
  if (dtype == 0) { typedef float T; __VA_ARGS__; }           \
  else if (dtype == 1) { typedef double T; __VA_ARGS__; }     \
  else return 1;                                              \
  return 0;

extern "C" {

int attnas_norm_forward(int dtype, const void* x, int64_t sb, const void* w, const void* bias, void* y, void* s,
                        int64_t B, int c, int H, int W, int K, int d, int nthreads) {
  const Shape sh = plane_shape(B, c, H, W, K, d);
  if (!valid(sh)) return 2;
  GATES_DISPATCH(dtype, norm_forward((const T*)x, sb, (const T*)w, (const T*)bias, (T*)y, (T*)s, sh, nthreads))
}

int attnas_norm_backward(int dtype, const void* x, int64_t sb, const void* w, const void* s, const void* dy,
                         void* dx, void* dw, void* db, int64_t B, int c, int H, int W, int K, int d, int nthreads) {
  const Shape sh = plane_shape(B, c, H, W, K, d);
  if (!valid(sh)) return 2;
  GATES_DISPATCH(dtype, norm_backward((const T*)x, sb, (const T*)w, (const T*)s, (const T*)dy, (T*)dx, (T*)dw,
                                      (T*)db, sh, nthreads))
}

// The spatial attention (w1 null) or CBAM (w1 (h, c), w2 (c, h)): work holds 5 B H W + 2
// values (SpatialWork), and for CBAM 4 B c more (ChannelWork); rm, rv may be null in mode 0.
int attnas_spatial_forward(int dtype, const void* x, int64_t sb, const void* w1, const void* w2, int h, const void* w,
                           const void* bn_w, const void* bn_b, void* rm, void* rv, double eps, double factor,
                           int mode, void* y, void* work, int64_t B, int c, int H, int W, int K, int d,
                           int nthreads) {
  const Shape sh = plane_shape(B, c, H, W, K, d);
  if (!valid(sh) || mode < 0 || mode > 2 || (mode == 1 && B * H * W < 2) || (mode != 0 && (!rm || !rv)) ||
      (w1 && (!w2 || h < 1)))
    return 2;
  GATES_DISPATCH(dtype, const ChannelFirst<T> cf{(const T*)w1, (const T*)w2, h, (T*)work + 5 * B * H * W + 2};
                 spatial_forward((const T*)x, sb, (const T*)w, (const T*)bn_w, (const T*)bn_b, (T*)rm, (T*)rv,
                                 (T)eps, factor, mode, (T*)y, (T*)work, cf, sh, nthreads))
}

// dw1, dw2: CBAM's MLP gradients (unused without w1).
int attnas_spatial_backward(int dtype, const void* x, int64_t sb, const void* w1, const void* w2, int h,
                            const void* w, const void* bn_w, double eps, int batch_stats, void* work, const void* dy,
                            void* dx, void* dw, void* dbn, void* dw1, void* dw2, int64_t B, int c, int H, int W, int K,
                            int d, int nthreads) {
  const Shape sh = plane_shape(B, c, H, W, K, d);
  if (!valid(sh) || (w1 && (!w2 || h < 1 || !dw1 || !dw2))) return 2;
  GATES_DISPATCH(dtype, const ChannelFirst<T> cf{(const T*)w1, (const T*)w2, h, (T*)work + 5 * B * H * W + 2};
                 spatial_backward((const T*)x, sb, (const T*)w, (const T*)bn_w, (T)eps, batch_stats, (T*)work,
                                  (const T*)dy, (T*)dx, (T*)dw, (T*)dbn, cf, (T*)dw1, (T*)dw2, sh, nthreads))
}

// work: 4 B C values (ChannelWork).
int attnas_channel_forward(int dtype, const void* x, int64_t sb, const void* w1, const void* w2, int with_max,
                           void* y, void* work, int64_t B, int C, int h, int64_t P, int nthreads) {
  if (B < 0 || C < 1 || h < 1 || P < 1 || P > 2147483647LL) return 2;
  GATES_DISPATCH(dtype, channel_forward((const T*)x, sb, (const T*)w1, (const T*)w2, with_max, (T*)y, (T*)work, B, C,
                                        h, P, nthreads))
}

int attnas_channel_backward(int dtype, const void* x, int64_t sb, const void* w1, const void* w2, int with_max,
                            void* work, const void* dy, void* dx, void* dw1, void* dw2, int64_t B, int C, int h,
                            int64_t P, int nthreads) {
  if (B < 0 || C < 1 || h < 1 || P < 1 || P > 2147483647LL) return 2;
  GATES_DISPATCH(dtype, channel_backward((const T*)x, sb, (const T*)w1, (const T*)w2, with_max, (T*)work,
                                         (const T*)dy, (T*)dx, (T*)dw1, (T*)dw2, B, C, h, P, nthreads))
}

}  // extern "C"

// Optional compiled CPU kernel for the projection phi of the HOGA cell (AutoLA Eq. 3).
//
// phi maps the ``K`` nodes of the cell back to ``C`` channels: a ``1 x 1`` convolution (with
// the weights of ``U_bar = sum_k U_k`` folded into those of every node), a training-mode batch
// normalisation, ReLU, a second ``1 x 1`` convolution and batch normalisation, then channel
// attention (Eq. 4). In PyTorch that is some fifteen operations and as many autograd nodes,
// with full-size passes for each batch normalisation's statistics, normalisation and backward.
// This kernel does the forward in three passes over the images and the backward in three, one
// image per thread at a time, the ``1 x 1`` convolutions as small matrix products on tiles of
// ``tp`` positions (256 for up to 16 channels, 128 up to 32, else 64: a tile row of each array is
// then one run of at least 1 KiB for the prefetcher, and a tile buffer about 16 KiB; fewer on
// planes smaller than a tile: the plane rounded up to 16), vectorised over positions, on NCHW
// planes (the nodes are read in place):
//
// forward
//   1. ``y1 = W_f x`` (``W_f`` the folded weights) and the moments (mean, centred sum of squares)
//      of every (image, channel) plane, merged tile by tile (as exact as a two-pass variance);
//   2. ``a = relu(BN1(y1))``, ``y2 = W_2 a`` and the moments of ``y2``'s planes;
//   then the channel attention's MLP on the plane means of ``z = BN2(y2)``, and
//   3. ``out = z * gate`` (NCHW or channels-last).
//
// backward (``dout`` given)
//   1. the plane sums of ``dout`` and ``dout * y2``: the gate's and BN2's gradients in
//      closed form, the MLP's backward;
//   2. ``dy2`` per position, ``dW_2 += dy2 a^T``, ``dr = (W_2^T dy2) [BN1(y1) > 0]`` stored, and
//      the sums BN1's backward needs;
//   3. ``dy1`` from ``dr``, ``dW_f += dy1 x^T`` and the nodes' gradients ``W_f^T dy1``.
//
// The weight gradients ``dW += dy v^T`` are products over a tile's positions too: ``v``'s tile
// is transposed (``L x L`` register transposes) so that the accumulators of an 8-row by
// 16-column block stay in registers for the whole tile, the positions innermost; summing the
// same products lane-wise (an accumulator per (row, column) pair in memory, loaded and stored
// per tile) took 1.1 of the 3.2 ms of phi at the last ResNet stage, against about 0.6 this way.
// They are summed in ``T`` over up to ``FLUSH`` positions, then per thread in ``double``, and
// reduced in thread order
// (deterministic for a given thread count). Built and loaded by :mod:`attnas.kernels._build`;
// :mod:`attnas.kernels.fused_phi` falls back to the PyTorch modules when it is unavailable.
#include "lanes.h"
#include "partials.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <omp.h>

namespace {

constexpr int64_t FLUSH = 4096;  // positions of weight-gradient products summed in T before adding into double

struct Dims {
  int64_t B, P;     // images, positions per image
  int K, c, C, hid;  // nodes, channels per node, output channels, MLP width
  int cl;            // out / dout in channels-last order
  int tp = 64;       // positions per tile (a multiple of 16; see tile_positions)
  int kc() const { return K * c; }
  int64_t N() const { return B * P; }
  int tile(int64_t t0) const { return (int)(P - t0 < tp ? P - t0 : tp); }
  // Positions computed per tile: tp, or P rounded up to 16 when P is smaller (small planes).
  int tw() const { return P >= tp ? tp : (int)((P + 15) / 16 * 16); }
};

// Rows of a tile: row r at p + r s (s = P in place in a plane, tp in a tile buffer).
template <typename T>
struct Rows {
  T* p; int64_t s;
  T* const* tab = nullptr;  // or one pointer per row (the nodes)
  T* operator[](int r) const { return tab ? tab[r] : p + r * s; }
};

// The K nodes U_k (B, c, P), planes contiguous, image k's batch stride sb[k]: row j of a tile
// is channel j mod c of node j / c.
template <typename T>
struct Nodes {
  T* const* ptr; const int64_t* sb;
  T* row(int64_t b, int j, int64_t t0, const Dims& d) const {
    return ptr[j / d.c] + b * sb[j / d.c] + (int64_t)(j % d.c) * d.P + t0;
  }
};

// The K c node rows of image b at t0..: in place when the tile is full (pointers in tab), else
// copied into tile with zeros past n.
template <typename T>
inline Rows<const T> node_rows_in(const Nodes<const T>& x, int64_t b, int64_t t0, int n, const Dims& d, T* tile,
                                  const T** tab) {
  for (int j = 0; j < d.kc(); ++j) {
    if (n == d.tw()) { tab[j] = x.row(b, j, t0, d); continue; }
    std::memcpy(tile + j * d.tp, x.row(b, j, t0, d), sizeof(T) * n);
    for (int p = n; p < d.tw(); ++p) tile[j * d.tp + p] = (T)0;
    tab[j] = tile + j * d.tp;
  }
  return {nullptr, 0, tab};
}

// W_f[o, j] = W1[o, j] + W1[o, K c + j mod c]: conv1 of [U_0; ...; U_{K-1}; sum_k U_k].
template <typename T>
std::vector<T> fold(const T* w1, const Dims& d) {
  const int kc = d.kc(), cin = kc + d.c;
  std::vector<T> wf((size_t)d.C * kc);
  for (int o = 0; o < d.C; ++o)
    for (int j = 0; j < kc; ++j) wf[o * kc + j] = w1[o * cin + j] + w1[o * cin + kc + j % d.c];
  return wf;
}

// w_t[i * nout + o] = w[o * nin + i].
template <typename T>
std::vector<T> transposed(const T* w, int nout, int nin) {
  std::vector<T> t((size_t)nout * nin);
  for (int o = 0; o < nout; ++o)
    for (int i = 0; i < nin; ++i) t[(size_t)i * nout + o] = w[o * nin + i];
  return t;
}

// y[o][0..tw) = sum_i w[o * nin + i] x[i][0..tw) for o0 <= o < o0 + OB: OB x 2 vector accumulators.
template <typename T, int OB>
inline void matmul_rows(const T* w, Rows<const T> x, Rows<T> y, int o0, int nin, int tw) {
  typedef typename Lanes<T>::V V;
  constexpr int L = Lanes<T>::L;
  for (int p = 0; p < tw; p += 2 * L) {
    V a[OB][2];
    for (int ob = 0; ob < OB; ++ob) a[ob][0] = a[ob][1] = V{};
    for (int i = 0; i < nin; ++i) {
      const V s0 = loadu(x[i] + p), s1 = loadu(x[i] + p + L);
      for (int ob = 0; ob < OB; ++ob) {
        const T wv = w[(o0 + ob) * nin + i];
        a[ob][0] += wv * s0; a[ob][1] += wv * s1;
      }
    }
    for (int ob = 0; ob < OB; ++ob) { storeu(y[o0 + ob] + p, a[ob][0]); storeu(y[o0 + ob] + p + L, a[ob][1]); }
  }
}

// y = w x on one tile: y[o] = sum_i w[o * nin + i] x[i].
template <typename T>
inline void tile_matmul(const T* w, Rows<const T> x, Rows<T> y, int nout, int nin, int tw) {
  int o = 0;
  for (; o + 8 <= nout; o += 8) matmul_rows<T, 8>(w, x, y, o, nin, tw);
  for (; o < nout; ++o) matmul_rows<T, 1>(w, x, y, o, nin, tw);
}

// out[p * ld + i] = v[i][p] for i < rows, p < cols: L x L blocks transposed in registers, the
// rest element by element. Serves the weight-gradient products (a tile transposed, ld = rows)
// and the channels-last tiles (tile_from_cl, tile_to_cl).
template <typename T>
inline void transpose_rows(Rows<const T> v, int rows, int cols, T* out, int64_t ld) {
  constexpr int L = Lanes<T>::L;
  const int ni = rows / L * L, np = cols / L * L;
  typename Lanes<T>::V r[L];
  for (int i = 0; i < ni; i += L)
    for (int p = 0; p < np; p += L) {
      for (int j = 0; j < L; ++j) r[j] = loadu(v[i + j] + p);
      transpose_lanes(r);
      for (int j = 0; j < L; ++j) storeu(out + (p + j) * ld + i, r[j]);
    }
  for (int i = 0; i < rows; ++i)
    for (int p = i < ni ? np : 0; p < cols; ++p) out[p * ld + i] = v[i][p];
}

// acc[o * nin + i0 ..] += sum_p u[o][p] vt[p * nin + i0 ..] for o0 <= o < o0 + OB and VB vectors
// of i: OB x VB accumulators in registers over the tile, the reduction index p innermost.
template <typename T, int OB, int VB>
inline void outer_cols(Rows<const T> u, const T* vt, T* acc, int o0, int i0, int nin, int tw) {
  typedef typename Lanes<T>::V V;
  constexpr int L = Lanes<T>::L;
  V a[OB][VB];
  for (int ob = 0; ob < OB; ++ob)
    for (int vb = 0; vb < VB; ++vb) a[ob][vb] = V{};
  const T* ur[OB];
  for (int ob = 0; ob < OB; ++ob) ur[ob] = u[o0 + ob];
  for (int p = 0; p < tw; ++p) {
    V s[VB];
    for (int vb = 0; vb < VB; ++vb) s[vb] = loadu(vt + (int64_t)p * nin + i0 + vb * L);
    for (int ob = 0; ob < OB; ++ob) {
      const T uv = ur[ob][p];
      for (int vb = 0; vb < VB; ++vb) a[ob][vb] += uv * s[vb];
    }
  }
  for (int ob = 0; ob < OB; ++ob)
    for (int vb = 0; vb < VB; ++vb) {
      T* dst = acc + (int64_t)(o0 + ob) * nin + i0 + vb * L;
      storeu(dst, loadu(dst) + a[ob][vb]);
    }
}

// acc[o * nin + i] += sum_p u[o][p] v[i][p] over one tile (both zero past the tile's end), as
// the product of u (nout x tw) and v transposed into vt (tw x nin, scratch): the accumulators
// stay in registers for the whole tile. flush_outer adds acc into g (double) and clears it.
template <typename T>
inline void tile_outer(Rows<const T> u, Rows<const T> v, T* vt, T* acc, int nout, int nin, int tw) {
  constexpr int L = Lanes<T>::L;
  transpose_rows(v, nin, tw, vt, nin);
  int o = 0;
  for (; o + 8 <= nout; o += 8) {
    int i = 0;
    for (; i + 2 * L <= nin; i += 2 * L) outer_cols<T, 8, 2>(u, vt, acc, o, i, nin, tw);
    for (; i + L <= nin; i += L) outer_cols<T, 8, 1>(u, vt, acc, o, i, nin, tw);
  }
  for (; o + 1 <= nout; ++o) {
    int i = 0;
    for (; i + L <= nin; i += L) outer_cols<T, 1, 1>(u, vt, acc, o, i, nin, tw);
  }
  const int ni = nin / L * L;  // columns past the last full vector
  for (int oo = 0; oo < nout; ++oo)
    for (int i = ni; i < nin; ++i) {
      T s = 0;
      for (int p = 0; p < tw; ++p) s += u[oo][p] * vt[(int64_t)p * nin + i];
      acc[(int64_t)oo * nin + i] += s;
    }
}

template <typename T>
inline void flush_outer(T* acc, double* g, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    g[k] += (double)acc[k];
    acc[k] = (T)0;
  }
}

// The rows of image b at positions t0.. of src (B, rows, P): in place when the tile is full,
// else copied into tile with zeros past n.
template <typename T>
inline Rows<const T> rows_in(const T* src, int64_t b, int rows, int64_t t0, int n, const Dims& d, T* tile) {
  if (n == d.tw()) return {src + b * rows * d.P + t0, d.P};
  for (int r = 0; r < rows; ++r) {
    std::memcpy(tile + r * d.tp, src + (b * rows + r) * d.P + t0, sizeof(T) * n);
    for (int p = n; p < d.tw(); ++p) tile[r * d.tp + p] = (T)0;
  }
  return {tile, d.tp};
}

// Where to write rows of image b at t0.. of dst (B, rows, P): in place when the tile is full,
// else tile (then put_rows copies the n positions out).
template <typename T>
inline Rows<T> rows_out(T* dst, int64_t b, int rows, int64_t t0, int n, const Dims& d, T* tile) {
  if (n == d.tw()) return {dst + b * rows * d.P + t0, d.P};
  return {tile, d.tp};
}

template <typename T>
inline void put_rows(Rows<T> r, T* dst, int64_t b, int rows, int64_t t0, int n, const Dims& d) {
  if (n == d.tw()) return;
  for (int i = 0; i < rows; ++i) std::memcpy(dst + (b * rows + i) * d.P + t0, r[i], sizeof(T) * n);
}

// Between a tile (C rows of ts positions) and n channels-last positions (C values each).
template <typename T>
inline void tile_from_cl(T* tile, int ts, const T* cl, int n, int C) {
  transpose_rows(Rows<const T>{cl, C}, n, C, tile, ts);
}

template <typename T>
inline void tile_to_cl(T* cl, const T* tile, int ts, int n, int C) {
  transpose_rows(Rows<const T>{tile, ts}, C, n, cl, C);
}

// dout (NCHW or channels-last) rows of image b at t0.. (zeros past n).
template <typename T>
inline Rows<const T> out_rows_in(const T* src, int64_t b, int64_t t0, int n, const Dims& d, T* tile) {
  if (!d.cl) return rows_in(src, b, d.C, t0, n, d, tile);
  for (int o = 0; o < d.C; ++o)
    for (int p = n; p < d.tw(); ++p) tile[o * d.tp + p] = (T)0;
  tile_from_cl(tile, d.tp, src + (b * d.P + t0) * d.C, n, d.C);
  return {tile, d.tp};
}

template <typename T>
inline T row_sum(const T* r, int n) {
  T s = 0;
  #pragma omp simd reduction(+ : s)
  for (int p = 0; p < n; ++p) s += r[p];
  return s;
}

// Count, mean and centred sum of squares of a set of values, merged tile by tile (Chan et al.'s
// pairwise update): as exact as a two-pass variance, without a second pass over memory.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  void merge(double nb, double mb, double m2b) {
    if (nb == 0) return;
    const double tot = n + nb, delta = mb - mean;
    mean += delta * nb / tot;
    m2 += m2b + delta * delta * n * nb / tot;
    n = tot;
  }
  template <typename T> void add(const T* r, int cnt) {  // a tile row: two passes over it in L1
    const T m = row_sum(r, cnt) / (T)cnt;
    T q = 0;
    #pragma omp simd reduction(+ : q)
    for (int p = 0; p < cnt; ++p) q += (r[p] - m) * (r[p] - m);
    merge(cnt, (double)m, (double)q);
  }
};

// Batch mean and biased variance per channel from the moments of every (image, channel) plane.
inline void batch_stats(const std::vector<Moments>& planes, const Dims& d, std::vector<double>& mean,
                        std::vector<double>& var) {
  for (int o = 0; o < d.C; ++o) {
    Moments m;
    for (int64_t b = 0; b < d.B; ++b) m.merge(planes[b * d.C + o].n, planes[b * d.C + o].mean, planes[b * d.C + o].m2);
    mean[o] = m.mean;
    var[o] = m.m2 / m.n;
  }
}

// rm, rv <- (1 - f) (rm, rv) + f (mean, unbiased variance), as nn.BatchNorm2d updates its running
// statistics in training (rm or rv null: the batch norm keeps none).
template <typename T>
inline void update_running(T* rm, T* rv, const std::vector<double>& mean, const std::vector<double>& var, int C,
                           double f, double n) {
  if (!rm || !rv) return;
  for (int o = 0; o < C; ++o) {
    rm[o] = (T)((1.0 - f) * (double)rm[o] + f * mean[o]);
    rv[o] = (T)((1.0 - f) * (double)rv[o] + f * var[o] * n / (n - 1.0));
  }
}

// stats (6, C): mean1, var1, mean2, var2 (biased), inv1, inv2. avg (B, C), h (B, hid), gate (B, C).
// run: the running statistics rm1, rv1, rm2, rv2 (null where not kept), updated with weights f1, f2.
template <typename T>
void forward(const Nodes<const T>& x, const T* w1, const T* g1, const T* be1, const T* w2, const T* g2, const T* be2,
             const T* fc1, const T* fc2, double eps1, double eps2, T* out, T* y1, T* y2, T* stats, T* avg, T* h,
             T* gate, T* const* run, double f1, double f2, const Dims& d, int nthreads) {
  const int C = d.C, kc = d.kc(), tw = d.tw();
  const std::vector<T> wf = fold(w1, d);
  std::vector<Moments> pm((size_t)(d.B * C));
  std::vector<double> mean(C), var(C);
  // 1. y1 = W_f x, the moments of every plane
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> xt((size_t)kc * d.tp), yt((size_t)C * d.tp);
    std::vector<const T*> tab(kc);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int o = 0; o < C; ++o) pm[b * C + o] = Moments();
      for (int64_t t0 = 0; t0 < d.P; t0 += d.tp) {
        const int n = d.tile(t0);
        const Rows<T> y = rows_out(y1, b, C, t0, n, d, yt.data());
        tile_matmul<T>(wf.data(), node_rows_in(x, b, t0, n, d, xt.data(), tab.data()), y, C, kc, tw);
        put_rows(y, y1, b, C, t0, n, d);
        for (int o = 0; o < C; ++o) pm[b * C + o].add(y[o], n);
      }
    }
  }
  batch_stats(pm, d, mean, var);
  std::vector<T> s1(C), t1(C);
  for (int o = 0; o < C; ++o) {
    const double inv = 1.0 / std::sqrt(var[o] + eps1);
    stats[o] = (T)mean[o]; stats[C + o] = (T)var[o]; stats[4 * C + o] = (T)inv;
    s1[o] = (T)(g1[o] * inv); t1[o] = (T)(be1[o] - mean[o] * g1[o] * inv);
  }
  update_running(run[0], run[1], mean, var, C, f1, (double)d.N());
  // 2. a = relu(BN1(y1)), y2 = W2 a, the moments of every plane
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> at((size_t)C * d.tp), yt((size_t)C * d.tp);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int o = 0; o < C; ++o) pm[b * C + o] = Moments();
      for (int64_t t0 = 0; t0 < d.P; t0 += d.tp) {
        const int n = d.tile(t0);
        for (int i = 0; i < C; ++i) {
          T* a = at.data() + i * d.tp;
          const T* y = y1 + (b * C + i) * d.P + t0;
          const T s = s1[i], t = t1[i];
          #pragma omp simd
          for (int p = 0; p < n; ++p) { const T v = y[p] * s + t; a[p] = v > 0 ? v : (T)0; }
          for (int p = n; p < tw; ++p) a[p] = (T)0;
        }
        const Rows<T> y = rows_out(y2, b, C, t0, n, d, yt.data());
        tile_matmul<T>(w2, Rows<const T>{at.data(), d.tp}, y, C, C, tw);
        put_rows(y, y2, b, C, t0, n, d);
        for (int o = 0; o < C; ++o) pm[b * C + o].add(y[o], n);
      }
    }
  }
  batch_stats(pm, d, mean, var);
  std::vector<T> s2(C), t2(C);
  for (int o = 0; o < C; ++o) {
    const double inv = 1.0 / std::sqrt(var[o] + eps2);
    stats[2 * C + o] = (T)mean[o]; stats[3 * C + o] = (T)var[o]; stats[5 * C + o] = (T)inv;
    s2[o] = (T)(g2[o] * inv); t2[o] = (T)(be2[o] - mean[o] * g2[o] * inv);
  }
  update_running(run[2], run[3], mean, var, C, f2, (double)d.N());
  // channel attention (Eq. 4) on z = BN2(y2): gate = sigmoid(fc2 relu(fc1 mean_P z))
  for (int64_t b = 0; b < d.B; ++b) {
    for (int o = 0; o < C; ++o) avg[b * C + o] = (T)pm[b * C + o].mean * s2[o] + t2[o];
    for (int m = 0; m < d.hid; ++m) {
      T v = 0;
      for (int o = 0; o < C; ++o) v += fc1[m * C + o] * avg[b * C + o];
      h[b * d.hid + m] = v > 0 ? v : (T)0;
    }
    for (int o = 0; o < C; ++o) {
      T v = 0;
      for (int m = 0; m < d.hid; ++m) v += fc2[o * d.hid + m] * h[b * d.hid + m];
      gate[b * C + o] = (T)1 / ((T)1 + std::exp(-v));
    }
  }
  // 3. out = z * gate
  if (!d.cl) {
    #pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t it = 0; it < d.B * C; ++it) {
      const int o = (int)(it % C);
      const T g = gate[it], s = s2[o] * g, t = t2[o] * g;
      const T* y = y2 + it * d.P;
      T* z = out + it * d.P;
      #pragma omp simd
      for (int64_t p = 0; p < d.P; ++p) z[p] = y[p] * s + t;
    }
    return;
  }
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> zt((size_t)C * d.tp);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t t0 = 0; t0 < d.P; t0 += d.tp) {
        const int n = d.tile(t0);
        T* dst = out + (b * d.P + t0) * C;
        for (int o = 0; o < C; ++o) {
          const T g = gate[b * C + o], s = s2[o] * g, t = t2[o] * g;
          const T* y = y2 + (b * C + o) * d.P + t0;
          T* z = zt.data() + o * d.tp;
          #pragma omp simd
          for (int p = 0; p < n; ++p) z[p] = y[p] * s + t;
        }
        tile_to_cl(dst, zt.data(), d.tp, n, C);
      }
  }
}

template <typename T>
void backward(const T* dout, const Nodes<const T>& x, const T* w1, const T* g1, const T* be1, const T* w2, const T* g2,
              const T* fc1, const T* fc2, const T* y1, const T* y2, const T* stats, const T* avg, const T* h,
              const T* gate, T* dr, const Nodes<T>& dx, T* dw1, T* dg1, T* dbe1, T* dw2, T* dg2, T* dbe2, T* dfc1, T* dfc2,
              const Dims& d, int nthreads) {
  const int C = d.C, kc = d.kc(), hid = d.hid, tw = d.tw();
  const double N = (double)d.N(), P = (double)d.P;
  const T* mean1 = stats; const T* mean2 = stats + 2 * C; const T* inv1 = stats + 4 * C; const T* inv2 = stats + 5 * C;
  const std::vector<T> wf = fold(w1, d), wft = transposed(wf.data(), C, kc), w2t = transposed(w2, C, C);
  // 1. plane sums of dout, dout * y2 and y2
  std::vector<double> sd(d.B * C), sdy(d.B * C), ps2(d.B * C);
  #pragma omp parallel num_threads(nthreads)
  {
    std::vector<T> gt((size_t)C * d.tp);
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int o = 0; o < C; ++o) sd[b * C + o] = sdy[b * C + o] = ps2[b * C + o] = 0.0;
      for (int64_t t0 = 0; t0 < d.P; t0 += d.tp) {
        const int n = d.tile(t0);
        const Rows<const T> g = out_rows_in(dout, b, t0, n, d, gt.data());
        for (int o = 0; o < C; ++o) {
          const T* gr = g[o]; const T* y = y2 + (b * C + o) * d.P + t0;
          T s0 = 0, s1 = 0, s2 = 0;
          #pragma omp simd reduction(+ : s0, s1, s2)
          for (int p = 0; p < n; ++p) { s0 += gr[p]; s1 += gr[p] * y[p]; s2 += y[p]; }
          sd[b * C + o] += s0; sdy[b * C + o] += s1; ps2[b * C + o] += s2;
        }
      }
    }
  }
  // The gate's, the MLP's and BN2's gradients in closed form. z = s2 (y2 - mean_P y2) + avg.
  std::vector<double> davg((size_t)d.B * C), gdfc1((size_t)hid * C, 0.0), gdfc2((size_t)C * hid, 0.0);
  std::vector<double> dz_sum(C, 0.0), dzx_sum(C, 0.0), dzz(C), dh(hid);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int m = 0; m < hid; ++m) dh[m] = 0.0;
    for (int o = 0; o < C; ++o) {
      const int64_t i = b * C + o;
      const double s2 = (double)g2[o] * inv2[o];
      const double dgate = s2 * (sdy[i] - sd[i] * ps2[i] / P) + (double)avg[i] * sd[i];  // sum_P dout z
      const double gv = gate[i];
      dzz[o] = dgate * gv * (1.0 - gv);
      for (int m = 0; m < hid; ++m) {
        gdfc2[o * hid + m] += dzz[o] * h[b * hid + m];
        dh[m] += (double)fc2[o * hid + m] * dzz[o];
      }
    }
    for (int m = 0; m < hid; ++m)
      if (!(h[b * hid + m] > 0)) dh[m] = 0.0;
    for (int o = 0; o < C; ++o) {
      const int64_t i = b * C + o;
      double v = 0;
      for (int m = 0; m < hid; ++m) {
        v += (double)fc1[m * C + o] * dh[m];
        gdfc1[m * C + o] += dh[m] * avg[i];
      }
      davg[i] = v;  // dz = dout gate + davg / P;  xhat2 = (y2 - mean2) inv2
      const double gv = gate[i];
      dz_sum[o] += gv * sd[i] + v;
      dzx_sum[o] += inv2[o] * (gv * (sdy[i] - mean2[o] * sd[i]) + v / P * (ps2[i] - P * mean2[o]));
    }
  }
  for (int i = 0; i < hid * C; ++i) { dfc1[i] = (T)gdfc1[i]; dfc2[i] = (T)gdfc2[i]; }
  for (int o = 0; o < C; ++o) { dbe2[o] = (T)dz_sum[o]; dg2[o] = (T)dzx_sum[o]; }
  // dy2 = k2 (dz - dz_sum / N - xhat2 dzx_sum / N) = A[b, o] dout + B2[o] y2 + C2[b, o]
  std::vector<T> A((size_t)d.B * C), C2((size_t)d.B * C), B2(C), s1(C), t1(C);
  for (int o = 0; o < C; ++o) {
    const double k = (double)g2[o] * inv2[o];
    B2[o] = (T)(-k * inv2[o] * dzx_sum[o] / N);
    for (int64_t b = 0; b < d.B; ++b) {
      A[b * C + o] = (T)(k * gate[b * C + o]);
      C2[b * C + o] = (T)(k * (davg[b * C + o] / P - dz_sum[o] / N + mean2[o] * inv2[o] * dzx_sum[o] / N));
    }
    s1[o] = g1[o] * inv1[o];
    t1[o] = be1[o] - mean1[o] * s1[o];
  }
  // 2. dy2; dW2 += dy2 a^T; dr = (W2^T dy2) [BN1(y1) > 0]; sum dr and sum dr y1 per plane
  Partials pw2(nthreads, (int64_t)C * C);
  int used = 1;
  std::vector<double> sr((size_t)d.B * C), sry((size_t)d.B * C);
  #pragma omp parallel num_threads(nthreads)
  {
    const int t = omp_get_thread_num();
    #pragma omp single
    used = omp_get_num_threads();
    std::vector<T> gt((size_t)C * d.tp), at((size_t)C * d.tp), rt((size_t)C * d.tp);
    std::vector<T> acc((size_t)C * C, (T)0), vt((size_t)d.tp * C);
    int64_t pending = 0;
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int o = 0; o < C; ++o) sr[b * C + o] = sry[b * C + o] = 0.0;
      for (int64_t t0 = 0; t0 < d.P; t0 += d.tp) {
        const int n = d.tile(t0);
        const Rows<const T> g = out_rows_in(dout, b, t0, n, d, gt.data());
        for (int o = 0; o < C; ++o) {  // gt <- dy2, zeros past n
          const T* gr = g[o]; const T* y = y2 + (b * C + o) * d.P + t0;
          T* dy = gt.data() + o * d.tp;
          const T a = A[b * C + o], bc = B2[o], cc = C2[b * C + o];
          #pragma omp simd
          for (int p = 0; p < n; ++p) dy[p] = a * gr[p] + bc * y[p] + cc;
          for (int p = n; p < tw; ++p) dy[p] = (T)0;
        }
        for (int i = 0; i < C; ++i) {  // at <- a = relu(BN1(y1)), zeros past n
          T* a = at.data() + i * d.tp; const T* y = y1 + (b * C + i) * d.P + t0;
          const T s = s1[i], tt = t1[i];
          #pragma omp simd
          for (int p = 0; p < n; ++p) { const T v = y[p] * s + tt; a[p] = v > 0 ? v : (T)0; }
          for (int p = n; p < tw; ++p) a[p] = (T)0;
        }
        const Rows<const T> dy2{gt.data(), d.tp}, act{at.data(), d.tp};
        tile_outer<T>(dy2, act, vt.data(), acc.data(), C, C, tw);
        tile_matmul<T>(w2t.data(), dy2, Rows<T>{rt.data(), d.tp}, C, C, tw);
        for (int i = 0; i < C; ++i) {
          const T* r = rt.data() + i * d.tp; const T* a = at.data() + i * d.tp;
          const T* y = y1 + (b * C + i) * d.P + t0;
          T* dst = dr + (b * C + i) * d.P + t0;
          T u = 0, v = 0;
          #pragma omp simd reduction(+ : u, v)
          for (int p = 0; p < n; ++p) { const T q = a[p] > 0 ? r[p] : (T)0; dst[p] = q; u += q; v += q * y[p]; }
          sr[b * C + i] += u; sry[b * C + i] += v;
        }
      }
      if ((pending += d.P) >= FLUSH) { flush_outer<T>(acc.data(), pw2.of(t), (int64_t)C * C); pending = 0; }
    }
    flush_outer<T>(acc.data(), pw2.of(t), (int64_t)C * C);
  }
  for (int64_t i = 0; i < (int64_t)C * C; ++i) dw2[i] = (T)pw2.sum(i, used);
  // BN1: dy1 = k1 dr + B1[o] y1 + C1[o]
  std::vector<T> k1(C), B1(C), C1(C);
  for (int o = 0; o < C; ++o) {
    double u = 0, v = 0;
    for (int64_t b = 0; b < d.B; ++b) { u += sr[b * C + o]; v += sry[b * C + o]; }
    const double dgm = inv1[o] * (v - mean1[o] * u), k = (double)g1[o] * inv1[o];
    dbe1[o] = (T)u; dg1[o] = (T)dgm;
    k1[o] = (T)k;
    B1[o] = (T)(-k * inv1[o] * dgm / N);
    C1[o] = (T)(k * (-u / N + mean1[o] * inv1[o] * dgm / N));
  }
  // 3. dy1; dW_f += dy1 x^T; dx = W_f^T dy1
  Partials pwf(nthreads, (int64_t)C * kc);
  #pragma omp parallel num_threads(nthreads)
  {
    const int t = omp_get_thread_num();
    #pragma omp single
    used = omp_get_num_threads();
    std::vector<T> rt((size_t)C * d.tp), xt((size_t)kc * d.tp), dt((size_t)kc * d.tp);
    std::vector<const T*> tab(kc);
    std::vector<T*> gtab(kc);
    std::vector<T> acc((size_t)C * kc, (T)0), vt((size_t)d.tp * kc);
    int64_t pending = 0;
    #pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int64_t t0 = 0; t0 < d.P; t0 += d.tp) {
        const int n = d.tile(t0);
        for (int o = 0; o < C; ++o) {  // rt <- dy1, zeros past n
          const T* r = dr + (b * C + o) * d.P + t0; const T* y = y1 + (b * C + o) * d.P + t0;
          T* dy = rt.data() + o * d.tp;
          const T k = k1[o], bb = B1[o], cc = C1[o];
          #pragma omp simd
          for (int p = 0; p < n; ++p) dy[p] = k * r[p] + bb * y[p] + cc;
          for (int p = n; p < tw; ++p) dy[p] = (T)0;
        }
        const Rows<const T> dy1{rt.data(), d.tp};
        tile_outer<T>(dy1, node_rows_in(x, b, t0, n, d, xt.data(), tab.data()), vt.data(), acc.data(), C, kc, tw);
        if (n == tw) {  // straight into the nodes' gradients
          for (int j = 0; j < kc; ++j) gtab[j] = dx.row(b, j, t0, d);
          tile_matmul<T>(wft.data(), dy1, Rows<T>{nullptr, 0, gtab.data()}, kc, C, tw);
        } else {
          tile_matmul<T>(wft.data(), dy1, Rows<T>{dt.data(), d.tp}, kc, C, tw);
          for (int j = 0; j < kc; ++j) std::memcpy(dx.row(b, j, t0, d), dt.data() + j * d.tp, sizeof(T) * n);
        }
      }
      if ((pending += d.P) >= FLUSH) { flush_outer<T>(acc.data(), pwf.of(t), (int64_t)C * kc); pending = 0; }
    }
    flush_outer<T>(acc.data(), pwf.of(t), (int64_t)C * kc);
  }
  const int cin = kc + d.c;
  for (int o = 0; o < C; ++o) {
    for (int m = 0; m < d.c; ++m) dw1[o * cin + kc + m] = (T)0;
    for (int j = 0; j < kc; ++j) {
      const T v = (T)pwf.sum((int64_t)o * kc + j, used);
      dw1[o * cin + j] = v;
      dw1[o * cin + kc + j % d.c] += v;
    }
  }
}

// Positions per tile for C channels: about 4096 values per tile buffer, 64 to 256 positions.
// With 64-position tiles the 16-channel planes of 32 x 32 were read as 256-byte runs at a 4 KiB
// stride, too short for the hardware prefetcher: phi took 5.3 ms forward + backward at batch
// 64, against 4.3 ms with 256 (two threads).
inline int tile_positions(int C) { return C <= 16 ? 256 : C <= 32 ? 128 : 64; }

bool valid(const Dims& d) {
  return d.B >= 1 && d.P >= 1 && d.B * d.P >= 2 && d.K >= 1 && d.c >= 1 && d.C >= 1 && d.hid >= 1;
}

}  // namespace

extern "C" {

// dtype 0: float32, 1: float64. xs: K pointers to the nodes (B, c, P) with planes contiguous and
// batch strides xsb; out (B, C, P) NCHW or channels-last (cl); w1 (C, (K + 1) c); y1, y2 (B, C, P)
// saved for the backward; stats (6, C); avg, gate (B, C); h (B, hid); run: 4 pointers to the running
// mean and variance of BN1 and BN2 (C each, null where not kept), moved with weights f1, f2.
int attnas_phi_forward(int dtype, const void* const* xs, const int64_t* xsb, const void* w1, const void* g1, const void* be1, const void* w2,
                       const void* g2, const void* be2, const void* fc1, const void* fc2, double eps1, double eps2,
                       void* out, void* y1, void* y2, void* stats, void* avg, void* h, void* gate,
                       void* const* run, double f1, double f2, int64_t B,
                       int64_t P, int K, int c, int C, int hid, int cl, int nthreads) {
  Dims d{B, P, K, c, C, hid, cl};
  d.tp = tile_positions(C);
  if (!valid(d)) return 2;
  if (nthreads < 1) nthreads = 1;
#define PHI_FWD(T) forward<T>(Nodes<const T>{(const T* const*)xs, xsb}, (const T*)w1, (const T*)g1, (const T*)be1, (const T*)w2, (const T*)g2, \
    (const T*)be2, (const T*)fc1, (const T*)fc2, eps1, eps2, (T*)out, (T*)y1, (T*)y2, (T*)stats, (T*)avg, (T*)h, \
    (T*)gate, (T* const*)run, f1, f2, d, nthreads)
  if (dtype == 0) PHI_FWD(float);
  else if (dtype == 1) PHI_FWD(double);
  else return 1;
#undef PHI_FWD
  return 0;
}

// dout like out; dr (B, C, P) scratch; dxs: K pointers to the nodes' gradients (B, c, P),
// contiguous; every parameter gradient written.
int attnas_phi_backward(int dtype, const void* dout, const void* const* xs, const int64_t* xsb, const void* w1, const void* g1, const void* be1,
                        const void* w2, const void* g2, const void* fc1, const void* fc2, const void* y1,
                        const void* y2, const void* stats, const void* avg, const void* h, const void* gate, void* dr,
                        void* const* dxs, void* dw1, void* dg1, void* dbe1, void* dw2, void* dg2, void* dbe2, void* dfc1,
                        void* dfc2, int64_t B, int64_t P, int K, int c, int C, int hid, int cl, int nthreads) {
  Dims d{B, P, K, c, C, hid, cl};
  d.tp = tile_positions(C);
  if (!valid(d)) return 2;
  if (nthreads < 1) nthreads = 1;
  const std::vector<int64_t> dsb((size_t)K, (int64_t)c * P);
#define PHI_BWD(T) backward<T>((const T*)dout, Nodes<const T>{(const T* const*)xs, xsb}, (const T*)w1, (const T*)g1, (const T*)be1, (const T*)w2, \
    (const T*)g2, (const T*)fc1, (const T*)fc2, (const T*)y1, (const T*)y2, (const T*)stats, (const T*)avg, \
    (const T*)h, (const T*)gate, (T*)dr, Nodes<T>{(T* const*)dxs, dsb.data()}, (T*)dw1, (T*)dg1, (T*)dbe1, (T*)dw2, (T*)dg2, (T*)dbe2, (T*)dfc1, \
    (T*)dfc2, d, nthreads)
  if (dtype == 0) PHI_BWD(float);
  else if (dtype == 1) PHI_BWD(double);
  else return 1;
#undef PHI_BWD
  return 0;
}

}  // extern "C"

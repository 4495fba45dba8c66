"""Optional fused CPU kernel for local self-attention (compiled on first use).

The eager :func:`attnas.ops.local_self_attention.local_attention` streams every
``k*k``-sized intermediate through memory once per PyTorch kernel; this C++ kernel
keeps a tile of 64 query positions' logits in cache and does the logits, the softmax and
the weighted sum (and their backward) in one pass per tile, parallel over (image, head)
with ``at::parallel_for`` (so it follows ``torch.set_num_threads``). It works on the same
flattened, padded layout and returns the same result.

It is built with :func:`torch.utils.cpp_extension.load_inline` the first time it is
asked for (about a minute; cached in the torch extensions folder afterwards) and needs a
C++ compiler and ninja. :func:`load` returns ``None`` (and :func:`unavailable_reason`
says why) when it cannot be built, so callers fall back to the eager implementation.
"""

from __future__ import annotations

import threading
from typing import Any

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {
constexpr int64_t TILE = 16;  // queries per tile (one AVX-512 vector of floats); N is padded to a multiple

// exp(x) for x <= 0 (softmax logits minus their maximum), vectorisable: Cody-Waite range
// reduction and a degree-6 polynomial (relative error ~2e-7); 0 below -87 (and for -inf).
inline float exp_nonpos(float x) {
  const bool tiny = !(x > -87.0f);
  x = tiny ? -87.0f : x;
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return tiny ? 0.0f : p * scale;
}
inline double exp_nonpos(double x) { return std::exp(x); }

// Attention weights of the tile of queries p0..p0+TILE-1 of one (image, head):
// A[o*TILE + t] = softmax_o(q.k + q.r + mask). Offsets are the outer loop so each logit
// vector is accumulated in registers over the head's channels.
template <typename T, bool UNIT>
inline void tile_attention(const T* __restrict__ qb, const T* __restrict__ kb, const T* __restrict__ Rh,
                           const T* __restrict__ mask, T* __restrict__ A, T* __restrict__ rel, int64_t p0, int64_t N,
                           int64_t L, int64_t d, int64_t ks, int64_t s, int64_t Wp) {
  const int64_t K2 = ks * ks;
  for (int64_t j = 0; j < 2 * ks; ++j) {
    T acc[TILE];
    const T* mj = mask + j * N + p0;
    for (int64_t t = 0; t < TILE; ++t) acc[t] = mj[t];
    for (int64_t c = 0; c < d; ++c) {
      const T w = Rh[j * d + c];
      const T* qc = qb + c * N + p0;
      for (int64_t t = 0; t < TILE; ++t) acc[t] += w * qc[t];
    }
    for (int64_t t = 0; t < TILE; ++t) rel[j * TILE + t] = acc[t];
  }
  T mx[TILE];
  for (int64_t t = 0; t < TILE; ++t) mx[t] = -INFINITY;
  for (int64_t a = 0; a < ks; ++a)
    for (int64_t bb = 0; bb < ks; ++bb) {
      T acc[TILE];
      const T* ra = rel + a * TILE;
      const T* rb = rel + (ks + bb) * TILE;
      for (int64_t t = 0; t < TILE; ++t) acc[t] = ra[t] + rb[t];
      const int64_t off = a * Wp + bb + s * p0;
      for (int64_t c = 0; c < d; ++c) {
        const T* qc = qb + c * N + p0;
        const T* kc = kb + c * L + off;
        for (int64_t t = 0; t < TILE; ++t) acc[t] += qc[t] * kc[UNIT ? t : s * t];
      }
      T* Ao = A + (a * ks + bb) * TILE;
      for (int64_t t = 0; t < TILE; ++t) { Ao[t] = acc[t]; mx[t] = std::max(mx[t], acc[t]); }
    }
  T sm[TILE];
  for (int64_t t = 0; t < TILE; ++t) sm[t] = 0;
  for (int64_t o = 0; o < K2; ++o) {
    T* Ao = A + o * TILE;
    for (int64_t t = 0; t < TILE; ++t) { Ao[t] = exp_nonpos(Ao[t] - mx[t]); sm[t] += Ao[t]; }
  }
  for (int64_t t = 0; t < TILE; ++t) sm[t] = T(1) / sm[t];
  for (int64_t o = 0; o < K2; ++o) {
    T* Ao = A + o * TILE;
    for (int64_t t = 0; t < TILE; ++t) Ao[t] *= sm[t];
  }
}

template <typename T, bool UNIT>
void forward_impl(const T* q, const T* k, const T* v, const T* R, const T* mask, T* out, T* attn,
                  int64_t B, int64_t H, int64_t d, int64_t N, int64_t L, int64_t ks, int64_t s, int64_t Wp) {
  const int64_t K2 = ks * ks, C = H * d;
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> Abuf(K2 * TILE), rel(2 * ks * TILE);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const T* qb = q + (b * C + h * d) * N;
      const T* kb = k + (b * C + h * d) * L;
      const T* vb = v + (b * C + h * d) * L;
      T* ob = out + (b * C + h * d) * N;
      T* ab = attn == nullptr ? nullptr : attn + (b * H + h) * K2 * N;
      const T* Rh = R + h * 2 * ks * d;
      T* A = Abuf.data();
      for (int64_t p0 = 0; p0 < N; p0 += TILE) {
        tile_attention<T, UNIT>(qb, kb, Rh, mask, A, rel.data(), p0, N, L, d, ks, s, Wp);
        if (ab != nullptr)
          for (int64_t o = 0; o < K2; ++o)
            for (int64_t t = 0; t < TILE; ++t) ab[o * N + p0 + t] = A[o * TILE + t];
        for (int64_t c = 0; c < d; ++c) {
          T acc[TILE];
          for (int64_t t = 0; t < TILE; ++t) acc[t] = 0;
          for (int64_t a = 0; a < ks; ++a)
            for (int64_t bb = 0; bb < ks; ++bb) {
              const T* Ao = A + (a * ks + bb) * TILE;
              const T* vc = vb + c * L + a * Wp + bb + s * p0;
              for (int64_t t = 0; t < TILE; ++t) acc[t] += Ao[t] * vc[UNIT ? t : s * t];
            }
          T* oc = ob + c * N + p0;
          for (int64_t t = 0; t < TILE; ++t) oc[t] = acc[t];
        }
      }
    }
  });
}

template <typename T, bool UNIT>
void backward_impl(const T* q, const T* k, const T* v, const T* R, const T* mask, const T* attn, const T* g,
                   T* dq, T* dk, T* dv, T* dR, int64_t B, int64_t H, int64_t d, int64_t N, int64_t L,
                   int64_t ks, int64_t s, int64_t Wp) {
  const int64_t K2 = ks * ks, C = H * d;
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> Abuf(K2 * TILE), dLbuf(K2 * TILE), rel(2 * ks * TILE), drel(2 * ks * TILE);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const T* qb = q + (b * C + h * d) * N;
      const T* kb = k + (b * C + h * d) * L;
      const T* vb = v + (b * C + h * d) * L;
      const T* gb = g + (b * C + h * d) * N;
      const T* ab = attn == nullptr ? nullptr : attn + (b * H + h) * K2 * N;
      T* dqb = dq + (b * C + h * d) * N;
      T* dkb = dk + (b * C + h * d) * L;
      T* dvb = dv + (b * C + h * d) * L;
      T* dRb = dR + (b * H + h) * 2 * ks * d;
      const T* Rh = R + h * 2 * ks * d;
      T* A = Abuf.data();
      T* dL = dLbuf.data();
      for (int64_t p0 = 0; p0 < N; p0 += TILE) {
        if (ab == nullptr) {
          tile_attention<T, UNIT>(qb, kb, Rh, mask, A, rel.data(), p0, N, L, d, ks, s, Wp);
        } else {
          for (int64_t o = 0; o < K2; ++o)
            for (int64_t t = 0; t < TILE; ++t) A[o * TILE + t] = ab[o * N + p0 + t];
        }
        // dA[o] = sum_c g_c v_c(o) (into dL), dv_c(o) += A[o] g_c; then dL = A (dA - sum_o A dA)
        T dot[TILE];
        for (int64_t t = 0; t < TILE; ++t) dot[t] = 0;
        for (int64_t a = 0; a < ks; ++a)
          for (int64_t bb = 0; bb < ks; ++bb) {
            const int64_t o = a * ks + bb, off = a * Wp + bb + s * p0;
            const T* Ao = A + o * TILE;
            T acc[TILE];
            for (int64_t t = 0; t < TILE; ++t) acc[t] = 0;
            for (int64_t c = 0; c < d; ++c) {
              const T* gc = gb + c * N + p0;
              const T* vc = vb + c * L + off;
              T* dvc = dvb + c * L + off;
              for (int64_t t = 0; t < TILE; ++t) {
                acc[t] += gc[t] * vc[UNIT ? t : s * t];
                dvc[UNIT ? t : s * t] += Ao[t] * gc[t];
              }
            }
            T* dLo = dL + o * TILE;
            for (int64_t t = 0; t < TILE; ++t) { dLo[t] = acc[t]; dot[t] += Ao[t] * acc[t]; }
          }
        T rsum[TILE];
        for (int64_t j = 0; j < 2 * ks; ++j)
          for (int64_t t = 0; t < TILE; ++t) drel[j * TILE + t] = 0;
        for (int64_t a = 0; a < ks; ++a) {
          for (int64_t t = 0; t < TILE; ++t) rsum[t] = 0;
          for (int64_t bb = 0; bb < ks; ++bb) {
            const int64_t o = a * ks + bb;
            T* dLo = dL + o * TILE;
            const T* Ao = A + o * TILE;
            T* cb = drel.data() + (ks + bb) * TILE;
            for (int64_t t = 0; t < TILE; ++t) {
              dLo[t] = Ao[t] * (dLo[t] - dot[t]);
              rsum[t] += dLo[t];
              cb[t] += dLo[t];
            }
          }
          for (int64_t t = 0; t < TILE; ++t) drel[a * TILE + t] = rsum[t];
        }
        // dq_c = sum_o dL[o] k_c(o) + sum_j R[j,c] drel[j]; dk_c(o) += dL[o] q_c; dR[j,c] += drel[j].q_c
        for (int64_t c = 0; c < d; ++c) {
          const T* qc = qb + c * N + p0;
          T acc[TILE];
          for (int64_t t = 0; t < TILE; ++t) acc[t] = 0;
          for (int64_t j = 0; j < 2 * ks; ++j) {
            const T* r = drel.data() + j * TILE;
            const T w = Rh[j * d + c];
            T dot_r = 0;
            for (int64_t t = 0; t < TILE; ++t) { acc[t] += w * r[t]; dot_r += r[t] * qc[t]; }
            dRb[j * d + c] += dot_r;
          }
          for (int64_t a = 0; a < ks; ++a)
            for (int64_t bb = 0; bb < ks; ++bb) {
              const int64_t off = a * Wp + bb + s * p0;
              const T* dLo = dL + (a * ks + bb) * TILE;
              const T* kc = kb + c * L + off;
              T* dkc = dkb + c * L + off;
              for (int64_t t = 0; t < TILE; ++t) {
                acc[t] += dLo[t] * kc[UNIT ? t : s * t];
                dkc[UNIT ? t : s * t] += dLo[t] * qc[t];
              }
            }
          T* dqc = dqb + c * N + p0;
          for (int64_t t = 0; t < TILE; ++t) dqc[t] = acc[t];
        }
      }
    }
  });
}
}  // namespace

std::vector<torch::Tensor> forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor R,
                                   torch::Tensor mask, int64_t heads, int64_t ks, int64_t s, int64_t Wp, bool save) {
  const int64_t B = q.size(0), C = q.size(1), N = q.size(2), L = k.size(2), d = C / heads;
  auto out = torch::empty_like(q);
  auto attn = save ? torch::empty({B, heads, ks * ks, N}, q.options()) : torch::empty({0}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "local_attention_forward", [&] {
    auto fn = s == 1 ? forward_impl<scalar_t, true> : forward_impl<scalar_t, false>;
    fn(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                           R.data_ptr<scalar_t>(), mask.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                           save ? attn.data_ptr<scalar_t>() : nullptr, B, heads, d, N, L, ks, s, Wp);
  });
  return {out, attn};
}

std::vector<torch::Tensor> backward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor R,
                                    torch::Tensor mask, torch::Tensor attn, torch::Tensor g, int64_t heads, int64_t ks,
                                    int64_t s, int64_t Wp) {
  const int64_t B = q.size(0), C = q.size(1), N = q.size(2), L = k.size(2), d = C / heads;
  auto dq = torch::empty_like(q);
  auto dk = torch::zeros_like(k);
  auto dv = torch::zeros_like(v);
  auto dRb = torch::zeros({B, heads, 2 * ks, d}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "local_attention_backward", [&] {
    auto fn = s == 1 ? backward_impl<scalar_t, true> : backward_impl<scalar_t, false>;
    fn(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                            R.data_ptr<scalar_t>(), mask.data_ptr<scalar_t>(),
                            attn.numel() ? attn.data_ptr<scalar_t>() : nullptr, g.data_ptr<scalar_t>(),
                            dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(),
                            dRb.data_ptr<scalar_t>(), B, heads, d, N, L, ks, s, Wp);
  });
  return {dq, dk, dv, dRb.sum(0)};
}
"""

_CPP_DECLS = r"""
std::vector<torch::Tensor> forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor R,
                                   torch::Tensor mask, int64_t heads, int64_t ks, int64_t s, int64_t Wp, bool save);
std::vector<torch::Tensor> backward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor R,
                                    torch::Tensor mask, torch::Tensor attn, torch::Tensor g, int64_t heads, int64_t ks,
                                    int64_t s, int64_t Wp);
"""

_lock = threading.Lock()
_module: Any = None
_error: str | None = None


def load() -> Any:
    """The compiled extension, building it on first use; ``None`` when it cannot be built."""
    global _module, _error
    with _lock:
        if _module is None and _error is None:
            try:
                from torch.utils.cpp_extension import load_inline

                _module = load_inline(
                    name="attnas_local_attention_v7",
                    cpp_sources=[_CPP_DECLS, _SOURCE],
                    functions=["forward", "backward"],
                    extra_cflags=["-O3", "-march=native", "-fno-math-errno"],
                    verbose=False,
                )
            except Exception as exc:  # no compiler, no ninja, headers missing...
                _error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        return _module


def unavailable_reason() -> str | None:
    """Why :func:`load` returned ``None`` (``None`` if it has not failed)."""
    return _error

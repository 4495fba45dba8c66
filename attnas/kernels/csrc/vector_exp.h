// A vectorised float32 exp for x <= 0 (Cody-Waite reduction, degree-6 polynomial).
#pragma once

template <typename V, typename VI>
inline V exp_nonpos_f32(V x) {
  const VI tiny = x < -87.0f;
  x = tiny ? V{} - 87.0f : x;
  const V n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  V r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  V p = V{} + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  V scale;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
  return tiny ? V{} : p * scale;
}

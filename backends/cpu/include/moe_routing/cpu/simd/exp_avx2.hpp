#pragma once
/// \file
/// exp of 8 floats at once with AVX2 and FMA, bit for bit the value glibc's `expf` returns on
/// x86-64 CPUs with FMA (its FMA build, which glibc picks on such CPUs): the scoring pass's
/// softmax and sigmoid call exp once per expert, and one library call per expert was 55-60% of
/// a DeepSeek-V3 routing (sigmoid, E = 256; `scoring/deepseek_v3` in the routing benchmark).
///
/// Why the same bits and not merely an accurate exp: the library recomputes single p values
/// later with `std::exp` (`probability_of`) and promises the scoring pass's values back
/// exactly; the tests' naive routers call `std::exp` too. So this is the algorithm glibc uses
/// (since 2.28; from Arm's optimized-routines): x / ln 2 = k / 32 + r / 32 with |r| <= 1/2,
/// exp(x) = 2^(k/32) * 2^(r/32), the first from a table of 32 doubles, the second a cubic in r,
/// all in double and rounded to float once. The table, the constants and where the FMAs fall
/// (r itself is one) were checked against the installed libm: every one of the 2^32 float
/// inputs gave glibc 2.36's bits (Debian 12; `docs/design.md`). On another C library the
/// vector path is used only if `vector_exp_matches_library` finds the same values on a sample.
///
/// Lanes whose result is not a normal computation (NaN, overflow past 88.72, results below the
/// smallest subnormal, infinities) take the values glibc gives them when rounding to nearest
/// (in other rounding modes glibc's overflow and underflow follow the mode; the CPU backend
/// then calls the library, `choose_score_row_path` in `cpu/score_row_path.hpp`).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "moe_routing/core/config.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
namespace moe_routing::cpu::detail {

/// 2^(i/32) as double bits, less i << 47 (what the exponent gets back from k when a result is
/// assembled). Computed as the correctly rounded doubles of 2^(i/32); glibc's table holds the
/// same 32 values.
alignas(64) inline constexpr long long exp_table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

/// 32 / ln 2, the shift that rounds a double to an integer in its low bits, and the cubic's
/// coefficients, each divided by 32 to the power of its degree's complement.
inline constexpr double exp_scale = 0x1.71547652b82fep+0 * 32, exp_round_shift = 0x1.8p+52;
inline constexpr double exp_c0 = 0x1.c6af84b912394p-5 / (32.0 * 32.0 * 32.0),
                        exp_c1 = 0x1.ebfce50fac4f3p-3 / (32.0 * 32.0), exp_c2 = 0x1.62e42ff0c52d6p-1 / 32.0;
/// Beyond these the result is +inf, or 0 (below the smallest subnormal float).
inline constexpr float exp_overflow_above = 0x1.62e42ep6f, exp_zero_below = -0x1.9fe368p6f;

/// exp of 4 floats (widened to doubles) for lanes in the normal range.
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline __m128 exp4_core(__m128 x) noexcept {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d scale = _mm256_set1_pd(exp_scale), shift = _mm256_set1_pd(exp_round_shift);
  const __m256d z = _mm256_mul_pd(scale, xd);
  const __m256d rounded = _mm256_add_pd(z, shift);
  const __m256i k = _mm256_castpd_si256(rounded);
  const __m256d kd = _mm256_sub_pd(rounded, shift);
  const __m256d r = _mm256_fmsub_pd(scale, xd, kd);  // x * 32 / ln 2 - k, unrounded product: glibc's FMA build
  const __m256i index = _mm256_and_si256(k, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(exp_table, index, 8), _mm256_slli_epi64(k, 47));
  const __m256d s = _mm256_castsi256_pd(t);
  const __m256d upper = _mm256_fmadd_pd(_mm256_set1_pd(exp_c0), r, _mm256_set1_pd(exp_c1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(exp_c2), r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(upper, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

/// exp of each of 8 floats.
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline __m256 exp8_avx2(__m256 x) noexcept {
  const __m256 inner =
      _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(exp_overflow_above)), _mm256_set1_ps(exp_zero_below));
  __m256 y = _mm256_set_m128(exp4_core(_mm256_extractf128_ps(inner, 1)), exp4_core(_mm256_castps256_ps128(inner)));
  // Outside the range: 0 below it (and for -inf), +inf above it (and for +inf), NaN for NaN.
  y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(exp_zero_below), _CMP_LT_OQ), y);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(HUGE_VALF), _mm256_cmp_ps(x, _mm256_set1_ps(exp_overflow_above), _CMP_GT_OQ));
  return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/// values[i] = exp(values[i]) for i < count.
MOE_ROUTING_TARGET_AVX2 inline void exp_in_place_avx2(float* values, int count) noexcept {
  int i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(values + i, exp8_avx2(_mm256_loadu_ps(values + i)));
  if (i < count) {  // the last few through a full register, so no lane reads past the row
    float tail[8] = {};
    std::memcpy(tail, values + i, sizeof(float) * static_cast<std::size_t>(count - i));
    _mm256_storeu_ps(tail, exp8_avx2(_mm256_loadu_ps(tail)));
    std::memcpy(values + i, tail, sizeof(float) * static_cast<std::size_t>(count - i));
  }
}

/// Whether `exp_in_place_avx2` gives this program's `std::exp` values on a sample: 8192 inputs
/// evenly over [-104, 89] (about where exp is neither 0 nor infinite), the specials, and two inputs
/// where evaluating the same algorithm without FMAs gives another last bit (found by the
/// exhaustive comparison). A C library with another expf fails it almost surely; one that
/// differs only in rare last bits could pass it, which is why this is a check and not a proof.
/// glibc's FMA build passes it, and gives the same bits on every other input too.
MOE_ROUTING_TARGET_AVX2 inline bool exp_matches_library_on_samples() noexcept {
  constexpr int samples = 8192, chunk = 256;
  const auto same = [](const float* inputs, int count) {
    float vector[chunk];
    std::memcpy(vector, inputs, sizeof(float) * static_cast<std::size_t>(count));
    exp_in_place_avx2(vector, count);
    for (int i = 0; i < count; ++i) {
      const float library = std::exp(inputs[i]);
      const bool both_nan = library != library && vector[i] != vector[i];
      if (!both_nan && std::memcmp(&library, &vector[i], sizeof(float)) != 0) return false;
    }
    return true;
  };
  const float special[] = {0x1.04845ep+5f,     -0x1.f8cbb2p+5f, 0.0f,          -0.0f,
                           HUGE_VALF,          -HUGE_VALF,      std::nanf(""), 0x1p-149f,
                           exp_overflow_above, exp_zero_below};
  if (!same(special, static_cast<int>(std::size(special)))) return false;
  for (int first = 0; first < samples; first += chunk) {  // a chunk at a time: little stack on any thread
    float inputs[chunk];
    for (int i = 0; i < chunk; ++i) inputs[i] = -104.0f + 193.0f * static_cast<float>(first + i) / (samples - 1);
    if (!same(inputs, chunk)) return false;
  }
  return true;
}

/// `exp_matches_library_on_samples`, run once per process (on first use, about 0.1 ms).
inline bool vector_exp_matches_library() noexcept {
  static const bool same = exp_matches_library_on_samples();
  return same;
}

/// `score_row`'s exps (`library_exp`'s contract) 8 at a time.
struct vector_exp {
  void operator()(float* values, int count) const noexcept { exp_in_place_avx2(values, count); }
};

}  // namespace moe_routing::cpu::detail
#endif

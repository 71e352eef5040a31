#pragma once
/// \file
/// The SwiGLU activation of the CPU executor, silu(gate) x up with silu(v) = v / (1 + e^-v),
/// and the e^v it uses: plain float arithmetic that the compiler inlines and vectorizes, where
/// std::exp is a call into libm per value. The row kernels apply it to a whole tile of gate
/// and up sums at once (`sweep_gate_up`). With std::exp, SwiGLU and its calls took about 8% of
/// a compute-bound layer on Zen 5 (Lynx-Acc at n = 64: 512 pairs x 768 values per layer).

#include <bit>
#include <cstdint>

namespace moe_routing::cpu {

/// v limited to [-87, 88]; NaN unchanged (not under -ffinite-math-only, which -ffast-math
/// sets). In bit operations, not std::min and std::max: from those GCC 12 made branches (jump
/// threading: e^v is a constant on the clamped paths), and a loop whose branches hold a
/// division is not vectorized (a division may trap, so it is never speculated), which left
/// SwiGLU one value at a time.
[[gnu::always_inline]] inline float clamp_for_exp(float v) noexcept {
  const std::uint32_t below = 0u - static_cast<std::uint32_t>(v < -87.0f);  // all ones or zero
  const std::uint32_t above = 0u - static_cast<std::uint32_t>(v > 88.0f);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(v) & ~(below | above)) |
                              (std::bit_cast<std::uint32_t>(-87.0f) & below) |
                              (std::bit_cast<std::uint32_t>(88.0f) & above));
}

/// e^v in float, within 2 ulp of the exact value for v in [-87, 88] (where e^v is a normal
/// float); v beyond that range is taken as its end. NaN gives NaN (not under -ffast-math).
///
/// v = n ln2 + r with n an integer and |r| <= ln2 / 2: e^v = 2^n e^r. n ln2 is subtracted in
/// two parts (Cody and Waite): `ln2_high` has 9 significant bits, so n x ln2_high is exact for
/// |n| <= 128 and r keeps its low bits. e^r is its Taylor series to r^7: the first term left
/// out, r^8 / 8!, is below 8e-9 of e^r, about a tenth of a float's ulp. 2^n is built in the
/// exponent bits. n comes from adding 1.5 x 2^23, which rounds v log2(e) to an integer in the
/// low mantissa bits, and is read back from those bits, not by subtracting 1.5 x 2^23 again:
/// under -ffast-math GCC folds (a + c) - c to a, which left a fractional n (e^1 came out as 2).
/// The bits are read in unsigned arithmetic, so a NaN never becomes an out-of-range
/// float-to-int conversion (undefined behaviour). (-ffast-math may still merge the two-part
/// subtraction into one: about 4e-6 relative error at |v| near 87 then.)
[[gnu::always_inline]] inline float exp_for_silu(float v) noexcept {
  constexpr float log2_e = 1.44269504088896341f;
  constexpr float ln2_high = 0.693359375f;        // 355 / 512
  constexpr float ln2_low = -2.12194440e-4f;      // ln 2 - ln2_high
  constexpr float round_to_integer = 12582912.f;  // 1.5 x 2^23
  v = clamp_for_exp(v);
  const float shifted = v * log2_e + round_to_integer;
  const std::uint32_t n_bits = std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(round_to_integer);
  const auto n = static_cast<float>(static_cast<std::int32_t>(n_bits));
  const float r = (v - n * ln2_high) - n * ln2_low;
  float series = 1.0f / 5040;
  series = series * r + 1.0f / 720;
  series = series * r + 1.0f / 120;
  series = series * r + 1.0f / 24;
  series = series * r + 1.0f / 6;
  series = series * r + 0.5f;
  series = series * r + 1.0f;
  series = series * r + 1.0f;
  const float two_to_n = std::bit_cast<float>((n_bits + 127u) << 23);
  return series * two_to_n;
}

/// silu(gate) x up. For gate >= -88 within a few ulp of the exact value. Below that, e^-gate
/// is taken as e^88 (the clamp), so silu(gate) comes out as gate x 6.1e-39
/// instead of about 0 (below 1e-36 for gate > -165), and silu(-infinity) as -infinity where
/// the formula gives NaN. An object, not a function: the sweeps take the activation as a
/// parameter, and GCC did not inline a function passed that way (nor vectorize the loop
/// around it).
struct swiglu_fn {
  [[gnu::always_inline]] float operator()(float gate, float up) const noexcept {
    return gate / (1.0f + exp_for_silu(-gate)) * up;
  }
};
inline constexpr swiglu_fn swiglu{};

}  // namespace moe_routing::cpu

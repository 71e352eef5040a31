#pragma once
/// \file
/// 16-bit floating-point storage types read as float32 without copying the matrix.
/// They hold the bits only; arithmetic always happens in float after `to_float`.

#include <bit>
#include <cstdint>
#include <type_traits>

#include "moe_routing/core/config.hpp"

namespace moe_routing {

/// IEEE binary16 storage (what `torch.float16` and `numpy.float16` hold).
struct float16 {
  std::uint16_t bits;
};

/// bfloat16 storage: the high half of a float32.
struct bfloat16 {
  std::uint16_t bits;
};

static_assert(std::is_trivially_copyable_v<float16> && sizeof(float16) == 2);
static_assert(std::is_trivially_copyable_v<bfloat16> && sizeof(bfloat16) == 2);

MOE_ROUTING_HOST_DEVICE constexpr float to_float(float value) noexcept { return value; }

MOE_ROUTING_HOST_DEVICE constexpr float to_float(bfloat16 value) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
}

/// Exact conversion of every binary16 pattern, subnormals, infinities and NaN included.
MOE_ROUTING_HOST_DEVICE constexpr float to_float(float16 value) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
  std::uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN: keep the payload
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: shift the mantissa up until its leading one becomes the implicit bit.
  std::uint32_t shifted_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --shifted_exponent;
  }
  return std::bit_cast<float>(sign | (shifted_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

/// Round-to-nearest-even conversion, used by tests and the trace writer.
constexpr float16 to_float16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};   // NaN
  if (magnitude >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow
  if (magnitude < 0x38800000u) {                                                      // result is subnormal or zero
    if (magnitude < 0x33000000u) return {sign};
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
    return {static_cast<std::uint16_t>(sign | half)};
  }
  std::uint32_t half = ((magnitude >> 13) - (112u << 10));
  const std::uint32_t remainder = magnitude & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;
  return {static_cast<std::uint16_t>(sign | half)};
}

/// Round-to-nearest-even conversion to bfloat16 (NaN stays NaN, made quiet).
///
/// Without a branch: NaN selects its own result by a mask. With an `if`, GCC 12 kept the
/// conversion scalar, one compare and jump per value, in every loop that converts (the
/// executor's SwiGLU epilogue spent about 190 instructions per 16 values there); this form
/// vectorizes.
constexpr bfloat16 to_bfloat16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t nan = 0u - static_cast<std::uint32_t>((bits & 0x7fffffffu) > 0x7f800000u);  // all ones or zero
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quieted = (bits >> 16) | 0x40u;
  return {static_cast<std::uint16_t>((rounded & ~nan) | (quieted & nan))};
}

/// The element types a score view may hold.
template <class T>
concept score_element = std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

}  // namespace moe_routing

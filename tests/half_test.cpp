// float16 and bfloat16 read through the accessor, checked against independent decoders
// on every bit pattern.

#include <cstdio>
#include <string>

#include "plan_checks.hpp"

TEST_CASE("every float16 and bfloat16 bit pattern decodes exactly") {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float f16 = test::mr::to_float(test::mr::float16{b});
    const float expected16 = test::decode_f16(b);
    const float bf16 = test::mr::to_float(test::mr::bfloat16{b});
    const float expected_bf16 = test::decode_bf16(b);
    if (std::isnan(expected16))
      REQUIRE(std::isnan(f16));
    else
      REQUIRE(std::memcmp(&f16, &expected16, 4) == 0);
    if (std::isnan(expected_bf16))
      REQUIRE(std::isnan(bf16));
    else
      REQUIRE(std::memcmp(&bf16, &expected_bf16, 4) == 0);
    // encoders round-trip every non-NaN value
    if (!std::isnan(expected16)) REQUIRE(test::mr::to_float16(expected16).bits == b);
    if (!std::isnan(expected_bf16)) REQUIRE(test::mr::to_bfloat16(expected_bf16).bits == b);
  }
}

TEST_CASE("float16 encoding rounds to nearest even") {
  CHECK(test::mr::to_float16(1.0f + 1.0f / 2048).bits == 0x3c00);  // halfway: even (down)
  CHECK(test::mr::to_float16(1.0f + 3.0f / 2048).bits == 0x3c02);  // halfway: even (up)
  CHECK(test::mr::to_float16(70000.0f).bits == 0x7c00);            // overflow to inf
  CHECK(test::mr::to_float16(1e-8f).bits == 0x0000);               // underflow to zero
  CHECK(test::mr::to_bfloat16(1.0f + 1.0f / 256).bits == 0x3f80);  // halfway: even
}

namespace {
/// bfloat16 by its definition, worked out the long way: of the two bfloat16 values that
/// bracket `value` (its bits cut to the top 16, and one step further from zero), the nearer
/// in double arithmetic, on a tie the one with an even last bit. A step past the largest
/// finite bfloat16 is infinity, which counts as 2^128 when measuring distance.
std::uint16_t bfloat16_by_definition(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const auto toward_zero = static_cast<std::uint16_t>(bits >> 16);
  const auto away = static_cast<std::uint16_t>(toward_zero + 1);
  const auto magnitude = [](std::uint16_t b) {
    return (b & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) : std::fabs(double{test::decode_bf16(b)});
  };
  const double exact = std::fabs(double{value});
  const double below = exact - magnitude(toward_zero), above = magnitude(away) - exact;
  if (below < above) return toward_zero;
  if (above < below) return away;
  return (toward_zero & 1u) ? away : toward_zero;
}

std::string hex(std::uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", bits);
  return text;
}
}  // namespace

TEST_CASE("bfloat16 encoding rounds every kind of float to nearest even and keeps NaN a quiet NaN") {
  // Every top half, each with the low halves that decide rounding: exact, just above, just
  // under, at and just past the halfway point, the largest, and one more spread over the rest.
  std::uint32_t spread = 12345;
  int checked = 0, nans = 0, ties_up = 0, ties_down = 0;
  for (std::uint32_t top = 0; top <= 0xffff; ++top) {
    spread = spread * 1664525u + 1013904223u;
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, spread >> 16}) {
      const std::uint32_t bits = top << 16 | low;
      float value;
      std::memcpy(&value, &bits, 4);
      const std::uint16_t got = test::mr::to_bfloat16(value).bits;
      if (std::isnan(value)) {
        ++nans;
        REQUIRE(std::isnan(test::decode_bf16(got)));
        REQUIRE((got & 0x8000u) == (bits >> 16 & 0x8000u));  // the sign kept
        REQUIRE((got & 0x0040u) != 0);                       // quiet
        continue;
      }
      const std::uint16_t expected = bfloat16_by_definition(value);
      if (got != expected)
        FAIL("to_bfloat16 of bits " << hex(bits) << " gave " << hex(got) << ", not " << hex(expected));
      if (low == 0x8000u) (expected == static_cast<std::uint16_t>(top) ? ties_down : ties_up) += 1;
      ++checked;
    }
  }
  // Both tie directions and NaNs of both signs were met, not skipped.
  CHECK(ties_up > 30000);
  CHECK(ties_down > 30000);
  CHECK(nans >= 2 * 7 * 127);
  CHECK(checked + nans == 7 * 65536);
}

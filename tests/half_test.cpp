// float16 and bfloat16 read through the accessor, checked against independent decoders
// on every bit pattern.

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

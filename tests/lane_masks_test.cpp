// The last partial step's lane masks (`cpu/simd/lane_masks.hpp`): hand-worked values at the
// edges (no lanes, one, all but one, all, more than all), and every count against a loop that
// sets the bits one by one.

#include <cstdint>

#include <doctest/doctest.h>
#include <moe_routing/cpu/simd/lane_masks.hpp>

namespace {
namespace mr = moe_routing;

template <class Mask>
Mask lanes_one_by_one(int count) {
  std::uint32_t bits = 0;
  for (int i = 0; i < count && i < 8 * static_cast<int>(sizeof(Mask)); ++i) bits |= std::uint32_t{1} << i;
  return static_cast<Mask>(bits);
}

TEST_CASE("first_lanes: the first count lanes, all of them from the mask's width on") {
  CHECK(mr::cpu::first_lanes<std::uint8_t>(0) == 0x00);
  CHECK(mr::cpu::first_lanes<std::uint8_t>(3) == 0x07);
  CHECK(mr::cpu::first_lanes<std::uint8_t>(8) == 0xff);
  CHECK(mr::cpu::first_lanes<std::uint16_t>(1) == 0x0001);
  CHECK(mr::cpu::first_lanes<std::uint16_t>(15) == 0x7fff);
  CHECK(mr::cpu::first_lanes<std::uint16_t>(16) == 0xffff);
  CHECK(mr::cpu::first_lanes<std::uint16_t>(40) == 0xffff);
  CHECK(mr::cpu::first_lanes<std::uint32_t>(31) == 0x7fffffffu);
  CHECK(mr::cpu::first_lanes<std::uint32_t>(32) == 0xffffffffu);
  for (int count = 0; count <= 40; ++count) {
    CAPTURE(count);
    CHECK(mr::cpu::first_lanes<std::uint8_t>(count) == lanes_one_by_one<std::uint8_t>(count));
    CHECK(mr::cpu::first_lanes<std::uint16_t>(count) == lanes_one_by_one<std::uint16_t>(count));
    CHECK(mr::cpu::first_lanes<std::uint32_t>(count) == lanes_one_by_one<std::uint32_t>(count));
  }
}

}  // namespace

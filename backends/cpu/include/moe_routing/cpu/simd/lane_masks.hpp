#pragma once
/// \file
/// AVX-512 lane masks for the last, partial step of a loop over a row: the executor's kernels
/// (16 float columns, 32 bfloat16 ones) and the routing's blocks of experts (8 or 16 lanes).

#include <cstdint>

namespace moe_routing::cpu {

/// The first `count` lanes of a `Mask` (`__mmask8`, `__mmask16`, `__mmask32`: one bit a lane),
/// all of them from the mask's width on; `count` >= 0.
template <class Mask>
constexpr Mask first_lanes(int count) noexcept {
  constexpr int lanes = 8 * sizeof(Mask);
  static_assert(lanes <= 32, "a mask of at most 32 lanes");
  return count >= lanes ? static_cast<Mask>(~std::uint32_t{0}) : static_cast<Mask>((std::uint32_t{1} << count) - 1u);
}

}  // namespace moe_routing::cpu

#pragma once
/// \file
/// The number of set bits of a 64-bit word, for the expert sets. `std::popcount` compiles to
/// one instruction where the build targets POPCNT, but to a call into libgcc's table loop
/// where it targets the x86-64 baseline, as a consumer built without `-march` does: routing
/// one token then took 1.4x as long as in a native build (docs/benchmarks/dispatch.md). On
/// such builds the bits are counted in registers instead (the classic SWAR sum, a dozen
/// instructions).

#include <bit>
#include <cstdint>

#include "moe_routing/core/config.hpp"

namespace moe_routing {

MOE_ROUTING_HOST_DEVICE constexpr int count_bits(std::uint64_t word) noexcept {
#if (defined(__x86_64__) || defined(__amd64__)) && !defined(__POPCNT__) && !defined(__CUDA_ARCH__)
  word = word - ((word >> 1) & 0x5555555555555555ull);
  word = (word & 0x3333333333333333ull) + ((word >> 2) & 0x3333333333333333ull);
  word = (word + (word >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return static_cast<int>((word * 0x0101010101010101ull) >> 56);
#else
  return std::popcount(word);
#endif
}

}  // namespace moe_routing

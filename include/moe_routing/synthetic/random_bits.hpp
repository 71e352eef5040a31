#pragma once
/// \file
/// The project's seeded random numbers: integer arithmetic only, so a seed gives the same
/// numbers on every platform and compiler (traces, random batches).

#include <cstdint>

namespace moe_routing::synthetic {

/// xoshiro256** seeded through splitmix64: small, fast, identical everywhere.
class random_bits {
 public:
  explicit random_bits(std::uint64_t seed) {
    for (auto& word : state_) {
      seed += 0x9e3779b97f4a7c15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      word = z ^ (z >> 31);
    }
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  /// Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Approximately standard normal: the sum of four uniforms, centred and scaled to
  /// unit variance (exact arithmetic, so the same on every platform).
  double normal() {
    return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508075688772;
  }  // no sum follows
  /// Uniform integer in [0, bound).
  std::uint64_t below(std::uint64_t bound) { return next() % bound; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

}  // namespace moe_routing::synthetic

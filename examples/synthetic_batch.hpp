#pragma once
// A small seeded generator of router logits for the examples: expert popularity that
// falls off with rank (some experts are hot in every batch), plus per-token noise.
// popularity = 0.7 and noise = 1 give vanilla top-8 of 128 experts a mean |active| of
// about 49 at n = 16, the OEA paper's Qwen3-30B-A3B decode figure.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace examples {

inline std::vector<float> synthetic_logits(int tokens, int experts, std::uint32_t seed, float popularity = 0.7f,
                                           float noise = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gaussian(0.0f, 1.0f);
  std::vector<float> prior(static_cast<std::size_t>(experts));
  std::vector<int> shuffled(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) shuffled[static_cast<std::size_t>(e)] = e;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  for (int rank = 0; rank < experts; ++rank) {
    prior[static_cast<std::size_t>(shuffled[static_cast<std::size_t>(rank)])] =
        -popularity * std::log1p(static_cast<float>(rank));
  }
  std::vector<float> logits(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(experts));
  for (int i = 0; i < tokens; ++i) {
    for (int e = 0; e < experts; ++e) {
      logits[static_cast<std::size_t>(i) * static_cast<std::size_t>(experts) + static_cast<std::size_t>(e)] =
          prior[static_cast<std::size_t>(e)] + noise * gaussian(rng);
    }
  }
  return logits;
}

}  // namespace examples

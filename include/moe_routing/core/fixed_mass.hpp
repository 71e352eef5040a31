#pragma once
/// \file
/// Column mass in 64-bit fixed point (SPEC preamble): integer sums are exact in any
/// order, so every backend and thread count gets the same c[e] bit for bit.

#include <cmath>
#include <cstdint>

#include "moe_routing/core/config.hpp"

namespace moe_routing {

/// Which per-token gate the column mass c[e] sums (SPEC section 3).
enum class column_mass : std::uint8_t {
  sparse,  ///< p renormalised over the token's top-k, 0 elsewhere (XShare section 2.2)
  dense,   ///< p itself
};

/// 2^32 units per unit of gate. A gate is clamped to [0, 2^16] first (NaN counts 0),
/// so 16384 tokens sum to below 2^62.
inline constexpr double mass_units_per_gate = 4294967296.0;
inline constexpr float max_gate_for_mass = 65536.0f;

MOE_ROUTING_HOST_DEVICE inline std::int64_t to_fixed_mass(float gate) noexcept {
  if (!(gate > 0.0f)) return 0;  // NaN, zero, negative
  if (gate > max_gate_for_mass) gate = max_gate_for_mass;
  return static_cast<std::int64_t>(std::nearbyint(static_cast<double>(gate) * mass_units_per_gate));
}

/// The sparse top-k gates of one token: p over topk_i renormalised (XShare 2.2).
/// A top-k whose p sum is zero or not finite gives each of its experts 1/count.
MOE_ROUTING_HOST_DEVICE inline void sparse_gates(const float* top_p, int count, float* gates) noexcept {
  float sum = 0;
  for (int j = 0; j < count; ++j) sum += top_p[j] > 0.0f ? top_p[j] : 0.0f;
  const bool usable = sum > 0.0f && sum <= largest_float;
  for (int j = 0; j < count; ++j) {
    const float p = top_p[j] > 0.0f ? top_p[j] : 0.0f;
    gates[j] = usable ? p / sum : 1.0f / static_cast<float>(count);
  }
}

}  // namespace moe_routing

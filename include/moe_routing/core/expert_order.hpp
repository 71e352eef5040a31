#pragma once
/// \file
/// The order in which the mass-driven stages take experts, shared by every backend so
/// that their plans agree bit for bit: column mass, largest first, ties to the lower index.

#include <cstdint>

#include "moe_routing/core/config.hpp"

namespace moe_routing {

/// True when expert `a` (of mass `mass_a`) comes before `b`: heavier, or as heavy and lower.
MOE_ROUTING_HOST_DEVICE constexpr bool heavier_expert(std::int64_t mass_a, int a, std::int64_t mass_b, int b) noexcept {
  return mass_a != mass_b ? mass_a > mass_b : a < b;
}

}  // namespace moe_routing

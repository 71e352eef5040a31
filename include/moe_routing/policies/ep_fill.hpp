#pragma once
/// \file
/// `ep_fill(m_g)`: XShare algorithms 5-6 for expert parallelism. Round-robin over
/// devices, each below m_g experts adds its best expert by column mass.

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct ep_fill {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "ep_fill";
  int m_g = 0;  ///< per-device target load, >= 0
  column_mass gate = column_mass::sparse;

  constexpr status validate() const noexcept {
    if (m_g < 0) return fail(errc::invalid_parameter, "ep_fill.m_g", m_g, "must not be negative");
    return {};
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    if (!shape.has_placement) {
      return fail(errc::invalid_parameter, "ep_fill.m_g", m_g,
                  "needs an expert placement (batch.placement) to fill devices");
    }
    return {};
  }
  constexpr bool seeds_selection() const noexcept {
    return gate == column_mass::sparse && m_g > 0;
  }
};

static_assert(set_stage<ep_fill>);

}  // namespace moe_routing

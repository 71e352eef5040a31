#pragma once
/// \file
/// `ep_fill(m_g)`: XShare algorithms 5-6 for expert parallelism. Round-robin over
/// devices, each below m_g experts adds its best expert by column mass.

#include <array>
#include <cstdint>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct ep_fill {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "ep_fill";
  int m_g = 0;  ///< per-device target load, >= 0
  column_mass gate = column_mass::sparse;

  static constexpr auto parameters() {
    using parameter = stage_parameter<ep_fill>;
    return std::array{
        parameter{.name = "m_g",
                  .qualified = "ep_fill.m_g",
                  .integer = &ep_fill::m_g,
                  .required = true,
                  .range = non_negative},
        parameter{.name = "gate", .qualified = "ep_fill.gate", .kind = parameter_kind::gate, .gate = &ep_fill::gate},
    };
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    if (!shape.has_placement) {
      return fail(errc::invalid_parameter, "ep_fill.m_g", m_g,
                  "needs an expert placement (batch.placement) to fill devices");
    }
    return {};
  }
  constexpr scoring_needs needs() const noexcept { return needs_of_gate(gate, true); }
  constexpr bool seeds_selection() const noexcept { return gate == column_mass::sparse && m_g > 0; }

  /// The rounds, shared by every backend: each device below m_g takes its next expert of
  /// `order` (the `available` experts outside S, heaviest first) until no device can.
  /// `load[g]` starts as the slots of S's experts on device g; `cursor` has room for
  /// `devices` entries. `on_device(e, g)`: whether expert e has a slot (a replica) on device
  /// g; `insert(e)` adds e to S and counts it on each of its devices. With redundant
  /// experts an expert may be a candidate of several devices: one taken already is skipped.
  template <class OnDevice, class Insert, class Taken>
  MOE_ROUTING_HOST_DEVICE constexpr void fill_devices(const std::int32_t* order, int available, int devices,
                                                      const std::int32_t* load, std::int32_t* cursor,
                                                      OnDevice on_device, Insert insert, Taken taken) const {
    for (int device = 0; device < devices; ++device) cursor[device] = 0;
    for (bool added = true; added;) {
      added = false;
      for (int device = 0; device < devices; ++device) {
        if (load[device] >= m_g) continue;
        std::int32_t& i = cursor[device];
        while (i < available && (!on_device(order[i], device) || taken(order[i]))) ++i;
        if (i == available) continue;
        insert(order[i++]);
        added = true;
      }
    }
  }
};

static_assert(set_stage<ep_fill>);

}  // namespace moe_routing

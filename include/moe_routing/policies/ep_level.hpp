#pragma once
/// \file
/// `ep_level(gate)`: expert-parallel levelling (new here, not from a paper). Under expert
/// parallelism a layer waits for its busiest device, so every other device may load
/// experts up to that device's count at no cost to the step. After the stages before it,
/// each device below the current maximum load adds its heaviest experts outside S (by
/// column mass, positive mass only) until it reaches that maximum or has no candidate left.
/// The maximum itself never rises: a device only fills up to it.

#include <array>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/expert_order.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct ep_level {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "ep_level";
  column_mass gate = column_mass::sparse;

  static constexpr auto parameters() {
    using parameter = stage_parameter<ep_level>;
    return std::array{
        parameter{.name = "gate", .qualified = "ep_level.gate", .kind = parameter_kind::gate, .gate = &ep_level::gate},
    };
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    if (!shape.has_placement) {
      // About the stage, not a value: NaN leaves the value out of the message.
      return fail(errc::invalid_parameter, "ep_level", std::numeric_limits<double>::quiet_NaN(),
                  "needs an expert placement (batch.placement) to level devices");
    }
    return {};
  }
  constexpr scoring_needs needs() const noexcept { return needs_of_gate(gate, true); }
  /// On an empty S the busiest device holds nothing, so nothing is added.
  constexpr bool seeds_selection() const noexcept { return false; }

  /// The order candidates are taken in, shared by every backend: heavier column mass
  /// first, equal masses to the lower expert index.
  MOE_ROUTING_HOST_DEVICE static constexpr bool takes_before(std::int64_t mass_a, int a, std::int64_t mass_b,
                                                             int b) noexcept {
    return heavier_expert(mass_a, a, mass_b, b);
  }

  /// The busiest device's load: the level every device is filled up to.
  MOE_ROUTING_HOST_DEVICE static constexpr std::int32_t target_load(const std::int32_t* load, int devices) noexcept {
    std::int32_t most = 0;
    for (int device = 0; device < devices; ++device) most = load[device] > most ? load[device] : most;
    return most;
  }

  /// The filling, shared by every backend. `order` holds the `available` experts outside S
  /// with positive mass in `takes_before` order; `load[g]` starts as the slots of S's
  /// experts on device g. `for_each_device(e, visit)` visits the device of each slot of
  /// expert e (one without redundant experts, one per replica with them). An expert is
  /// taken when none of its devices would pass the busiest load: without replicas, when its
  /// own device is below it. One pass suffices: each device takes its candidates in order
  /// and taking one never lowers a load. O(available x replicas + G).
  template <class ForEachDevice, class Insert>
  MOE_ROUTING_HOST_DEVICE constexpr void level_devices(const std::int32_t* order, int available, int devices,
                                                       std::int32_t* load, ForEachDevice for_each_device,
                                                       Insert insert) const {
    const std::int32_t target = target_load(load, devices);
    for (int i = 0; i < available; ++i) {
      bool fits = true;
      for_each_device(order[i], [&](int device) { fits = ++load[device] <= target && fits; });
      if (fits) {
        insert(order[i]);
      } else {
        for_each_device(order[i], [&](int device) { --load[device]; });
      }
    }
  }
};

static_assert(set_stage<ep_level>);

}  // namespace moe_routing

#pragma once
/// \file
/// `vote_drop(d)`: Lynx-Lat. Drops the d experts of S that the fewest tokens voted
/// for (a vote: the expert is in the token's top-k), never a guaranteed one.

#include <array>
#include <cstdint>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct vote_drop {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::removes;
  static constexpr const char* name = "vote_drop";
  static constexpr bool decode_only = true;
  int d = 0;                               ///< experts to drop, >= 0
  column_mass gate = column_mass::sparse;  ///< mass that breaks vote ties

  static constexpr auto parameters() {
    using parameter = stage_parameter<vote_drop>;
    return std::array{
        parameter{
            .name = "d", .qualified = "vote_drop.d", .integer = &vote_drop::d, .required = true, .range = non_negative},
        parameter{
            .name = "gate", .qualified = "vote_drop.gate", .kind = parameter_kind::gate, .gate = &vote_drop::gate},
    };
  }
  constexpr scoring_needs needs() const noexcept { return needs_of_gate(gate, true); }
  /// Dropping from an empty S leaves it empty.
  constexpr bool seeds_selection() const noexcept { return false; }

  /// The drop order, shared by every backend: fewest votes first, then least mass, then
  /// the higher index.
  MOE_ROUTING_HOST_DEVICE static constexpr bool drops_before(const std::int32_t* votes, const std::int64_t* mass, int a,
                                                             int b) noexcept {
    if (votes[a] != votes[b]) return votes[a] < votes[b];
    if (mass[a] != mass[b]) return mass[a] < mass[b];
    return a > b;
  }
};

static_assert(set_stage<vote_drop>);

}  // namespace moe_routing

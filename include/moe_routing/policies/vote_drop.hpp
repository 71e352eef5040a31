#pragma once
/// \file
/// `vote_drop(d)`: Lynx-Lat. Drops the d experts of S that the fewest tokens voted
/// for (a vote: the expert is in the token's top-k), never a guaranteed one.

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct vote_drop {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "vote_drop";
  static constexpr bool decode_only = true;
  int d = 0;  ///< experts to drop, >= 0
  column_mass gate = column_mass::sparse;  ///< mass that breaks vote ties

  constexpr status validate() const noexcept {
    if (d < 0) return fail(errc::invalid_parameter, "vote_drop.d", d, "must not be negative");
    return {};
  }
  /// Dropping from an empty S leaves it empty.
  constexpr bool seeds_selection() const noexcept { return false; }
};

static_assert(set_stage<vote_drop>);

}  // namespace moe_routing

#pragma once
/// \file
/// `greedy_mass`: XShare algorithms 1-2. Adds experts not yet in S by column mass,
/// largest first, by count (`add`), to a size (`size`) or to a mass share (`mass`).

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct greedy_mass {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "greedy_mass";
  int add = -1;        ///< m: add this many experts (set exactly one of the three)
  int size = -1;       ///< M: grow S to this many experts
  float mass = -1.0f;  ///< tau in (0, 1]: grow until S holds this share of the column mass
  column_mass gate = column_mass::sparse;

  constexpr status validate() const noexcept {
    const int chosen = (add >= 0 ? 1 : 0) + (size >= 0 ? 1 : 0) + (mass >= 0.0f ? 1 : 0);
    if (chosen != 1) {
      return fail(errc::invalid_parameter, "greedy_mass.targets_given", chosen,
                  "must be exactly one of add, size, mass");
    }
    if (mass >= 0.0f && !(mass > 0.0f && mass <= 1.0f)) {
      return fail(errc::invalid_parameter, "greedy_mass.mass", mass, "must be in (0, 1]");
    }
    return {};
  }
  /// Alone on an empty S it adds at least one expert only with a positive target and
  /// the sparse gate (dense p may be all zero).
  constexpr bool seeds_selection() const noexcept {
    return gate == column_mass::sparse && (add > 0 || size > 0 || mass > 0.0f);
  }
};

static_assert(set_stage<greedy_mass>);

}  // namespace moe_routing

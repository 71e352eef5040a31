#pragma once
/// \file
/// `greedy_mass`: XShare algorithms 1-2. Adds experts not yet in S by column mass,
/// largest first, by count (`add`), to a size (`size`) or to a mass share (`mass`).

#include <limits>

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct greedy_mass {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "greedy_mass";
  /// add and size hold it when another target is chosen; no text or count can spell it.
  static constexpr int not_given = std::numeric_limits<int>::min();
  int add = not_given;   ///< m: add this many experts (set exactly one of the three)
  int size = not_given;  ///< M: grow S to this many experts
  /// tau in (0, 1]: grow until S holds this share of the column mass (NaN: not given)
  float mass = std::numeric_limits<float>::quiet_NaN();
  column_mass gate = column_mass::sparse;

  constexpr status validate() const noexcept {
    constexpr double no_value = std::numeric_limits<double>::quiet_NaN();
    if (add != not_given && add < 0) return fail(errc::invalid_parameter, "greedy_mass.add", add, "must be at least 0");
    if (size != not_given && size < 0) return fail(errc::invalid_parameter, "greedy_mass.size", size, "must be at least 0");
    const bool has_mass = mass == mass;
    const int chosen = (add != not_given ? 1 : 0) + (size != not_given ? 1 : 0) + (has_mass ? 1 : 0);
    if (chosen == 0) return fail(errc::invalid_parameter, "greedy_mass", no_value, "needs a target: add, size or mass");
    if (chosen > 1) {
      return fail(errc::invalid_parameter, "greedy_mass", no_value, "takes one target of add, size and mass, not several");
    }
    if (has_mass && !(mass > 0.0f && mass <= 1.0f)) {
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

#pragma once
/// \file
/// `greedy_mass`: XShare algorithms 1-2. Adds experts not yet in S by column mass,
/// largest first, by count (`add`), to a size (`size`) or to a mass share (`mass`).

#include <array>
#include <limits>

#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct greedy_mass {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "greedy_mass";
  /// add and size hold it when another target is chosen; no text or count can spell it.
  static constexpr int not_given = std::numeric_limits<int>::min();
  int add = not_given;   ///< m: add this many experts (set exactly one of the three)
  int size = not_given;  ///< M: grow S to this many experts
  /// tau in (0, 1]: grow until S holds this share of the column mass (NaN: not given)
  float mass = std::numeric_limits<float>::quiet_NaN();
  column_mass gate = column_mass::sparse;

  static constexpr auto parameters() {
    using parameter = stage_parameter<greedy_mass>;
    constexpr value_range count{0, std::numeric_limits<double>::infinity(), false, "must be at least 0"};
    return std::array{
        parameter{.name = "add",
                  .synonym = "m",
                  .qualified = "greedy_mass.add",
                  .integer = &greedy_mass::add,
                  .optional = true,
                  .range = count},
        parameter{.name = "size",
                  .qualified = "greedy_mass.size",
                  .integer = &greedy_mass::size,
                  .optional = true,
                  .range = count},
        parameter{.name = "mass",
                  .synonym = "tau",
                  .qualified = "greedy_mass.mass",
                  .kind = parameter_kind::real,
                  .real = &greedy_mass::mass,
                  .optional = true,
                  .range = share_of_one},
        parameter{
            .name = "gate", .qualified = "greedy_mass.gate", .kind = parameter_kind::gate, .gate = &greedy_mass::gate},
    };
  }
  /// Exactly one target (the ranges are checked from `parameters()`).
  constexpr status validate() const noexcept {
    constexpr double no_value = std::numeric_limits<double>::quiet_NaN();
    const int chosen = (add != not_given ? 1 : 0) + (size != not_given ? 1 : 0) + (mass == mass ? 1 : 0);
    if (chosen == 0) return fail(errc::invalid_parameter, "greedy_mass", no_value, "needs a target: add, size or mass");
    if (chosen > 1) {
      return fail(errc::invalid_parameter, "greedy_mass", no_value,
                  "takes one target of add, size and mass, not several");
    }
    return {};
  }
  constexpr scoring_needs needs() const noexcept { return needs_of_gate(gate, true); }
  /// Alone on an empty S it adds at least one expert only with a positive target and
  /// the sparse gate (dense p may be all zero).
  constexpr bool seeds_selection() const noexcept {
    return gate == column_mass::sparse && (add > 0 || size > 0 || mass > 0.0f);
  }
};

static_assert(set_stage<greedy_mass>);

}  // namespace moe_routing

#pragma once
/// \file
/// `confidence_keep(min_confidence, budget)`: Lynx-Acc. Keeps every confident token's
/// top-1 expert, then the experts those tokens voted for most, up to the budget.
/// Replaces S.

#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct confidence_keep {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "confidence_keep";
  static constexpr bool decode_only = true;
  float min_confidence = 0.0f;  ///< in [0, 1]
  int budget = 0;               ///< M, >= 0; S exceeds it only if the top-1 experts do
  column_mass gate = column_mass::sparse;  ///< mass that breaks vote ties

  constexpr status validate() const noexcept {
    if (!(min_confidence >= 0.0f && min_confidence <= 1.0f)) {
      return fail(errc::invalid_parameter, "confidence_keep.min_confidence", min_confidence,
                  "must be in [0, 1]");
    }
    if (budget < 0) {
      return fail(errc::invalid_parameter, "confidence_keep.budget", budget, "must not be negative");
    }
    return {};
  }
};

static_assert(set_stage<confidence_keep>);

}  // namespace moe_routing

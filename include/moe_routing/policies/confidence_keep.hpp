#pragma once
/// \file
/// `confidence_keep(min_confidence, budget)`: Lynx-Acc. Keeps every confident token's
/// top-1 expert, then the experts those tokens voted for most, up to the budget.
/// Replaces S.

#include <array>
#include <cstdint>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct confidence_keep {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::replaces;
  static constexpr const char* name = "confidence_keep";
  static constexpr bool decode_only = true;
  float min_confidence = 0.0f;             ///< in [0, 1]
  int budget = 0;                          ///< M, >= 0; S exceeds it only if the top-1 experts do
  column_mass gate = column_mass::sparse;  ///< mass that breaks vote ties

  static constexpr auto parameters() {
    using parameter = stage_parameter<confidence_keep>;
    return std::array{
        parameter{.name = "min_confidence",
                  .synonym = "conf",
                  .qualified = "confidence_keep.min_confidence",
                  .kind = parameter_kind::real,
                  .real = &confidence_keep::min_confidence,
                  .range = unit_interval},
        parameter{.name = "budget",
                  .qualified = "confidence_keep.budget",
                  .integer = &confidence_keep::budget,
                  .required = true,
                  .range = non_negative},
        parameter{.name = "gate",
                  .qualified = "confidence_keep.gate",
                  .kind = parameter_kind::gate,
                  .gate = &confidence_keep::gate},
    };
  }
  /// Confidence is the top p over the candidate total: the full softmax.
  constexpr scoring_needs needs() const noexcept { return {true, gate == column_mass::dense, false}; }

  /// Whether a token is confident: its top candidate's share of the candidate total.
  MOE_ROUTING_HOST_DEVICE constexpr bool is_confident(const row_stats& stats) const noexcept {
    return stats.max_candidate_p / stats.candidate_total >= min_confidence;
  }
  /// The keep order, shared by every backend: most votes first, then most mass, then the
  /// lower index.
  MOE_ROUTING_HOST_DEVICE static constexpr bool keeps_before(const std::int32_t* votes, const std::int64_t* mass, int a,
                                                             int b) noexcept {
    if (votes[a] != votes[b]) return votes[a] > votes[b];
    if (mass[a] != mass[b]) return mass[a] > mass[b];
    return a < b;
  }
};

static_assert(set_stage<confidence_keep>);

}  // namespace moe_routing

#pragma once
/// \file
/// `prune(k0, top_p, skip_ratio)`: OEA phase 1, top-p routing and dynamic skipping.
/// Each token's best b_i = min(k0, kp_i, kb_i) experts form its guaranteed baseline.

#include <array>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct prune {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "prune";
  static constexpr const char* guarantee_parameter = "prune.k0";
  int k0 = 0;               ///< baseline experts per token, 1..k
  float top_p = 1.0f;       ///< (0, 1]: stop once the baseline holds this share of p
  float skip_ratio = 0.0f;  ///< beta in [0, 1]: drop ranks whose p < beta * p_top1

  static constexpr auto parameters() {
    using parameter = stage_parameter<prune>;
    return std::array{
        parameter{.name = "k0",
                  .qualified = "prune.k0",
                  .integer = &prune::k0,
                  .required = true,
                  .range = at_least_one,
                  .counts_experts_per_token = true},
        parameter{.name = "top_p",
                  .qualified = "prune.top_p",
                  .kind = parameter_kind::real,
                  .real = &prune::top_p,
                  .range = share_of_one},
        parameter{.name = "skip_ratio",
                  .synonym = "beta",
                  .qualified = "prune.skip_ratio",
                  .kind = parameter_kind::real,
                  .real = &prune::skip_ratio,
                  .range = unit_interval},
    };
  }
  /// Top-p and skip thresholds compare p with the whole row's, so they need the full softmax.
  constexpr scoring_needs needs() const noexcept { return {false, false, top_p >= 1.0f && skip_ratio <= 0.0f}; }
  constexpr int guaranteed_depth() const noexcept { return k0; }

  /// b_i = min(k0, kp_i, kb_i) from a token's top-k p in rank order and its candidate
  /// total. Shared by every backend, so that they count the same ranks.
  MOE_ROUTING_HOST_DEVICE constexpr int baseline_size(const float* top_p_of_token,
                                                      float candidate_total) const noexcept {
    int kp = k0;
    const bool usable_total = candidate_total > 0.0f && candidate_total <= largest_float;
    if (top_p < 1.0f && usable_total) {
      const float target = top_p * candidate_total;
      float sum = 0;
      for (int j = 0; j < k0; ++j) {
        sum += top_p_of_token[j] > 0.0f ? top_p_of_token[j] : 0.0f;
        if (sum >= target) {
          kp = j + 1;
          break;
        }
      }
    }
    int kb = 1;
    const float floor = skip_ratio * top_p_of_token[0];
    while (kb < k0 && top_p_of_token[kb] >= floor) ++kb;
    const int smaller = kp < kb ? kp : kb;
    return smaller < k0 ? smaller : k0;
  }
};

static_assert(set_stage<prune>);

}  // namespace moe_routing

#pragma once
/// \file
/// `prune(k0, top_p, skip_ratio)`: OEA phase 1, top-p routing and dynamic skipping.
/// Each token's best b_i = min(k0, kp_i, kb_i) experts form its guaranteed baseline.

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

struct prune {
  static constexpr stage_role role = stage_role::set;
  static constexpr const char* name = "prune";
  int k0 = 0;              ///< baseline experts per token, 1..k
  float top_p = 1.0f;      ///< (0, 1]: stop once the baseline holds this share of p
  float skip_ratio = 0.0f; ///< beta in [0, 1]: drop ranks whose p < beta * p_top1

  constexpr status validate() const noexcept {
    if (k0 < 1) return fail(errc::invalid_parameter, "prune.k0", k0, "must be at least 1");
    if (!(top_p > 0.0f && top_p <= 1.0f)) {
      return fail(errc::invalid_parameter, "prune.top_p", top_p, "must be in (0, 1]");
    }
    if (!(skip_ratio >= 0.0f && skip_ratio <= 1.0f)) {
      return fail(errc::invalid_parameter, "prune.skip_ratio", skip_ratio, "must be in [0, 1]");
    }
    return {};
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    return check_at_most_top_k("prune.k0", k0, shape);
  }
  constexpr int guaranteed_depth() const noexcept { return k0; }

  /// b_i = min(k0, kp_i, kb_i) from a token's top-k p in rank order and its candidate
  /// total. Shared by every backend, so that they count the same ranks.
  MOE_ROUTING_HOST_DEVICE constexpr int baseline_size(const float* top_p_of_token,
                                                      float candidate_total) const noexcept {
    int kp = k0;
    const bool usable_total = candidate_total > 0.0f && candidate_total <= 3.4028234e38f;
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

#pragma once
/// \file
/// `topk_union(k)`: vanilla routing's set, the union of every token's top-k.

#include <array>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct topk_union {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "topk_union";
  int k = 0;  ///< 0 means the model's top-k

  static constexpr auto parameters() {
    return std::array{stage_parameter<topk_union>{.name = "k",
                                                  .qualified = "topk_union.k",
                                                  .integer = &topk_union::k,
                                                  .range = non_negative,
                                                  .counts_experts_per_token = true}};
  }
  /// Reads only the order of each token's top-k.
  constexpr scoring_needs needs() const noexcept { return {}; }
  MOE_ROUTING_HOST_DEVICE constexpr int effective_k(int top_k) const noexcept { return k == 0 ? top_k : k; }
};

static_assert(set_stage<topk_union>);

}  // namespace moe_routing

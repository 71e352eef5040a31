#pragma once
/// \file
/// `prune_to_budget(budget = M, k)`: OEA's baseline with a depth chosen per batch. The
/// largest k0 in 1..k whose baseline union (S and every valid token's top-k0) holds at most
/// M experts is guaranteed, as `prune(k0)` would; `refine` then piggybacks. A small batch
/// gets a deep baseline, a large one a shallow one: the batch-size-adaptive k0 the OEA
/// paper leaves open. When even k0 = 1 does not fit, k0 = 1 (every token keeps its top-1).

#include <array>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

/// The largest depth d in 1..`deepest` whose union fits: `joining[r]` experts outside S
/// first appear at rank r of some valid token (r < deepest), S holds `selected`, and
/// `fits(union_size)` says whether a union of that size fits. At least 1. Shared by the
/// budget stages on every backend.
template <class Fits>
MOE_ROUTING_HOST_DEVICE constexpr int deepest_fitting_depth(const std::int32_t* joining, int selected, int deepest,
                                                            Fits&& fits) {
  int depth = 1;
  int union_size = selected;
  for (int r = 0; r < deepest; ++r) {
    union_size += joining[r];
    if (!fits(union_size)) break;
    depth = r + 1;
  }
  return depth;
}

/// The deepest k0 a budget stage (prune_to_budget, prune_to_latency) tries, from its `k`:
/// 0 means the model's top-k.
MOE_ROUTING_HOST_DEVICE constexpr int budget_deepest_depth(int k, int top_k) noexcept { return k == 0 ? top_k : k; }

/// The deepest guarantee a budget stage promises before the model's top-k is known: its
/// `k`, or one rank for k = 0. Never 0, since k0 = 1 is kept even when nothing fits, so a
/// stage that replaces S is refused after it.
MOE_ROUTING_HOST_DEVICE constexpr int budget_guaranteed_depth(int k) noexcept { return k > 0 ? k : 1; }

struct prune_to_budget {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "prune_to_budget";
  static constexpr const char* guarantee_parameter = "prune_to_budget.k";
  int budget = 0;  ///< M >= 1: distinct experts the baseline union may hold
  int k = 0;       ///< the deepest k0 tried; 0 means the model's top-k

  static constexpr auto parameters() {
    using parameter = stage_parameter<prune_to_budget>;
    return std::array{
        parameter{.name = "budget",
                  .qualified = "prune_to_budget.budget",
                  .integer = &prune_to_budget::budget,
                  .required = true,
                  .range = at_least_one},
        parameter{.name = "k",
                  .qualified = "prune_to_budget.k",
                  .integer = &prune_to_budget::k,
                  .range = non_negative,
                  .counts_experts_per_token = true},
    };
  }
  /// Reads only the order of each token's top-k.
  constexpr scoring_needs needs() const noexcept { return {}; }
  /// The deepest guarantee, when the policy is built (k = 0: the model's top-k, known at
  /// bind, `guaranteed_depth_at`). The depth of a batch is chosen when it is routed.
  constexpr int guaranteed_depth() const noexcept { return budget_guaranteed_depth(k); }
  constexpr int guaranteed_depth_at(int top_k) const noexcept { return effective_k(top_k); }
  MOE_ROUTING_HOST_DEVICE constexpr int effective_k(int top_k) const noexcept { return budget_deepest_depth(k, top_k); }

  /// Whether a baseline union of `union_size` experts fits the budget.
  MOE_ROUTING_HOST_DEVICE constexpr bool fits(int union_size, int /*valid_tokens*/, int /*top_k*/) const noexcept {
    return union_size <= budget;
  }
};

static_assert(set_stage<prune_to_budget>);

}  // namespace moe_routing

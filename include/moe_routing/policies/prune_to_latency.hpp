#pragma once
/// \file
/// `prune_to_latency(target = T, t_fetch, t_token, k)`: `prune_to_budget` with the budget
/// set by the memory-bound latency model of the OEA paper that `measure_plan` reports
/// (`latency_model` in metrics/plan_metrics.hpp):
///
///   T(k0) = |union| * t_fetch + assignments * t_token,
///
/// where the union is S and every valid token's top-k0, and assignments = valid tokens x
/// min(k, |union|), what `refine(k)` assigns once it piggybacks on that union. The largest
/// k0 in 1..k with T(k0) <= target is guaranteed; k0 = 1 when none fits. With t_token = 0
/// and t_fetch = 1 (the defaults, as `latency_model`'s) the target is a budget of experts.

#include <array>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/prune_to_budget.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct prune_to_latency {
  static constexpr stage_role role = stage_role::set;
  static constexpr set_effect effect = set_effect::adds;
  static constexpr const char* name = "prune_to_latency";
  static constexpr const char* guarantee_parameter = "prune_to_latency.k";
  float target = 0.0f;   ///< T: the modelled layer time to stay within, finite and > 0
  float t_fetch = 1.0f;  ///< time to load one expert, finite and > 0
  float t_token = 0.0f;  ///< time of one (token, expert) assignment, finite and >= 0
  int k = 0;             ///< the deepest k0 tried and the experts refine assigns; 0: the model's top-k

  static constexpr auto parameters() {
    using parameter = stage_parameter<prune_to_latency>;
    constexpr value_range finite_non_negative{0, largest_float, false, "must be finite and not negative"};
    return std::array{
        parameter{.name = "target",
                  .qualified = "prune_to_latency.target",
                  .kind = parameter_kind::real,
                  .real = &prune_to_latency::target,
                  .required = true,
                  .range = finite_positive},
        parameter{.name = "t_fetch",
                  .qualified = "prune_to_latency.t_fetch",
                  .kind = parameter_kind::real,
                  .real = &prune_to_latency::t_fetch,
                  .range = finite_positive},
        parameter{.name = "t_token",
                  .qualified = "prune_to_latency.t_token",
                  .kind = parameter_kind::real,
                  .real = &prune_to_latency::t_token,
                  .range = finite_non_negative},
        parameter{.name = "k",
                  .qualified = "prune_to_latency.k",
                  .integer = &prune_to_latency::k,
                  .range = non_negative,
                  .counts_experts_per_token = true},
    };
  }
  /// Reads only the order of each token's top-k.
  constexpr scoring_needs needs() const noexcept { return {}; }
  /// As prune_to_budget's: the deepest guarantee; the batch's own depth is chosen when routed.
  constexpr int guaranteed_depth() const noexcept { return budget_guaranteed_depth(k); }
  constexpr int guaranteed_depth_at(int top_k) const noexcept { return effective_k(top_k); }
  MOE_ROUTING_HOST_DEVICE constexpr int effective_k(int top_k) const noexcept { return budget_deepest_depth(k, top_k); }

  /// The modelled time of a baseline union of `union_size` experts, in double precision
  /// (the same arithmetic as `latency_model::time`).
  MOE_ROUTING_HOST_DEVICE constexpr double modelled_time(int union_size, int valid_tokens, int top_k) const noexcept {
    const int per_token = effective_k(top_k) < union_size ? effective_k(top_k) : union_size;
    const long long assignments = static_cast<long long>(valid_tokens) * per_token;
    return union_size * static_cast<double>(t_fetch) + static_cast<double>(assignments) * static_cast<double>(t_token);
  }
  MOE_ROUTING_HOST_DEVICE constexpr bool fits(int union_size, int valid_tokens, int top_k) const noexcept {
    return modelled_time(union_size, valid_tokens, top_k) <= static_cast<double>(target);
  }
};

static_assert(set_stage<prune_to_latency>);

}  // namespace moe_routing

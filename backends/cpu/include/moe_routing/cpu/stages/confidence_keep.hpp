#pragma once
/// \file
/// `confidence_keep` on the CPU: S becomes the confident tokens' top-1 experts, then
/// their most voted experts (`confidence_keep::keeps_before`) up to the budget.

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/confidence_keep.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, confidence_keep> {
  template <class Context>
  static void apply(const confidence_keep& stage, Context& context) {
    bool any_important = false;
    for (int token = 0; token < context.tokens() && !any_important; ++token) {
      any_important = context.is_valid(token) && stage.is_confident(context.stats(token));
    }
    std::int32_t* votes = context.scratch_counts();  // votes of the important tokens only
    std::fill(votes, votes + context.experts(), 0);
    expert_set kept;
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token) || (any_important && !stage.is_confident(context.stats(token)))) continue;
      const auto top = context.top_experts(token);
      kept.insert(top[0]);
      for (const std::int32_t e : top) ++votes[e];
    }
    const auto mass = context.mass(stage.gate);
    std::int32_t* order = context.scratch_experts();
    int count = 0;
    for (int e = 0; e < context.experts(); ++e) {
      if (votes[e] > 0 && !kept.contains(e)) order[count++] = e;
    }
    std::sort(order, order + count,
              [&](std::int32_t a, std::int32_t b) { return confidence_keep::keeps_before(votes, mass.data(), a, b); });
    int size = kept.size();
    for (int i = 0; i < count && size < stage.budget; ++i, ++size) kept.insert(order[i]);
    context.selected = kept;
  }
};

}  // namespace moe_routing

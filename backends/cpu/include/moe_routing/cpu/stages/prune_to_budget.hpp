#pragma once
/// \file
/// `prune_to_budget` and `prune_to_latency` on the CPU: one pass over the valid tokens'
/// top-k finds the first rank at which each expert outside S appears; a count of experts
/// per such rank gives every depth's union size at once, and `deepest_fitting_depth`
/// (shared with the CUDA backend) picks the depth, which every valid token is then
/// guaranteed, as `prune(k0)` would. O(n k + E), in the workspace's scratch.

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/prune_to_budget.hpp"
#include "moe_routing/policies/prune_to_latency.hpp"

namespace moe_routing {

namespace cpu::detail {

/// Guarantees every valid token its best d ranks, d the deepest depth whose union
/// `stage.fits`.
template <class Stage, class Context>
void guarantee_deepest_fitting(const Stage& stage, Context& context) {
  const int deepest = stage.effective_k(context.top_k());
  std::int32_t* first_rank = context.scratch_counts();  // E: the first rank of each expert outside S
  std::int32_t* joining = context.scratch_experts();    // deepest <= E: experts first seen at each rank
  std::fill(first_rank, first_rank + context.experts(), deepest);
  std::fill(joining, joining + deepest, 0);
  int valid = 0;
  for (int token = 0; token < context.tokens(); ++token) {
    if (!context.is_valid(token)) continue;
    ++valid;
    const auto top = context.top_experts(token);
    for (int r = 0; r < deepest; ++r)
      first_rank[top[static_cast<std::size_t>(r)]] = std::min(first_rank[top[static_cast<std::size_t>(r)]], r);
  }
  if (valid == 0) return;
  for (int e = 0; e < context.experts(); ++e) {
    if (first_rank[e] < deepest && !context.selected.contains(e)) ++joining[first_rank[e]];
  }
  const int depth = deepest_fitting_depth(joining, context.selected.size(), deepest, [&](int union_size) {
    return stage.fits(union_size, valid, context.top_k());
  });
  for (int token = 0; token < context.tokens(); ++token) {
    if (context.is_valid(token)) context.guarantee(token, depth);
  }
}

}  // namespace cpu::detail

template <>
struct stage_executor<cpu_backend, prune_to_budget> {
  template <class Context>
  static void apply(const prune_to_budget& stage, Context& context) {
    cpu::detail::guarantee_deepest_fitting(stage, context);
  }
};

}  // namespace moe_routing

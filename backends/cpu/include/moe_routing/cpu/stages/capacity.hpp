#pragma once
/// \file
/// Capacity re-routing on the CPU (policies/capacity.hpp): refine's rows re-routed in one
/// serial pass, before the summary counts them. Serial on purpose: the order of the pass
/// decides which token keeps a seat, and it must be the same on every backend.

#include <cstdint>

#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/capacity.hpp"
#include "moe_routing/policies/refine.hpp"

namespace moe_routing::cpu {

/// Caps each expert at `stage.capacity` tokens where S has room; no allocation (the
/// per-expert loads live in the workspace's expert scratch).
template <class Context>
void reroute_over_capacity(const refine& stage, Context& context, const plan_view& plan) {
  moe_routing::reroute_over_capacity(
      stage, assigned_rows{plan.ids, plan.weights, plan.counts, plan.top_k}, context.tokens(), context.experts(),
      context.scratch_counts(), context.scratch_tokens(), [&](int e) { return context.selected.contains(e); },
      [&](int token) { return context.guaranteed_ranks(token); },
      [&](int token, int e) { return context.rank_key_of(token, e); },
      [&](int token, int e) { return context.probability(token, e); },
      [&](std::int32_t* ids, int count) {
        for (int j = count; j < plan.top_k; ++j) ids[j] = padding_id(plan.pad, count, ids[0]);
      });
}

}  // namespace moe_routing::cpu

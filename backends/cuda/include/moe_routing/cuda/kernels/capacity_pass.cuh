#pragma once
/// \file
/// Capacity re-routing on the GPU (policies/capacity.hpp): one thread of the summary block
/// runs the shared serial pass over the n x k assignments, after every row is written and
/// before the summary reads them. At decode sizes (n k of a few hundred to a few thousand
/// slots, |S| up to E) that is cheaper than coordinating a block, and it makes the order of
/// the pass, which decides who keeps a seat, the CPU's by construction. Launch-only, no host
/// synchronisation: a call that caps stays CUDA-graph safe.

#include <cstdint>

#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/capacity.hpp"

namespace moe_routing::cuda::detail {

/// Re-routes the plan's rows over `c.assignment.capacity`, then rebuilds the active set and
/// the per-expert counts from the final rows. `load` is shared scratch of max_experts. Every
/// thread of the block calls it.
template <class Call>
__device__ void reroute_over_capacity_on_block(const Call& c, const std::uint32_t* selected, std::int32_t* load) {
  if (threadIdx.x == 0) {
    const auto& batch = c.batch;
    const auto x_of = [&](int token, int e) { return to_float(batch.scores.row(token)[e]); };
    moe_routing::reroute_over_capacity(
        c.assignment, assigned_rows{c.plan.ids, c.plan.weights, c.plan.counts, c.plan.top_k}, batch.tokens(),
        batch.experts(), load, c.ws.token_order, [&](int e) { return has(selected, e); },
        [&](int token) { return static_cast<int>(c.ws.depth[token]); },
        [&](int token, int e) {  // the CPU's stage_context::rank_key_of, term for term
          const float x = x_of(token, e);
          if (batch.ranks_by_input()) return make_rank_key(x, e);
          return make_rank_key(rank_score(x, probability_of(batch.mode, x, c.ws.stats[token]), batch.bias, e), e);
        },
        [&](int token, int e) { return probability_of(batch.mode, x_of(token, e), c.ws.stats[token]); },
        [&](std::int32_t* ids, int count) {
          for (int j = count; j < c.plan.top_k; ++j) ids[j] = padding_id(c.plan.pad, count, ids[0]);
        });
    for (int w = 0; w < set_words; ++w) c.ws.active[w] = 0;
    for (int e = 0; e < batch.experts(); ++e) {
      if (load[e] > 0) c.ws.active[e >> 5] |= 1u << (e & 31);
      if (c.plan.expert_tokens != nullptr) c.plan.expert_tokens[e] = load[e];
    }
  }
  __threadfence_block();
  __syncthreads();
}

}  // namespace moe_routing::cuda::detail

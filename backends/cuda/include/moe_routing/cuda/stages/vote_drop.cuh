#pragma once
/// \file
/// `vote_drop` on one thread block: S's unguaranteed members ranked by
/// `vote_drop::drops_before`, the first d dropped in parallel, always leaving one expert.

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, vote_drop> {
  template <class Context>
  __device__ static void apply(const vote_drop& stage, Context& context) {
    const std::int32_t* votes = context.votes().data();
    const std::int64_t* mass = context.mass(stage.gate).data();
    const int size = context.selected.size();
    const int count =
        context.rank_experts([&](int e) { return context.selected.contains(e) && !context.guaranteed.contains(e); },
                             [&](int a, int b) { return vote_drop::drops_before(votes, mass, a, b); });
    int drop = stage.d < count ? stage.d : count;
    if (drop > size - 1) drop = size - 1;  // always leave one expert
    const std::int32_t* order = context.scratch_experts();
    cuda::detail::for_each_thread_item(drop, [&](int i) { context.selected.erase(order[i]); });
  }
};

}  // namespace moe_routing

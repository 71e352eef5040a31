#pragma once
/// \file
/// `confidence_keep` on one thread block: the confident tokens' (all tokens' when none is)
/// top-1 experts and votes, then their most voted experts ranked by
/// `confidence_keep::keeps_before` up to the budget; S becomes that set.

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/confidence_keep.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, confidence_keep> {
  template <class Context>
  __device__ static void apply(const confidence_keep& stage, Context& context) {
    using cuda::detail::for_each_thread_item;
    cuda::detail::block_sets& shared = context.shared();
    bool confident = false;  // one flag per thread, joined by the barrier: no shared write races
    for_each_thread_item(context.tokens(), [&](int token) {
      confident = confident || (context.is_valid(token) && stage.is_confident(context.stats(token)));
    });
    std::int32_t* votes = context.scratch_counts();  // votes of the counted tokens only
    auto* kept = reinterpret_cast<std::uint32_t*>(context.scratch_cursors());
    for_each_thread_item(context.experts(), [&](int e) { votes[e] = 0; });
    for_each_thread_item(cuda::set_words, [&](int w) { kept[w] = 0; });
    const bool any_confident = __syncthreads_or(confident) != 0;
    for_each_thread_item(context.tokens(), [&](int token) {
      if (!context.is_valid(token) || (any_confident && !stage.is_confident(context.stats(token)))) return;
      const auto top = context.top_experts(token);
      cuda::detail::add(kept, top[0]);
      for (int j = 0; j < context.top_k(); ++j) atomicAdd(votes + top[j], 1);
    });
    __syncthreads();
    const std::int64_t* mass = context.mass(stage.gate).data();
    const int count =
        context.rank_experts([&](int e) { return votes[e] > 0 && !cuda::detail::has(kept, e); },
                             [&](int a, int b) { return confidence_keep::keeps_before(votes, mass, a, b); });
    const int room = stage.budget - cuda::detail::set_size(kept);
    __syncthreads();
    const std::int32_t* order = context.scratch_experts();
    for_each_thread_item(count < room ? count : room, [&](int i) { cuda::detail::add(kept, order[i]); });
    __syncthreads();
    for_each_thread_item(cuda::set_words, [&](int w) { shared.selected[w] = kept[w]; });
  }
};

}  // namespace moe_routing

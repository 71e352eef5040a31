#pragma once
/// \file
/// The set stages of a routing call on one thread block: each through its
/// `stage_executor<cuda_backend, Stage>`, in order, S starting empty; or vanilla top-k
/// where the policy routes as vanilla in prefill.

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/cuda/stages/confidence_keep.cuh"
#include "moe_routing/cuda/stages/coverage_greedy.cuh"
#include "moe_routing/cuda/stages/ep_fill.cuh"
#include "moe_routing/cuda/stages/ep_level.cuh"
#include "moe_routing/cuda/stages/greedy_mass.cuh"
#include "moe_routing/cuda/stages/per_request.cuh"
#include "moe_routing/cuda/stages/prune.cuh"
#include "moe_routing/cuda/stages/prune_to_budget.cuh"
#include "moe_routing/cuda/stages/prune_to_latency.cuh"
#include "moe_routing/cuda/stages/topk_union.cuh"
#include "moe_routing/cuda/stages/user_stage.cuh"
#include "moe_routing/cuda/stages/vote_drop.cuh"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing::cuda::detail {

/// Runs the set stages of `program` (a runtime policy or a compiled pipeline) into
/// `context.selected`. Every thread of the block calls it.
template <class Program, score_element Element>
__device__ void run_set_stages(const Program& program, bool as_vanilla, block_stage_context<Element>& context) {
  block_sets& shared = context.shared();
  for_each_thread_item(set_words, [&](int w) { shared.selected[w] = shared.guaranteed[w] = 0; });
  __syncthreads();
  if (as_vanilla) {
    stage_executor<cuda_backend, topk_union>::apply(topk_union{}, context);
    __syncthreads();
    return;
  }
  program.for_each_stage([&](const auto& stage) {
    using stage_type = std::remove_cvref_t<decltype(stage)>;
    if constexpr (set_stage<stage_type>) {
      stage_executor<cuda_backend, stage_type>::apply(stage, context);
      __syncthreads();
    }
  });
}

}  // namespace moe_routing::cuda::detail

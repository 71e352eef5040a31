#pragma once
/// \file
/// `prune_to_budget` and `prune_to_latency` on one thread block: the first rank at which
/// each expert outside S appears among the valid tokens' top-k (atomicMin in shared
/// memory), the count of experts joining at each rank, then every thread computes the same
/// depth with `deepest_fitting_depth` (shared with the CPU) and guarantees its tokens.

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/prune_to_budget.hpp"
#include "moe_routing/policies/prune_to_latency.hpp"

namespace moe_routing {

namespace cuda::detail {

/// Guarantees every valid token its best d ranks, d the deepest depth whose union
/// `stage.fits`. Every thread of the block calls it.
template <class Stage, class Context>
__device__ void guarantee_deepest_fitting(const Stage& stage, Context& context) {
  const int deepest = stage.effective_k(context.top_k());
  std::int32_t* first_rank = context.scratch_counts();
  std::int32_t* joining = context.scratch_cursors();
  block_sets& shared = context.shared();
  for_each_thread_item(context.experts(), [&](int e) { first_rank[e] = deepest; });
  for_each_thread_item(deepest, [&](int r) { joining[r] = 0; });
  if (threadIdx.x == 0) shared.count = 0;
  __syncthreads();
  for_each_thread_item(context.tokens(), [&](int token) {
    if (!context.is_valid(token)) return;
    atomicAdd(&shared.count, 1);
    const std::int32_t* top = context.top_experts(token).data();
    for (int r = 0; r < deepest; ++r) atomicMin(first_rank + top[r], r);
  });
  __syncthreads();
  for_each_thread_item(context.experts(), [&](int e) {
    if (first_rank[e] < deepest && !context.selected.contains(e)) atomicAdd(joining + first_rank[e], 1);
  });
  __syncthreads();
  const int valid = shared.count;
  const int depth = deepest_fitting_depth(joining, context.selected.size(), deepest, [&](int union_size) {
    return stage.fits(union_size, valid, context.top_k());
  });
  __syncthreads();  // every thread has read S's size before it grows
  if (valid == 0) return;
  for_each_thread_item(context.tokens(), [&](int token) {
    if (context.is_valid(token)) context.guarantee(token, depth);
  });
}

}  // namespace cuda::detail

template <>
struct stage_executor<cuda_backend, prune_to_budget> {
  template <class Context>
  __device__ static void apply(const prune_to_budget& stage, Context& context) {
    cuda::detail::guarantee_deepest_fitting(stage, context);
  }
};

}  // namespace moe_routing

#pragma once
/// \file
/// `greedy_mass` on one thread block: the experts outside S ranked by mass (`heavier_expert`),
/// then the first ones by count, to a size (in parallel) or to a mass share (one thread).

#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/greedy_mass.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, greedy_mass> {
  template <class Context>
  __device__ static void apply(const greedy_mass& stage, Context& context) {
    const std::int64_t* mass = context.mass(stage.gate).data();
    const int available = context.rank_unselected_by_mass(mass);
    const std::int32_t* order = context.scratch_experts();
    if (stage.add >= 0 || stage.size >= 0) {
      const int take = stage.add >= 0 ? stage.add : stage.size - context.selected.size();
      __syncthreads();  // every thread has counted S before it grows
      cuda::detail::for_each_thread_item(available < take ? available : take,
                                         [&](int i) { context.selected.insert(order[i]); });
      return;
    }
    add_to_mass_share(stage, context, mass, available);
  }

 private:
  /// `mass = tau`: the totals summed in integers (exact in any order), then one thread adds
  /// experts in order until S holds the share.
  template <class Context>
  __device__ static void add_to_mass_share(const greedy_mass& stage, Context& context, const std::int64_t* mass,
                                           int available) {
    unsigned long long* sums = context.shared().sums;
    if (threadIdx.x < 2) sums[threadIdx.x] = 0;
    __syncthreads();
    cuda::detail::for_each_thread_item(context.experts(), [&](int e) {
      atomicAdd(&sums[0], static_cast<unsigned long long>(mass[e]));
      if (context.selected.contains(e)) atomicAdd(&sums[1], static_cast<unsigned long long>(mass[e]));
    });
    __syncthreads();
    if (threadIdx.x != 0) return;
    const double target = static_cast<double>(stage.mass) * static_cast<double>(static_cast<std::int64_t>(sums[0]));
    auto held = static_cast<std::int64_t>(sums[1]);
    const std::int32_t* order = context.scratch_experts();
    for (int i = 0; i < available && static_cast<double>(held) < target; ++i) {
      context.selected.insert(order[i]);
      held += mass[order[i]];
    }
  }
};

}  // namespace moe_routing

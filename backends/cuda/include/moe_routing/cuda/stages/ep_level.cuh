#pragma once
/// \file
/// `ep_level` on one thread block: the experts outside S ranked by mass (the block's
/// shared ranking), then the one levelling pass on one thread, as on the CPU.

#include <cstdint>

#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/ep_level.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, ep_level> {
  template <class Context>
  __device__ static void apply(const ep_level& stage, Context& context) {
    const int available = context.rank_unselected_by_mass(context.mass(stage.gate).data());
    if (threadIdx.x != 0) return;
    // O(E + G): a single pass, so one thread costs little next to the ranking.
    const std::int32_t* order = context.scratch_experts();
    std::int32_t* load = context.scratch_counts();
    const auto& batch = context.batch();
    const auto for_each_device = [&](int e, auto&& visit) { for_each_device_of(batch, e, visit); };
    for (int g = 0; g < context.devices(); ++g) load[g] = 0;
    for (int e = 0; e < context.experts(); ++e) {
      if (context.selected.contains(e)) for_each_device(e, [&](int g) { ++load[g]; });
    }
    stage.level_devices(order, available, context.devices(), load, for_each_device,
                        [&](int e) { context.selected.insert(e); });
  }
};

}  // namespace moe_routing

#pragma once
/// \file
/// `ep_fill` on one thread block: the experts outside S ranked by mass, then the round-robin
/// over devices on one thread, as on the CPU (the rounds depend on each other).

#include <cstdint>

#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/ep_fill.hpp"

namespace moe_routing {

template <>
struct stage_executor<cuda_backend, ep_fill> {
  template <class Context>
  __device__ static void apply(const ep_fill& stage, Context& context) {
    const int available = context.rank_unselected_by_mass(context.mass(stage.gate).data());
    if (threadIdx.x != 0) return;
    // O(E + G * rounds).
    const std::int32_t* order = context.scratch_experts();
    std::int32_t* load = context.scratch_counts();
    std::int32_t* cursor = context.scratch_cursors();
    const auto& batch = context.batch();
    const auto count_load = [&](int e) { for_each_device_of(batch, e, [&](int g) { ++load[g]; }); };
    for (int g = 0; g < context.devices(); ++g) load[g] = 0;
    for (int e = 0; e < context.experts(); ++e) {
      if (context.selected.contains(e)) count_load(e);
    }
    const auto on_device = [&](int e, int device) {
      bool on = false;
      for_each_device_of(batch, e, [&](int g) { on = on || g == device; });
      return on;
    };
    const auto insert = [&](int e) {
      context.selected.insert(e);
      count_load(e);
    };
    stage.fill_devices(order, available, context.devices(), load, cursor, on_device, insert,
                       [&](int e) { return context.selected.contains(e); });
  }
};

}  // namespace moe_routing

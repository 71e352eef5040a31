#pragma once
/// \file
/// `ep_level` on the CPU: the experts outside S ranked by mass, then one pass filling each
/// device up to the busiest device's load (`ep_level::level_devices`).

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/simd/mass_ranking.hpp"
#include "moe_routing/policies/ep_level.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, ep_level> {
  template <class Context>
  static void apply(const ep_level& stage, Context& context) {
    const int devices = context.devices();
    std::int32_t* load = context.scratch_counts();
    std::fill(load, load + devices, 0);
    const auto& batch = context.batch();
    const auto for_each_device = [&](int e, auto&& visit) { for_each_device_of(batch, e, visit); };
    context.selected.for_each([&](int e) { for_each_device(e, [&](int g) { ++load[g]; }); });
    std::int32_t* order = context.scratch_experts();
    const int available = cpu::detail::rank_unselected_by_mass(context.mass(stage.gate), context.selected, order);
    stage.level_devices(order, available, devices, load, for_each_device, [&](int e) { context.selected.insert(e); });
  }
};

}  // namespace moe_routing

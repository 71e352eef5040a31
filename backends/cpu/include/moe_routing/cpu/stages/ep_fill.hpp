#pragma once
/// \file
/// `ep_fill` on the CPU: round-robin over devices, each below m_g experts adds its
/// heaviest expert outside S (with redundant experts: one with a replica on it).

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/simd/mass_ranking.hpp"
#include "moe_routing/policies/ep_fill.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, ep_fill> {
  template <class Context>
  static void apply(const ep_fill& stage, Context& context) {
    const int devices = context.devices();
    std::int32_t* load = context.scratch_counts();
    std::int32_t* cursor = context.scratch_device_cursors();
    std::fill(load, load + devices, 0);
    const auto& batch = context.batch();
    const auto count_load = [&](int e) { for_each_device_of(batch, e, [&](int g) { ++load[g]; }); };
    context.selected.for_each(count_load);
    std::int32_t* order = context.scratch_experts();
    const int available = cpu::detail::rank_unselected_by_mass(context.mass(stage.gate), context.selected, order);
    const auto on_device = [&](int e, int device) {
      bool on = false;
      for_each_device_of(batch, e, [&](int g) { on = on || g == device; });
      return on;
    };
    const auto insert = [&](int e) {
      context.selected.insert(e);
      count_load(e);
    };
    stage.fill_devices(order, available, devices, load, cursor, on_device, insert,
                       [&](int e) { return context.selected.contains(e); });
  }
};

}  // namespace moe_routing

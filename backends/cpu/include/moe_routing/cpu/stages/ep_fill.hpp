#pragma once
/// \file
/// `ep_fill` on the CPU: round-robin over devices, each below m_g experts adds its
/// heaviest expert outside S.

#include <algorithm>
#include <cstdint>

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
    context.selected.for_each([&](int e) { ++load[context.device_of(e)]; });
    std::int32_t* order = context.scratch_experts();
    const int available = cpu::detail::rank_unselected_by_mass(context.mass(stage.gate), context.selected, order);
    stage.fill_devices(
        order, available, devices, load, cursor, [&](int e) { return context.device_of(e); },
        [&](int e) { context.selected.insert(e); });
  }
};

}  // namespace moe_routing

#pragma once
/// \file
/// `greedy_mass` on the CPU: the heaviest experts outside S (`rank_unselected_by_mass`)
/// join S by count, to a size or to a mass share.

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/simd/mass_ranking.hpp"
#include "moe_routing/policies/greedy_mass.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, greedy_mass> {
  template <class Context>
  static void apply(const greedy_mass& stage, Context& context) {
    const auto mass = context.mass(stage.gate);
    std::int32_t* order = context.scratch_experts();
    const int needed = stage.add >= 0    ? stage.add
                       : stage.size >= 0 ? stage.size - context.selected.size()
                                         : max_experts;
    const int available = cpu::detail::rank_unselected_by_mass(mass, context.selected, order, needed);
    if (stage.add >= 0) {
      for (int i = 0; i < std::min(stage.add, available); ++i) context.selected.insert(order[i]);
    } else if (stage.size >= 0) {
      int size = context.selected.size();
      for (int i = 0; i < available && size < stage.size; ++i, ++size) context.selected.insert(order[i]);
    } else {
      std::int64_t total = 0, held = 0;
      for (int e = 0; e < context.experts(); ++e) {
        total += mass[static_cast<std::size_t>(e)];
        if (context.selected.contains(e)) held += mass[static_cast<std::size_t>(e)];
      }
      const double target = static_cast<double>(stage.mass) * static_cast<double>(total);
      for (int i = 0; i < available && static_cast<double>(held) < target; ++i) {
        context.selected.insert(order[i]);
        held += mass[static_cast<std::size_t>(order[i])];
      }
    }
  }
};

}  // namespace moe_routing

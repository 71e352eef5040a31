#pragma once
/// \file
/// `vote_drop` on the CPU: drops the d unguaranteed members of S that come first in
/// `vote_drop::drops_before`, always leaving one expert.

#include <algorithm>
#include <cstdint>

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, vote_drop> {
  template <class Context>
  static void apply(const vote_drop& stage, Context& context) {
    const auto votes = context.votes();
    const auto mass = context.mass(stage.gate);
    std::int32_t* order = context.scratch_experts();
    int count = 0;
    context.selected.for_each([&](int e) {
      if (!context.guaranteed.contains(e)) order[count++] = e;
    });
    std::sort(order, order + count,
              [&](std::int32_t a, std::int32_t b) { return vote_drop::drops_before(votes.data(), mass.data(), a, b); });
    int size = context.selected.size();
    for (int i = 0; i < std::min(stage.d, count) && size > 1; ++i, --size) {
      context.selected.erase(order[i]);
    }
  }
};

}  // namespace moe_routing

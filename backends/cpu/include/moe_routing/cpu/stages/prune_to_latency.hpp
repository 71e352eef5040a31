#pragma once
/// \file
/// `prune_to_latency` on the CPU: `prune_to_budget`'s search with the latency model as
/// the fit (`cpu/stages/prune_to_budget.hpp`).

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/stages/prune_to_budget.hpp"
#include "moe_routing/policies/prune_to_latency.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, prune_to_latency> {
  template <class Context>
  static void apply(const prune_to_latency& stage, Context& context) {
    cpu::detail::guarantee_deepest_fitting(stage, context);
  }
};

}  // namespace moe_routing

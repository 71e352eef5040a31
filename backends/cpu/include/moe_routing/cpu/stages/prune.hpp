#pragma once
/// \file
/// `prune` on the CPU: each valid token's baseline b_i (`prune::baseline_size`) is
/// guaranteed and joins S.

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/prune.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, prune> {
  template <class Context>
  static void apply(const prune& stage, Context& context) {
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      context.guarantee(
          token, stage.baseline_size(context.top_probabilities(token).data(), context.stats(token).candidate_total));
    }
  }
};

}  // namespace moe_routing

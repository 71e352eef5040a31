#pragma once
/// \file
/// `topk_union` on the CPU: every valid token's top-k joins S.

#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/topk_union.hpp"

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, topk_union> {
  template <class Context>
  static void apply(const topk_union& stage, Context& context) {
    const int k = stage.effective_k(context.top_k());
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      const auto top = context.top_experts(token);
      for (int j = 0; j < k; ++j) context.selected.insert(top[static_cast<std::size_t>(j)]);
    }
  }
};

}  // namespace moe_routing

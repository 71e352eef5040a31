#pragma once
/// \file
/// The largest problem a backend's workspace is sized for, once, before routing.

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/status.hpp"

namespace moe_routing {

struct workspace_shape {
  int max_tokens = 0;  ///< largest n
  int experts = 0;     ///< largest E
  int top_k = 0;       ///< largest plan width k
};

/// Whether `shape` is a workspace that can exist: sizes in the library's ranges (checked
/// before anything is allocated for them).
constexpr status validate_workspace_shape(const workspace_shape& shape) noexcept {
  constexpr auto bad = errc::invalid_parameter;
  MOE_ROUTING_TRY(check_range(bad, "workspace.max_tokens", shape.max_tokens, 0, max_tokens,
                              "must be in [0, max_tokens]", "max_tokens"));
  MOE_ROUTING_TRY(check_range(bad, "workspace.experts", shape.experts, 2, max_experts, "must be in [2, max_experts]",
                              "max_experts"));
  return check_range(bad, "workspace.top_k", shape.top_k, 1, max_top_k, "must be in [1, max_top_k]", "max_top_k");
}

/// Whether a workspace of `shape` serves a call of n tokens, E experts and plan width k.
constexpr status check_workspace_shape(const workspace_shape& shape, int tokens, int experts, int top_k) noexcept {
  if (shape.experts < experts) {
    return fail(errc::workspace_too_small, "workspace.experts", shape.experts, "must be at least", "batch.E", experts);
  }
  if (shape.max_tokens < tokens) {
    return fail(errc::workspace_too_small, "workspace.max_tokens", shape.max_tokens, "must be at least", "batch.n",
                tokens);
  }
  if (shape.top_k < top_k) {
    return fail(errc::workspace_too_small, "workspace.top_k", shape.top_k, "must be at least", "plan.top_k", top_k);
  }
  return {};
}

}  // namespace moe_routing

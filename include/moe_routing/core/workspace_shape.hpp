#pragma once
/// \file
/// The largest problem a backend's workspace is sized for, once, before routing.

#include "moe_routing/core/status.hpp"

namespace moe_routing {

struct workspace_shape {
  int max_tokens = 0;  ///< largest n
  int experts = 0;     ///< largest E
  int top_k = 0;       ///< largest plan width k
};

/// Whether a workspace of `shape` serves a call of n tokens, E experts and plan width k.
constexpr status check_workspace_shape(const workspace_shape& shape, int tokens, int experts, int top_k) noexcept {
  if (shape.experts < experts) {
    return fail(errc::workspace_too_small, "workspace.experts", shape.experts, "must be at least", "batch.E", experts);
  }
  if (shape.max_tokens < tokens) {
    return fail(errc::workspace_too_small, "workspace.max_tokens", shape.max_tokens, "must be at least", "batch.n", tokens);
  }
  if (shape.top_k < top_k) {
    return fail(errc::workspace_too_small, "workspace.top_k", shape.top_k, "must be at least", "plan.top_k", top_k);
  }
  return {};
}

}  // namespace moe_routing

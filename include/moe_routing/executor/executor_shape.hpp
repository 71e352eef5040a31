#pragma once
/// \file
/// The largest problem an executor workspace serves (CPU and CUDA executors), and the
/// checks of an executor call that both backends run on the host before any work.

#include <algorithm>

#include "moe_routing/core/status.hpp"
#include "moe_routing/executor/expert_weights.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing {

struct executor_shape {
  int max_tokens = 0;
  int top_k = 0;
  int experts = 0;
  int hidden = 0;               ///< d
  int intermediate = 0;         ///< h
  int shared_experts = 0;
  int shared_intermediate = 0;  ///< 0 = h
  /// bfloat16 weights only: round x and the SwiGLU activations to bfloat16 before they are
  /// multiplied (bf16 x bf16 products, float32 sums, as engines compute). false keeps them
  /// float32: more exact, and never on AMX tiles. The CUDA executor always rounds (its
  /// cuBLAS GEMMs take both operands in the weight type).
  bool bf16_activations = true;
};

/// The weights view, the call's pointers and shapes, and the workspace's fit. Reads no
/// array beyond the weights' pointer tables, so it checks device buffers too.
template <score_element Weight>
status check_executor_call(const float* x, int n, const plan_view& plan, const expert_weights<Weight>& w, const float* y,
                           const executor_shape& shape) noexcept {
  MOE_ROUTING_TRY(validate_weights(w));
  if (plan.tokens != n) return fail(errc::shape_mismatch, "plan.tokens", plan.tokens, "must equal", "n", n);
  if (n > 0 && (x == nullptr || y == nullptr)) return fail(errc::null_pointer, "x/y", 0, "must not be null when", "n", n);
  if (n > 0 && (plan.ids == nullptr || plan.weights == nullptr || plan.counts == nullptr)) {
    return fail(errc::null_pointer, "plan.ids/weights/counts", 0, "must not be null when", "n", n);
  }
  if (shape.max_tokens < n || shape.top_k < plan.top_k || shape.experts < w.experts || shape.hidden != w.hidden ||
      shape.intermediate < w.intermediate || shape.shared_experts < w.shared_experts ||
      std::max(shape.intermediate, shape.shared_intermediate) < std::max(w.intermediate, w.shared_intermediate)) {
    return fail(errc::workspace_too_small, "executor_workspace", 0,
                "was sized for fewer tokens, a smaller k, fewer or narrower experts, or another hidden size d; hidden", "d",
                w.hidden);
  }
  return {};
}

}  // namespace moe_routing

#pragma once
/// \file
/// The largest problem an executor workspace serves (CPU and CUDA executors), and the
/// checks of an executor call that both backends run on the host before any work.

#include <algorithm>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/status.hpp"
#include "moe_routing/executor/expert_weights.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing {

struct executor_shape {
  int max_tokens = 0;
  int top_k = 0;
  int experts = 0;
  int hidden = 0;        ///< d
  int intermediate = 0;  ///< h
  int shared_experts = 0;
  int shared_intermediate = 0;  ///< 0 = h
  /// bfloat16 weights only: round x and the SwiGLU activations to bfloat16 before they are
  /// multiplied (bf16 x bf16 products, float32 sums, as engines compute). false keeps them
  /// float32: more exact, and never on AMX tiles. The CUDA executor always rounds (its
  /// cuBLAS GEMMs take both operands in the weight type).
  bool bf16_activations = true;
};

/// Widest hidden or intermediate size an executor workspace is sized for (a model's are
/// at most a few tens of thousands).
inline constexpr int max_executor_width = 1 << 20;

/// Whether `shape` is an executor workspace that can exist: every size in range, checked
/// before anything is allocated for it.
constexpr status validate_executor_shape(const executor_shape& shape) noexcept {
  constexpr auto bad = errc::invalid_parameter;
  constexpr int width = max_executor_width;
  MOE_ROUTING_TRY(check_range(bad, "executor_shape.max_tokens", shape.max_tokens, 0, max_tokens,
                              "must be in [0, max_tokens]", "max_tokens"));
  MOE_ROUTING_TRY(
      check_range(bad, "executor_shape.top_k", shape.top_k, 1, max_top_k, "must be in [1, max_top_k]", "max_top_k"));
  MOE_ROUTING_TRY(check_range(bad, "executor_shape.experts", shape.experts, 1, max_experts,
                              "must be in [1, max_experts]", "max_experts"));
  MOE_ROUTING_TRY(check_range(bad, "executor_shape.shared_experts", shape.shared_experts, 0, max_experts,
                              "must be in [0, max_experts]", "max_experts"));
  MOE_ROUTING_TRY(check_range(bad, "executor_shape.hidden", shape.hidden, 1, width,
                              "must be in [1, max_executor_width]", "max_executor_width"));
  MOE_ROUTING_TRY(check_range(bad, "executor_shape.intermediate", shape.intermediate, 1, width,
                              "must be in [1, max_executor_width]", "max_executor_width"));
  return check_range(bad, "executor_shape.shared_intermediate", shape.shared_intermediate, 0, width,
                     "must be in [0, max_executor_width]", "max_executor_width");
}

/// Whether an executor workspace of `shape` serves weights `w` at n tokens and plan width
/// k, naming the first size that does not fit.
template <score_element Weight>
constexpr status check_executor_workspace(const executor_shape& shape, int n, int top_k,
                                          const expert_weights<Weight>& w) noexcept {
  constexpr auto too_small = errc::workspace_too_small;
  if (shape.max_tokens < n)
    return fail(too_small, "executor_shape.max_tokens", shape.max_tokens, "must be at least", "n", n);
  if (shape.top_k < top_k)
    return fail(too_small, "executor_shape.top_k", shape.top_k, "must be at least", "plan.top_k", top_k);
  if (shape.experts < w.experts) {
    return fail(too_small, "executor_shape.experts", shape.experts, "must be at least", "weights.experts", w.experts);
  }
  if (shape.hidden != w.hidden)
    return fail(too_small, "executor_shape.hidden", shape.hidden, "must equal", "weights.hidden", w.hidden);
  if (shape.intermediate < w.intermediate) {
    return fail(too_small, "executor_shape.intermediate", shape.intermediate, "must be at least",
                "weights.intermediate", w.intermediate);
  }
  if (shape.shared_experts < w.shared_experts) {
    return fail(too_small, "executor_shape.shared_experts", shape.shared_experts, "must be at least",
                "weights.shared_experts", w.shared_experts);
  }
  if (std::max(shape.intermediate, shape.shared_intermediate) < widest_intermediate(w)) {  // only shared ones are wider
    return fail(too_small, "executor_shape.shared_intermediate", shape.shared_intermediate, "must be at least",
                "weights.shared_intermediate", w.shared_intermediate);
  }
  return {};
}

/// The weights view, the call's pointers and shapes, and the workspace's fit. Reads no
/// array beyond the weights' pointer tables, so it checks device buffers too.
template <score_element Weight>
status check_executor_call(const float* x, int n, const plan_view& plan, const expert_weights<Weight>& w,
                           const float* y, const executor_shape& shape) noexcept {
  MOE_ROUTING_TRY(validate_weights(w));
  if (n < 0 || n > max_tokens)
    return fail(errc::shape_mismatch, "n", n, "must be in [0, max_tokens]", "max_tokens", max_tokens);
  if (plan.tokens != n) return fail(errc::shape_mismatch, "plan.tokens", plan.tokens, "must equal", "n", n);
  if (plan.top_k < 1 || plan.top_k > max_top_k) {
    return fail(errc::invalid_parameter, "plan.top_k", plan.top_k, "must be in [1, max_top_k]", "max_top_k", max_top_k);
  }
  if (n > 0 && (x == nullptr || y == nullptr))
    return fail(errc::null_pointer, "x/y", 0, "must not be null when", "n", n);
  if (n > 0 && (plan.ids == nullptr || plan.weights == nullptr || plan.counts == nullptr)) {
    return fail(errc::null_pointer, "plan.ids/weights/counts", 0, "must not be null when", "n", n);
  }
  return check_executor_workspace(shape, n, plan.top_k, w);
}

}  // namespace moe_routing

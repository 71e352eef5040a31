#pragma once
/// \file
/// CPU routing entry points.
///
/// `route(policy, batch, plan, workspace, exec)` checks its inputs, routes one batch
/// and returns a status; it never throws for bad input and never allocates (the
/// workspace is sized beforehand). `exec` is a standard execution policy; with `par`
/// or `par_unseq` the token passes run on TBB threads. The plan is the same bit for bit
/// for every execution policy and thread count.
///
/// \code
///   auto policy = moe_routing::presets::oea(/*k0=*/4, /*k=*/8);
///   moe_routing::cpu::workspace ws({.max_tokens = 16, .experts = 128, .top_k = 8});
///   moe_routing::routing_plan plan(16, 8, 128);
///   auto status = moe_routing::cpu::route(policy, batch, plan.view(), ws, std::execution::par);
/// \endcode

#include <execution>
#include <type_traits>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/cpu/assign_tokens.hpp"
#include "moe_routing/cpu/route_context.hpp"
#include "moe_routing/cpu/set_stage_executors.hpp"
#include "moe_routing/cpu/workspace.hpp"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/scoring_needs.hpp"

namespace moe_routing::cpu {

namespace detail {

template <routing_policy Policy>
constexpr refine assignment_of(const Policy& policy) {
  refine result{};
  policy.for_each_stage([&](const auto& stage) {
    using stage_type = std::remove_cvref_t<decltype(stage)>;
    if constexpr (assignment_stage<stage_type>) {
      static_assert(std::is_same_v<stage_type, refine>,
                    "The CPU backend implements the refine assignment stage only; a custom "
                    "assignment stage needs its own stage_executor<cpu_backend, Stage>.");
      result = stage;
    }
  });
  return result;
}

/// Checks of the per-call data that do not depend on the policy.
template <score_element Element>
status check_call(const routing_batch<Element>& batch, const plan_view& plan, const workspace& ws) {
  MOE_ROUTING_TRY(validate_batch(batch));
  MOE_ROUTING_TRY(validate_plan(plan, batch));
  return check_workspace_shape(ws.shape(), batch.tokens(), batch.experts(), plan.top_k);
}

/// Routes a batch whose policy binding and call data were already checked.
template <routing_policy Policy, score_element Element, class ExecutionPolicy>
status route_checked(const Policy& policy, const routing_batch<Element>& batch,
                     const plan_view& plan, workspace& ws, ExecutionPolicy exec) {
  route_context<Element, ExecutionPolicy> context(batch, plan.top_k, ws, exec);
  context.score_tokens(scoring_needs_of(policy));
  refine assignment = assignment_of(policy);
  if (batch.step == phase::prefill && has_decode_only_stage(policy)) {
    // Decode-only policies route exactly like vanilla top-k in prefill.
    stage_executor<cpu_backend, topk_union>::apply(topk_union{}, context);
    assignment.k = 0;
    assignment.max_rank = max_experts;
  } else {
    policy.for_each_stage([&](const auto& stage) {
      using stage_type = std::remove_cvref_t<decltype(stage)>;
      if constexpr (set_stage<stage_type>) stage_executor<cpu_backend, stage_type>::apply(stage, context);
    });
  }
  if (context.selected.empty()) {  // built-in stages never empty S (checked when built); user stages may
    for (int token = 0; token < batch.tokens(); ++token) {
      if (batch.is_valid(token)) {
        return fail(errc::invalid_parameter, "selected set size", 0,
                    "must not be 0 while valid tokens exist: a custom set stage emptied S");
      }
    }
  }
  return assign_tokens(assignment, context, plan);
}

}  // namespace detail

/// Routes one batch. Checks the batch, the plan, the workspace and the policy's
/// binding to this shape first (O(E + R + stages)); never throws for bad input.
template <routing_policy Policy, score_element Element,
          class ExecutionPolicy = std::execution::sequenced_policy>
  requires std::is_execution_policy_v<std::remove_cvref_t<ExecutionPolicy>>
[[nodiscard]] status route(const Policy& policy, const routing_batch<Element>& batch,
                           const plan_view& plan, workspace& ws, ExecutionPolicy&& exec = {}) {
  MOE_ROUTING_TRY(detail::check_call(batch, plan, ws));
  MOE_ROUTING_TRY(bind_policy(policy, binding_shape{batch.experts(), plan.top_k, batch.placement != nullptr}));
  return detail::route_checked(policy, batch, plan, ws, exec);
}

/// Routes one batch on this thread's own workspace, which grows to the largest batch the
/// thread has routed and is then reused: after the first call of a shape, no allocation.
/// Prefer the overload taking a workspace where the caller manages memory.
template <routing_policy Policy, score_element Element,
          class ExecutionPolicy = std::execution::sequenced_policy>
  requires std::is_execution_policy_v<std::remove_cvref_t<ExecutionPolicy>>
[[nodiscard]] status route(const Policy& policy, const routing_batch<Element>& batch,
                           const plan_view& plan, ExecutionPolicy&& exec = {}) {
  thread_local workspace own;
  const workspace_shape& have = own.shape();
  if (batch.tokens() > have.max_tokens || batch.experts() > have.experts || plan.top_k > have.top_k) {
    if (batch.experts() < 2 || batch.experts() > max_experts || plan.top_k < 1 || plan.top_k > max_top_k ||
        batch.tokens() < 0 || batch.tokens() > max_tokens) {
      return detail::check_call(batch, plan, own);  // reports the bad shape without allocating for it
    }
    own.reserve({std::max(batch.tokens(), have.max_tokens), std::max(batch.experts(), have.experts),
                 std::max(plan.top_k, have.top_k)});
  }
  return route(policy, batch, plan, own, exec);
}

/// A policy bound once to a shape, with its own workspace: the convenience layer.
/// The constructor throws `routing_error` naming the bad parameter; `route` then only
/// checks the per-call data (batch, plan) and throws on failure. A batch of another
/// expert count, plan width or placement re-binds the policy to it first (and is refused
/// when the policy does not fit it, e.g. k > E); the workspace must still be large enough.
template <routing_policy Policy>
class router {
 public:
  router(const Policy& policy, workspace_shape shape, bool has_placement = false)
      : policy_(policy), bound_(bound_or_throw(policy, {shape.experts, shape.top_k, has_placement})), workspace_(shape) {}

  template <score_element Element, class ExecutionPolicy = std::execution::sequenced_policy>
  void route(const routing_batch<Element>& batch, const plan_view& plan, ExecutionPolicy&& exec = {}) {
    throw_if_failed(detail::check_call(batch, plan, workspace_));
    const binding_shape wanted{batch.experts(), plan.top_k, batch.placement != nullptr};
    if (wanted.experts != bound_.experts || wanted.top_k != bound_.top_k || wanted.has_placement != bound_.has_placement) {
      throw_if_failed(bind_policy(policy_, wanted));
      bound_ = wanted;
    }
    throw_if_failed(detail::route_checked(policy_, batch, plan, workspace_, exec));
  }

  /// Routes into a plan the router owns and returns it. The plan follows the batch's
  /// token, expert and device counts.
  template <score_element Element, class ExecutionPolicy = std::execution::sequenced_policy>
  const routing_plan& route(const routing_batch<Element>& batch, padding pad = {}, ExecutionPolicy&& exec = {}) {
    const int devices = batch.placement != nullptr ? batch.device_count : 0;
    if (owned_.tokens() != batch.tokens() || owned_.top_k() != workspace_.shape().top_k ||
        owned_.experts() != batch.experts() || owned_.devices() != devices || owned_.pad().kind != pad.kind ||
        owned_.pad().sentinel_value != pad.sentinel_value) {
      throw_if_failed(validate_batch_shape(batch));  // sizes the plan only from a batch that can be routed
      owned_ = routing_plan(batch.tokens(), workspace_.shape().top_k, batch.experts(), devices, pad);
    }
    route(batch, owned_.view(), exec);
    return owned_;
  }

  const Policy& policy() const noexcept { return policy_; }

 private:
  static binding_shape bound_or_throw(const Policy& policy, binding_shape shape) {
    throw_if_failed(bind_policy(policy, shape));
    return shape;
  }

  Policy policy_;
  binding_shape bound_;
  workspace workspace_;
  routing_plan owned_;
};

}  // namespace moe_routing::cpu

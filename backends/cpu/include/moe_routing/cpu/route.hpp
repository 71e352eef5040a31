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
///   moe_routing::routing_plan plan({.tokens = 16, .experts = 128, .top_k = 8});
///   auto status = moe_routing::cpu::route(policy, batch, plan.view(), ws, std::execution::par);
/// \endcode

#include <execution>
#include <type_traits>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/error.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/score_pass.hpp"
#include "moe_routing/cpu/stage_context.hpp"
#include "moe_routing/cpu/stages/confidence_keep.hpp"
#include "moe_routing/cpu/stages/coverage_greedy.hpp"
#include "moe_routing/cpu/stages/ep_fill.hpp"
#include "moe_routing/cpu/stages/ep_level.hpp"
#include "moe_routing/cpu/stages/greedy_mass.hpp"
#include "moe_routing/cpu/stages/per_request.hpp"
#include "moe_routing/cpu/stages/prune.hpp"
#include "moe_routing/cpu/stages/prune_to_budget.hpp"
#include "moe_routing/cpu/stages/prune_to_latency.hpp"
#include "moe_routing/cpu/stages/refine.hpp"
#include "moe_routing/cpu/stages/topk_union.hpp"
#include "moe_routing/cpu/stages/user_stage.hpp"
#include "moe_routing/cpu/stages/vote_drop.hpp"
#include "moe_routing/cpu/workspace.hpp"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/scoring_needs.hpp"

namespace moe_routing::cpu {

namespace detail {

/// Checks of the per-call data that do not depend on the policy.
template <score_element Element>
status check_call(const routing_batch<Element>& batch, const plan_view& plan, const workspace& ws) {
  MOE_ROUTING_TRY(validate_batch(batch));
  MOE_ROUTING_TRY(validate_plan(plan, batch));
  return check_workspace_shape(ws.shape(), batch.tokens(), batch.experts(), plan.top_k);
}

/// Routes a batch whose policy binding and call data were already checked: the scoring
/// pass, the set stages in order (vanilla top-k in prefill for a decode-only policy), then
/// the assignment stage, each through its `stage_executor<cpu_backend, Stage>`.
template <routing_policy Policy, score_element Element, class ExecutionPolicy>
status route_checked(const Policy& policy, const routing_batch<Element>& batch, const plan_view& plan, workspace& ws,
                     ExecutionPolicy exec) {
  stage_context<Element, ExecutionPolicy> context(batch, plan.top_k, ws, exec);
  static_assert(set_stage_context<decltype(context)>);
  score_tokens(context, ws, scoring_needs_of(policy));
  auto assignment = assignment_of(policy);
  if (routes_as_vanilla(policy, batch.step)) {
    stage_executor<cpu_backend, topk_union>::apply(topk_union{}, context);
    if constexpr (std::is_same_v<decltype(assignment), refine>) assignment = vanilla_assignment(assignment);
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
  return stage_executor<cpu_backend, decltype(assignment)>::apply(assignment, context, plan);
}

}  // namespace detail

/// Routes one batch. Checks the batch, the plan, the workspace and the policy's
/// binding to this shape first (O(E + R + stages)); never throws for bad input.
template <routing_policy Policy, score_element Element, class ExecutionPolicy = std::execution::sequenced_policy>
requires std::is_execution_policy_v<std::remove_cvref_t<ExecutionPolicy>>
[[nodiscard]] status route(const Policy& policy, const routing_batch<Element>& batch, const plan_view& plan,
                           workspace& ws, ExecutionPolicy&& exec = {}) {
  MOE_ROUTING_TRY(detail::check_call(batch, plan, ws));
  MOE_ROUTING_TRY(bind_policy(
      policy, binding_shape{batch.experts(), plan.top_k, batch.placement != nullptr, batch.groups.enabled()}));
  return detail::route_checked(policy, batch, plan, ws, exec);
}

/// Routes one batch on this thread's own workspace, which grows to the largest batch the
/// thread has routed and is then reused: after the first call of a shape, no allocation.
/// Prefer the overload taking a workspace where the caller manages memory.
template <routing_policy Policy, score_element Element, class ExecutionPolicy = std::execution::sequenced_policy>
requires std::is_execution_policy_v<std::remove_cvref_t<ExecutionPolicy>>
[[nodiscard]] status route(const Policy& policy, const routing_batch<Element>& batch, const plan_view& plan,
                           ExecutionPolicy&& exec = {}) {
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

// Read this if your compile breaks here: the first argument is not a policy that can be
// routed, and the static_assert in explain_unroutable_policy (policy_checks.hpp) says why.
template <class Policy, class... Arguments>
requires(!routing_policy<Policy>) status route(const Policy&, Arguments&&...) {
  explain_unroutable_policy<Policy>();
  return {};
}

}  // namespace moe_routing::cpu

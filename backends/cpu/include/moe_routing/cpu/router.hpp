#pragma once
/// \file
/// `cpu::router`: a policy bound once to a shape, with its own workspace and plan.

#include <execution>
#include <type_traits>

#include "moe_routing/core/error.hpp"
#include "moe_routing/cpu/route.hpp"

namespace moe_routing::cpu {

/// A policy bound once to a shape, with its own workspace: the convenience layer.
/// The constructor throws `routing_error` naming the bad parameter; `route` then only
/// checks the per-call data (batch, plan) and throws on failure. A batch of another
/// expert count, plan width or placement re-binds the policy to it first (and is refused
/// when the policy does not fit it, e.g. k > E); the workspace must still be large enough.
template <routing_policy Policy>
class router {
 public:
  router(const Policy& policy, workspace_shape shape, bool has_placement = false)
      : policy_(policy),
        bound_(bound_or_throw(policy, {shape.experts, shape.top_k, has_placement})),
        workspace_(shape) {}

  template <score_element Element, class ExecutionPolicy = std::execution::sequenced_policy>
  void route(const routing_batch<Element>& batch, const plan_view& plan, ExecutionPolicy&& exec = {}) {
    throw_if_failed(detail::check_call(batch, plan, workspace_));
    const binding_shape wanted{batch.experts(), plan.top_k, batch.placement != nullptr, batch.groups.enabled()};
    if (wanted.experts != bound_.experts || wanted.top_k != bound_.top_k ||
        wanted.has_placement != bound_.has_placement || wanted.has_group_limit != bound_.has_group_limit) {
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
      owned_ = routing_plan({.tokens = batch.tokens(),
                             .experts = batch.experts(),
                             .top_k = workspace_.shape().top_k,
                             .devices = devices,
                             .pad = pad});
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

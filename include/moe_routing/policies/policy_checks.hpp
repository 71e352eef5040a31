#pragma once
/// \file
/// The checks every policy form goes through: `validate_policy` when a policy is built
/// (its own parameters and how its stages fit together) and `bind_policy` when it is
/// first bound to a shape (E, the model's top-k, placement). Both are O(stages).

#include <concepts>
#include <limits>
#include <type_traits>

#include "moe_routing/policies/runtime_policy.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

/// Anything a backend can route: a compiled pipeline or the runtime form.
template <class Policy>
concept routing_policy = compiled_policy<Policy> || std::same_as<std::remove_cvref_t<Policy>, runtime_policy>;

/// Does not compile, with the sentence that says why `Policy` cannot be routed. A backend's
/// `route` calls it from the overload that takes what `routing_policy` refuses.
template <class Policy>
constexpr void explain_unroutable_policy() {
  if constexpr (std::is_same_v<Policy, rejected_policy>) {
    // `|` has already said what is wrong with one of its stages.
  } else if constexpr (routing_stage<Policy>) {
    static_assert(detail::reported<Policy>,
                  "route takes a policy, not a single stage: compose set stages and refine with |, e.g. "
                  "moe_routing::prune{.k0 = 2} | moe_routing::refine{.k = 8}.");
  } else if constexpr (!is_pipeline<Policy>) {
    static_assert(detail::reported<Policy>,
                  "route takes a policy: stages composed with | (a pipeline) or a runtime_policy "
                  "(parse_policy, presets).");
  } else if constexpr (Policy::set_stage_count == 0) {
    static_assert(detail::reported<Policy>,
                  "A policy needs a set stage before refine to build the selected set S, e.g. "
                  "moe_routing::prune{.k0 = 2} | moe_routing::refine{.k = 8}.");
  } else if constexpr (Policy::assignment_stage_count == 0) {
    static_assert(detail::reported<Policy>,
                  "A policy must end with its assignment stage, refine, e.g. "
                  "moe_routing::prune{.k0 = 2} | moe_routing::refine{.k = 8}.");
  } else {
    static_assert(detail::reported<Policy>, "refine must be a policy's last stage and its only assignment stage.");
  }
}

template <class Stage>
constexpr const char* stage_name() noexcept {
  if constexpr (requires {
                  { Stage::name } -> std::convertible_to<const char*>;
                }) {
    return Stage::name;
  } else {
    return "custom stage";
  }
}

/// The parameter that names a stage's guarantee in messages ("prune.k0"), else its name.
template <class Stage>
constexpr const char* guarantee_parameter_of() noexcept {
  if constexpr (requires {
                  { Stage::guarantee_parameter } -> std::convertible_to<const char*>;
                }) {
    return Stage::guarantee_parameter;
  } else {
    return stage_name<Stage>();
  }
}

/// Checks a policy independently of any shape. Called by the factories, the parser
/// and `bind_policy`; O(stages).
template <routing_policy Policy>
constexpr status validate_policy(const Policy& policy) noexcept {
  constexpr double no_value = std::numeric_limits<double>::quiet_NaN();
  status result{};
  bool first_set_stage = true;
  int depth = 0;  // leading ranks guaranteed so far
  const char* depth_parameter = "k0";
  policy.for_each_stage([&](const auto& stage) {
    using stage_type = std::remove_cvref_t<decltype(stage)>;
    if (!result.ok()) return;
    result = validate_stage(stage);
    if (!result.ok()) return;
    if constexpr (set_stage<stage_type>) {
      if (first_set_stage && !seeds_selection(stage)) {
        result = fail(errc::invalid_parameter, stage_name<stage_type>(), no_value,
                      "cannot open a policy: on an empty S it may add nothing (start with "
                      "topk_union, prune, per_request or confidence_keep)");
        return;
      }
      if (effect_on_selection<stage_type>() == set_effect::replaces && depth > 0) {
        result = fail(errc::invalid_parameter, stage_name<stage_type>(), no_value,
                      "replaces S, so it would drop the experts guaranteed by an earlier "
                      "stage with",
                      "k0", depth);
        return;
      }
      first_set_stage = false;
      if (guaranteed_depth(stage) > depth) {
        depth = guaranteed_depth(stage);
        depth_parameter = guarantee_parameter_of<stage_type>();
      }
    }
    if constexpr (std::is_same_v<stage_type, refine>) {
      if (stage.k != 0 && stage.k < depth) {
        result = fail(errc::invalid_parameter, depth_parameter, depth,
                      "must be at most the experts each token is assigned,", "refine.k", stage.k);
      } else if (stage.max_rank < depth) {
        result = fail(errc::invalid_parameter, "refine.max_rank", stage.max_rank,
                      "must reach every guaranteed expert: at least", depth_parameter, depth);
      }
    }
  });
  return result;
}

/// The leading ranks of each token that the policy guarantees (largest k0).
template <routing_policy Policy>
constexpr int policy_guaranteed_depth(const Policy& policy) noexcept {
  int depth = 0;
  policy.for_each_stage([&](const auto& stage) {
    if (guaranteed_depth(stage) > depth) depth = guaranteed_depth(stage);
  });
  return depth;
}

/// True when some stage is decode-only: in prefill the policy routes as vanilla top-k.
template <routing_policy Policy>
constexpr bool has_decode_only_stage(const Policy& policy) noexcept {
  bool any = false;
  policy.for_each_stage(
      [&](const auto& stage) { any = any || is_decode_only<std::remove_cvref_t<decltype(stage)>>(); });
  return any;
}

namespace detail {
template <class Policy>
struct assignment_type {
  using type = refine;  // the runtime form's
};
template <class... Stages>
struct assignment_type<pipeline<Stages...>> {
  using type = typename decltype((std::type_identity<Stages>{}, ...))::type;  // the last stage
};
}  // namespace detail

/// The policy's assignment stage (a compiled pipeline's is its last).
template <routing_policy Policy>
constexpr auto assignment_of(const Policy& policy) {
  using assignment = typename detail::assignment_type<std::remove_cvref_t<Policy>>::type;
  assignment result{};
  policy.for_each_stage([&](const auto& stage) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(stage)>, assignment>) result = stage;
  });
  return result;
}

/// SPEC section 1: in prefill a policy with a decode-only stage routes exactly like
/// vanilla top-k, as `topk_union | refine` with the policy's weighting. Both backends ask this.
template <routing_policy Policy>
constexpr bool routes_as_vanilla(const Policy& policy, phase step) noexcept {
  return step == phase::prefill && has_decode_only_stage(policy);
}
/// The assignment of that vanilla routing: the model's top-k, every rank, the same weighting.
constexpr refine vanilla_assignment(refine assignment) noexcept {
  assignment.k = 0;
  assignment.max_rank = max_experts;
  assignment.capacity = refine::no_capacity;  // exactly vanilla: no capacity re-routing either
  return assignment;
}

/// The plan width to use when the caller does not give one: the policy's top_k hint,
/// else the largest k among its stages.
template <routing_policy Policy>
constexpr int preferred_top_k(const Policy& policy) noexcept {
  if (policy.top_k > 0) return policy.top_k;
  int k = 0;
  policy.for_each_stage([&](const auto& stage) {
    if (widest_parameter(stage) > k) k = widest_parameter(stage);
  });
  return k;
}

/// Guarantees whose depth follows the model's top-k (a stage's `guaranteed_depth_at(top_k)`:
/// the budget stages choose k0 per batch, up to their k, 0 meaning the model's top-k) against
/// refine, once that top-k is known: refine must be able to assign every guaranteed rank.
template <routing_policy Policy>
constexpr status check_guarantees_at_top_k(const Policy& policy, int top_k) noexcept {
  int depth = 0;
  const char* depth_parameter = "k";
  policy.for_each_stage([&](const auto& stage) {
    if constexpr (requires {
                    { stage.guaranteed_depth_at(top_k) } -> std::convertible_to<int>;
                  }) {
      if (stage.guaranteed_depth_at(top_k) > depth) {
        depth = stage.guaranteed_depth_at(top_k);
        depth_parameter = guarantee_parameter_of<std::remove_cvref_t<decltype(stage)>>();
      }
    }
  });
  status result{};
  policy.for_each_stage([&](const auto& stage) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(stage)>, refine>) {
      if (depth > 0 && stage.effective_k(top_k) < depth) {
        result =
            fail(errc::invalid_parameter, "refine.k", stage.effective_k(top_k),
                 "must reach the deepest guarantee (a k of 0 there is the model's top-k),", depth_parameter, depth);
      } else if (depth > 0 && stage.max_rank < depth) {
        result = fail(errc::invalid_parameter, "refine.max_rank", stage.max_rank,
                      "must reach every guaranteed expert: at least", depth_parameter, depth);
      }
    }
  });
  return result;
}

/// Checks a policy against a shape: validate_policy plus every stage's shape check.
template <routing_policy Policy>
constexpr status bind_policy(const Policy& policy, const binding_shape& shape) noexcept {
  if (shape.experts < 2 || shape.experts > max_experts) {
    return fail(errc::shape_mismatch, "E", shape.experts, "must be in [2, max_experts]", "max_experts", max_experts);
  }
  if (shape.top_k < 1 || shape.top_k > max_top_k) {
    return fail(errc::invalid_parameter, "top_k", shape.top_k, "must be in [1, max_top_k]", "max_top_k", max_top_k);
  }
  if (shape.top_k > shape.experts) {
    return fail(errc::invalid_parameter, "k", shape.top_k, "must be at most the expert count", "E", shape.experts);
  }
  MOE_ROUTING_TRY(validate_policy(policy));
  status result{};
  policy.for_each_stage([&](const auto& stage) {
    if (result.ok()) result = bind_stage(stage, shape);
  });
  MOE_ROUTING_TRY(result);
  return check_guarantees_at_top_k(policy, shape.top_k);
}

}  // namespace moe_routing

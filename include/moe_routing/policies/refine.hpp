#pragma once
/// \file
/// `refine(k, max_rank)`: the assignment stage (XShare refinement, OEA piggybacking)
/// and the weighting. A_i = the first k experts of token i's rank order, among ranks
/// < max_rank, that are in S; a token left empty takes its best expert in S.

#include <array>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/scoring_needs.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct refine {
  static constexpr stage_role role = stage_role::assignment;
  static constexpr const char* name = "refine";
  int k = 0;                   ///< experts per token, 1..top_k; 0 means the model's top-k
  int max_rank = max_experts;  ///< piggyback only on ranks below this
  weighting weights = weighting::renormalize;
  float scale = 1.0f;  ///< routed_scaling_factor, finite and > 0
  /// Capacity re-routing (policies/capacity.hpp): at most this many tokens per expert where
  /// S has room; `no_capacity` (no text can spell it) leaves the assignment uncapped.
  static constexpr int no_capacity = std::numeric_limits<int>::min();
  int capacity = no_capacity;

  static constexpr auto parameters() {
    using parameter = stage_parameter<refine>;
    return std::array{
        parameter{.name = "k",
                  .qualified = "refine.k",
                  .integer = &refine::k,
                  .range = non_negative,
                  .counts_experts_per_token = true},
        parameter{
            .name = "max_rank", .qualified = "refine.max_rank", .integer = &refine::max_rank, .range = at_least_one},
        parameter{.name = "weights",
                  .qualified = "refine.weights",
                  .kind = parameter_kind::weighting,
                  .weights = &refine::weights},
        parameter{.name = "scale",
                  .qualified = "refine.scale",
                  .kind = parameter_kind::real,
                  .real = &refine::scale,
                  .range = finite_positive},
        parameter{.name = "capacity",
                  .qualified = "refine.capacity",
                  .integer = &refine::capacity,
                  .optional = true,
                  .range = at_least_one},
    };
  }
  /// Raw weights are p itself, which needs the softmax denominator; so does capacity, which
  /// orders seats by p across tokens.
  constexpr scoring_needs needs() const noexcept {
    return {false, false, weights == weighting::renormalize && !caps_experts()};
  }
  MOE_ROUTING_HOST_DEVICE constexpr bool caps_experts() const noexcept { return capacity != no_capacity; }
  /// Capacity moves a slot to the token's best member of S with room by rank alone: it does
  /// not apply a rank limit or the batch's group limit, so it refuses both rather than
  /// assign an expert the assignment itself could not have chosen.
  constexpr status bind(const binding_shape& shape) const noexcept {
    if (!caps_experts()) return {};
    if (max_rank < shape.experts) {
      return fail(errc::invalid_parameter, "refine.capacity", capacity,
                  "cannot be combined with a rank limit:", "refine.max_rank", max_rank);
    }
    if (shape.has_group_limit) {
      return fail(errc::invalid_parameter, "refine.capacity", capacity,
                  "cannot be combined with a group limit (batch.groups): a moved slot could leave the kept groups");
    }
    return {};
  }
  MOE_ROUTING_HOST_DEVICE constexpr int effective_k(int top_k) const noexcept { return k == 0 ? top_k : k; }
  /// The ranks that count for a row of `experts`: those below max_rank.
  MOE_ROUTING_HOST_DEVICE constexpr int rank_limit(int experts) const noexcept {
    return max_rank < experts ? max_rank : experts;
  }

  /// A_i's members among a token's stored top-k (`top`, `top_p`, `top_k` long, rank
  /// order): the first effective_k of its ranks below max_rank that are in S, into ids and p.
  /// Every backend starts a token here; returns the count.
  template <class InSelection>
  MOE_ROUTING_HOST_DEVICE constexpr int take_from_top_k(const std::int32_t* top, const float* top_p, int top_k,
                                                        int experts, InSelection&& in_selection, std::int32_t* ids,
                                                        float* p) const {
    const int wanted = effective_k(top_k);
    const int stored = rank_limit(experts) < top_k ? rank_limit(experts) : top_k;
    int count = 0;
    for (int j = 0; j < stored && count < wanted; ++j) {
      if (in_selection(top[j])) {
        ids[count] = top[j];
        p[count++] = top_p[j];
      }
    }
    return count;
  }
  /// Whether ranks past the stored top-k can still change A_i once `take_from_top_k` found
  /// `count`: the token is short of effective_k and either has nothing yet or may look
  /// further down its ranks.
  MOE_ROUTING_HOST_DEVICE constexpr bool searches_past_top_k(int count, int top_k, int experts) const noexcept {
    return !(count == effective_k(top_k) || (count > 0 && rank_limit(experts) <= top_k));
  }

  /// The weighting of SPEC section 3: `weights[0..count)` from the p of the assigned
  /// experts. Shared by every backend, so that they round alike.
  MOE_ROUTING_HOST_DEVICE void weigh(const float* p, int count, float* weights_out) const noexcept {
    float sum = 0;
    for (int j = 0; j < count; ++j) {
      weights_out[j] = p[j] < 0.0f ? 0.0f : p[j];  // negative p only from probabilities input
      sum += weights_out[j];
    }
    bool equal = !(sum > 0.0f) || !(sum <= largest_float);
    if (!equal) {
      for (int j = 0; j < count; ++j) {
        weights_out[j] = weights == weighting::renormalize ? weights_out[j] / sum * scale : weights_out[j] * scale;
        equal = equal || !(weights_out[j] <= largest_float);
      }
    }
    if (equal) {
      for (int j = 0; j < count; ++j) weights_out[j] = scale / static_cast<float>(count);
    }
  }
};

template <>
inline constexpr bool is_library_assignment_stage<refine> = true;
static_assert(assignment_stage<refine>);

}  // namespace moe_routing

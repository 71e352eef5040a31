#pragma once
/// \file
/// `refine(k, max_rank)`: the assignment stage (XShare refinement, OEA piggybacking)
/// and the weighting. A_i = the first k experts of token i's rank order, among ranks
/// < max_rank, that are in S; a token left empty takes its best expert in S.

#include "moe_routing/core/config.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

enum class weighting : std::uint8_t {
  renormalize,  ///< w = p / sum of p over A_i (norm_topk_prob)
  raw,          ///< w = p
};

struct refine {
  static constexpr stage_role role = stage_role::assignment;
  static constexpr const char* name = "refine";
  int k = 0;                   ///< experts per token, 1..top_k; 0 means the model's top-k
  int max_rank = max_experts;  ///< piggyback only on ranks below this
  weighting weights = weighting::renormalize;
  float scale = 1.0f;          ///< routed_scaling_factor, finite and > 0

  constexpr status validate() const noexcept {
    if (k < 0) return fail(errc::invalid_parameter, "refine.k", k, "must not be negative");
    if (max_rank < 1) return fail(errc::invalid_parameter, "refine.max_rank", max_rank, "must be at least 1");
    if (!(scale > 0.0f && scale <= 3.0e38f)) {
      return fail(errc::invalid_parameter, "refine.scale", scale, "must be finite and positive");
    }
    return {};
  }
  constexpr status bind(const binding_shape& shape) const noexcept {
    return check_at_most_top_k("refine.k", k, shape);
  }
  MOE_ROUTING_HOST_DEVICE constexpr int effective_k(int top_k) const noexcept { return k == 0 ? top_k : k; }

  /// The weighting of SPEC section 3: `weights[0..count)` from the p of the assigned
  /// experts. Shared by every backend, so that they round alike.
  MOE_ROUTING_HOST_DEVICE void weigh(const float* p, int count, float* weights_out) const noexcept {
    float sum = 0;
    for (int j = 0; j < count; ++j) {
      weights_out[j] = p[j] < 0.0f ? 0.0f : p[j];  // negative p only from probabilities input
      sum += weights_out[j];
    }
    bool equal = !(sum > 0.0f) || !(sum <= 3.4028234e38f);
    if (!equal) {
      for (int j = 0; j < count; ++j) {
        weights_out[j] = weights == weighting::renormalize ? weights_out[j] / sum * scale : weights_out[j] * scale;
        equal = equal || !(weights_out[j] <= 3.4028234e38f);
      }
    }
    if (equal) {
      for (int j = 0; j < count; ++j) weights_out[j] = scale / static_cast<float>(count);
    }
  }
};

static_assert(assignment_stage<refine>);

}  // namespace moe_routing

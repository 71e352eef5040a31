#pragma once
/// \file
/// What a policy's stages read from the scoring pass, worked out from the stage types
/// so that every backend computes only that: the batch's column masses and votes, the
/// dense mass, and whether a softmax row needs its denominator at all.

#include <type_traits>

#include "moe_routing/policies/confidence_keep.hpp"
#include "moe_routing/policies/ep_fill.hpp"
#include "moe_routing/policies/greedy_mass.hpp"
#include "moe_routing/policies/per_request.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/prune.hpp"
#include "moe_routing/policies/refine.hpp"
#include "moe_routing/policies/stage_concepts.hpp"
#include "moe_routing/policies/topk_union.hpp"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing {

struct scoring_needs {
  /// The batch's column masses c[e] and votes v[e] (greedy_mass, ep_fill, vote_drop,
  /// confidence_keep, user stages). topk_union, prune and per_request never read them.
  bool column_mass = false;
  /// c[e] from dense gates (some stage asked for `mass = dense`).
  bool dense_mass = false;
  /// p is read only as ratios within a token's top ranks (renormalised weights, sparse
  /// gates): a softmax row without a bias can be ranked by its logits and only its top-k
  /// exponentiated, relative to the top-1 logit; the denominator cancels. False when
  /// anything reads p beyond that: dense masses, confidence, top-p or skip thresholds, raw
  /// weights, or a user stage.
  bool top_k_only = true;
};

template <routing_policy Policy>
constexpr scoring_needs scoring_needs_of(const Policy& policy) {
  scoring_needs needs;
  policy.for_each_stage([&](const auto& stage) {
    using stage_type = std::remove_cvref_t<decltype(stage)>;
    if constexpr (requires { stage.gate; }) {
      needs.dense_mass = needs.dense_mass || stage.gate == column_mass::dense;
      needs.top_k_only = needs.top_k_only && stage.gate != column_mass::dense;  // sparse gates cancel it
    }
    if constexpr (std::is_same_v<stage_type, topk_union>) {
    } else if constexpr (std::is_same_v<stage_type, prune>) {
      needs.top_k_only = needs.top_k_only && stage.top_p >= 1.0f && stage.skip_ratio <= 0.0f;
    } else if constexpr (std::is_same_v<stage_type, refine>) {
      needs.top_k_only = needs.top_k_only && stage.weights == weighting::renormalize;
    } else if constexpr (std::is_same_v<stage_type, per_request>) {
      // Sums its own per-request masses from the top-k gates.
    } else if constexpr (std::is_same_v<stage_type, greedy_mass> || std::is_same_v<stage_type, ep_fill> ||
                         std::is_same_v<stage_type, vote_drop>) {
      needs.column_mass = true;
    } else {
      // confidence_keep reads the candidate total; user stages may read anything.
      needs.column_mass = true;
      needs.top_k_only = false;
    }
  });
  return needs;
}

}  // namespace moe_routing

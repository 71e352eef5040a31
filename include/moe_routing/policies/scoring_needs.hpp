#pragma once
/// \file
/// What a policy's stages read from the scoring pass, so that every backend computes
/// only that: the batch's column masses and votes, the dense mass, and whether a softmax
/// row needs its denominator at all. Each built-in stage states its own needs in
/// `needs()`; a policy's are the union of its stages'.

#include <type_traits>

#include "moe_routing/policies/stage_concepts.hpp"

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

  /// What both `*this` and `other` need.
  constexpr scoring_needs operator|(const scoring_needs& other) const noexcept {
    return {column_mass || other.column_mass, dense_mass || other.dense_mass, top_k_only && other.top_k_only};
  }
};

/// The needs of a stage that sums a column mass through `gate` (only sparse gates cancel
/// the softmax denominator).
constexpr scoring_needs needs_of_gate(column_mass gate, bool reads_column_mass) noexcept {
  return {reads_column_mass, gate == column_mass::dense, gate != column_mass::dense};
}

/// A stage's needs: its own `needs()`, else everything (a user stage may read anything).
template <class Stage>
constexpr scoring_needs needs_of_stage(const Stage& stage) noexcept {
  if constexpr (requires {
                  { stage.needs() } -> std::same_as<scoring_needs>;
                }) {
    return stage.needs();
  } else if constexpr (requires {
                         { stage.gate } -> std::convertible_to<column_mass>;
                       }) {
    return {true, stage.gate == column_mass::dense, false};
  } else {
    return {true, false, false};
  }
}

/// A policy's needs (a compiled pipeline or the runtime form): the union of its stages'.
template <class Policy>
constexpr scoring_needs scoring_needs_of(const Policy& policy) {
  scoring_needs needs;
  policy.for_each_stage([&](const auto& stage) { needs = needs | needs_of_stage(stage); });
  return needs;
}

}  // namespace moe_routing

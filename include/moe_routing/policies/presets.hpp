#pragma once
/// \file
/// Every preset of SPEC section 5 as a named factory returning a compile-time
/// pipeline. Check a preset built from user input with `validate_policy`.

#include "moe_routing/policies/confidence_keep.hpp"
#include "moe_routing/policies/ep_fill.hpp"
#include "moe_routing/policies/greedy_mass.hpp"
#include "moe_routing/policies/per_request.hpp"
#include "moe_routing/policies/pipeline.hpp"
#include "moe_routing/policies/prune.hpp"
#include "moe_routing/policies/refine.hpp"
#include "moe_routing/policies/topk_union.hpp"
#include "moe_routing/policies/vote_drop.hpp"

namespace moe_routing::presets {

/// How the final stage weighs the assigned experts (model configuration).
struct weight_options {
  weighting weights = weighting::renormalize;
  float scale = 1.0f;
};

constexpr refine refine_with(int k, const weight_options& w, int max_rank = max_experts) {
  return refine{.k = k, .max_rank = max_rank, .weights = w.weights, .scale = w.scale};
}

/// Plain top-k routing: `topk_union(k) | refine(k)`.
constexpr auto vanilla(int k, weight_options w = {}) { return topk_union{.k = k} | refine_with(k, w); }

/// OEA simplified (paper algorithm 1): `prune(k0) | refine(k)`.
constexpr auto oea(int k0, int k, weight_options w = {}) { return prune{.k0 = k0} | refine_with(k, w); }

/// OEA general (paper algorithm 2): `prune(k0, top_p) | refine(k, max_rank)`.
constexpr auto oea_general(int k0, float top_p, int k, int max_rank, weight_options w = {}) {
  return prune{.k0 = k0, .top_p = top_p} | refine_with(k, w, max_rank);
}

/// OEA phase 1 alone: `prune(k0) | refine(k0)`; plans stay k wide.
constexpr auto pruned_only(int k0, int k, weight_options w = {}) {
  auto policy = prune{.k0 = k0} | refine_with(k0, w);
  policy.top_k = k;
  return policy;
}

/// XShare batch: `prune(k0) | greedy_mass(add = m) | refine(k)`.
constexpr auto xshare_batch(int k0, int m, int k, weight_options w = {}, column_mass gate = column_mass::sparse) {
  return prune{.k0 = k0} | greedy_mass{.add = m, .gate = gate} | refine_with(k, w);
}

/// XShare speculative: `per_request(k0, m_r) | greedy_mass(add = m) | refine(k)`.
constexpr auto xshare_speculative(int k0, int m_r, int m, int k, weight_options w = {},
                                  column_mass gate = column_mass::sparse) {
  return per_request{.k0 = k0, .m_r = m_r, .gate = gate} | greedy_mass{.add = m, .gate = gate} | refine_with(k, w);
}

/// XShare expert-parallel: `prune(k0) | ep_fill(m_g) | refine(k)`.
constexpr auto xshare_expert_parallel(int k0, int m_g, int k, weight_options w = {},
                                      column_mass gate = column_mass::sparse) {
  return prune{.k0 = k0} | ep_fill{.m_g = m_g, .gate = gate} | refine_with(k, w);
}

/// Lynx-Lat: `topk_union(k) | vote_drop(d) | refine(k)`.
constexpr auto lynx_latency(int d, int k, weight_options w = {}) {
  return topk_union{.k = k} | vote_drop{.d = d} | refine_with(k, w);
}

/// Lynx-Acc: `confidence_keep(min_confidence, budget) | refine(k)`.
constexpr auto lynx_accuracy(float min_confidence, int budget, int k, weight_options w = {}) {
  return confidence_keep{.min_confidence = min_confidence, .budget = budget} | refine_with(k, w);
}

/// Dynamic skipping: `prune(k, skip_ratio = beta) | refine(k)`.
constexpr auto dynamic_skipping(float beta, int k, weight_options w = {}) {
  return prune{.k0 = k, .skip_ratio = beta} | refine_with(k, w);
}

}  // namespace moe_routing::presets

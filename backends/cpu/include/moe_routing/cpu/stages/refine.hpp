#pragma once
/// \file
/// `refine` on the CPU: the assignment stage, the weighting, the padding of each row, and
/// the batch summary (SPEC sections 3 and 4).

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "moe_routing/core/replica_map.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/core/status.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/cpu/simd/member_count.hpp"
#include "moe_routing/cpu/simd/value_top_k.hpp"
#include "moe_routing/cpu/stages/capacity.hpp"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/refine.hpp"

namespace moe_routing::cpu {

namespace detail {

/// refine's search of S past a token's stored top-k, for any scoring: the best `k` keys of S
/// among ranks below `max_rank` into `chosen`, else S's best key alone. Returns the count.
template <class Context>
int best_in_selected(Context& context, int token, int chunk, bool whole_row, int max_rank, int k, rank_key* chosen) {
  const int experts = context.experts();
  rank_key* keys = context.scratch_keys(chunk);
  rank_key threshold = 0;
  if (whole_row) {
    context.rank_full_row(token, chunk);
    if (max_rank < experts) {
      // The key of rank max_rank - 1; keys at or above it rank below max_rank.
      rank_key* sorted = context.scratch_sorted_keys(chunk);
      std::copy(keys, keys + experts, sorted);
      std::nth_element(sorted, sorted + (max_rank - 1), sorted + experts, std::greater<>{});
      threshold = sorted[max_rank - 1];
    }
  }
  const auto key_of = [&](int e) { return whole_row ? keys[e] : context.rank_key_of(token, e); };
  int found = 0;
  rank_key best_in_s = 0;
  bool any_in_s = false;
  context.selected.for_each([&](int e) {
    const rank_key key = key_of(e);
    if (!any_in_s || key > best_in_s) best_in_s = key;
    any_in_s = true;
    if (key >= threshold) insert_ranked(chosen, found, k, key);
  });
  if (found == 0 && any_in_s) {
    chosen[0] = best_in_s;
    found = 1;
  }
  return found;
}

}  // namespace detail

/// S's members in ascending order, when S is small enough to be read by list (every token
/// shares S, so the list is made once a call); otherwise `count` is -1.
struct selected_list {
  std::int32_t ids[max_listed];
  int count = -1;
};

/// A_i for one valid token: the first k experts of its rank order below max_rank that
/// are in S, else its best expert in S. Writes ids and p; returns the count.
template <class Context>
int assign_token(const refine& stage, Context& context, const selected_list& listed, int token, int chunk,
                 std::int32_t* ids, float* p) {
  const int k = stage.effective_k(context.top_k());
  const int experts = context.experts();
  const int max_rank = stage.rank_limit(experts);
  const auto top = context.top_experts(token);
  int count = stage.take_from_top_k(
      top.data(), context.top_probabilities(token).data(), context.top_k(), experts,
      [&](int e) { return context.selected.contains(e); }, ids, p);
  if (!stage.searches_past_top_k(count, context.top_k(), experts)) return count;

  // Ranks beyond the stored top-k matter: select from S directly.
  const bool whole_row = max_rank < experts || context.batch().groups.enabled();
  if (!whole_row && context.batch().ranks_by_input()) {
    // ids[0..count) already hold S's members among the stored top-k, and every other expert
    // ranks below those: A_i goes on with the best k - count members of S outside the top-k,
    // ranked by the input values themselves (S by list, or S as the lane mask of a vector pass).
    const auto* row = context.batch().scores.row(token);
    rank_key more[max_top_k];
    int found = 0;
    if (listed.count >= 0) {
      // Outside the top-k = below the key of its last expert.
      const std::int32_t last = top[static_cast<std::size_t>(context.top_k() - 1)];
      found = top_k_of_listed(row, listed.ids, listed.count, k - count, more, make_rank_key(to_float(row[last]), last));
    } else {
      expert_set rest = context.selected;
      for (const std::int32_t e : top) rest.erase(e);
      found = top_k_of_values(row, experts, k - count, more, &rest);
    }
    for (int j = 0; j < found; ++j, ++count) {
      ids[count] = expert_of(more[j]);
      p[count] = context.probability(token, ids[count]);
    }
    return count;
  }
  // A group limit or a rank cap: the whole row's keys, or S's members' keys one by one.
  rank_key chosen[max_top_k];
  const int found = detail::best_in_selected(context, token, chunk, whole_row, max_rank, k, chosen);
  for (int j = 0; j < found; ++j) {
    ids[j] = expert_of(chosen[j]);
    p[j] = context.probability(token, ids[j]);
  }
  return found;
}

/// The batch summary (SPEC section 4): the active and selected sets, the per-expert token
/// counts and device loads; then the rows of invalid tokens under repeat padding.
template <class Context>
void write_summary(Context& context, const plan_view& plan) {
  const int n = context.tokens();
  const int width = plan.top_k;
  plan_summary& summary = *plan.summary;
  summary.active.clear();
  if (plan.expert_tokens != nullptr) std::fill(plan.expert_tokens, plan.expert_tokens + context.experts(), 0);
  for (int token = 0; token < n; ++token) {
    for (int j = 0; j < plan.counts[token]; ++j) {
      const std::int32_t e = plan.ids[static_cast<std::size_t>(token) * width + j];
      summary.active.insert(e);
      if (plan.expert_tokens != nullptr) ++plan.expert_tokens[e];
    }
  }
  summary.active_count = detail::member_count(summary.active);
  summary.selected = context.selected;
  summary.selected_count = detail::member_count(context.selected.experts());
  summary.max_device_load = 0;
  if (context.devices() > 0) {
    std::int32_t* loads = plan.device_loads != nullptr ? plan.device_loads : context.scratch_counts();
    std::fill(loads, loads + context.devices(), 0);
    summary.active.for_each([&](int e) { ++loads[context.device_of(e)]; });
    summary.max_device_load = *std::max_element(loads, loads + context.devices());
  }
  if (plan.pad.kind == padding_kind::repeat) {
    // Rows of invalid tokens repeat the batch's lowest active expert (no extra load).
    const int lowest = summary.active.first();
    for (int token = 0; token < n; ++token) {
      if (plan.counts[token] != 0) continue;
      std::int32_t* ids = plan.ids + static_cast<std::size_t>(token) * width;
      std::fill(ids, ids + width, empty_row_id(plan.pad, lowest));
    }
  }
  if (context.batch().has_replicas()) {
    // Redundant experts (core/replica_map.hpp): loads count the physical slots dispatched
    // to, and the physical ids are written when asked; after the padding, which they follow.
    std::int32_t* loads = plan.device_loads != nullptr ? plan.device_loads : context.scratch_counts();
    expert_set used;
    summary.max_device_load = dispatch_to_replicas(context.batch().replicas, plan.ids, plan.counts, n, width,
                                                   plan.physical_ids, loads, context.scratch_device_cursors(), used);
  }
}

/// Assigns, weighs and pads every row, then writes the batch summary.
template <class Context>
status assign_tokens(const refine& stage, Context& context, const plan_view& plan) {
  const int n = context.tokens();
  const int width = plan.top_k;
  selected_list listed;
  if (context.batch().ranks_by_input() && detail::member_count(context.selected.experts()) <= max_listed) {
    listed.count = 0;
    context.selected.for_each([&](int e) {
      if (e < context.experts()) listed.ids[listed.count++] = e;
    });
  }
  context.parallel_blocks(n, [&](int token, int chunk) {
    std::int32_t* ids = plan.ids + static_cast<std::size_t>(token) * width;
    float* weights = plan.weights + static_cast<std::size_t>(token) * width;
    int count = 0;
    if (context.is_valid(token)) {
      float p[max_top_k];
      count = assign_token(stage, context, listed, token, chunk, ids, p);
      stage.weigh(p, count, weights);
    }
    plan.counts[token] = count;
    if (plan.guaranteed != nullptr) plan.guaranteed[token] = context.guaranteed_ranks(token);
    for (int j = count; j < width; ++j) {
      ids[j] = padding_id(plan.pad, count, ids[0]);
      weights[j] = 0.0f;
    }
  });

  if (stage.caps_experts()) reroute_over_capacity(stage, context, plan);  // stages/capacity.hpp
  write_summary(context, plan);
  return {};
}

}  // namespace moe_routing::cpu

namespace moe_routing {

template <>
struct stage_executor<cpu_backend, refine> {
  template <class Context>
  static status apply(const refine& stage, Context& context, const plan_view& plan) {
    return cpu::assign_tokens(stage, context, plan);
  }
};

}  // namespace moe_routing

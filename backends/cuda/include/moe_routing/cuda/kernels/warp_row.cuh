#pragma once
/// \file
/// One router row on one warp: lane l handles experts l, l + 32, ... (E <= 1024). The row's
/// rank orders live in a slice of shared memory that the warp owns (`warp_row`), one 32-bit
/// `score_order` per expert, so nothing is held in per-lane arrays indexed at run time (those
/// go to local memory and need more than the default stack). The row is scored with the very
/// formulas of `score_row.hpp`; p is recomputed from the input where it is read again (the
/// same `probability_of`, so the same bits). The sums that only scale weights (softmax
/// denominator, candidate total) are `weight_sum`s, lane partials merged by a warp tree: the
/// same float as the CPU's serial sum or one rounding step away. Ranks use rank keys of the
/// input values, exact on both backends, except in rows with a bias, which rank by
/// s = p + bias and so share p's last bits.

#include <cmath>
#include <cstdint>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/core/weight_sum.hpp"

namespace moe_routing::cuda::detail {

inline constexpr unsigned full_warp = 0xffffffffu;
inline constexpr int warp_lanes = 32;
/// 32-bit words a warp's row slice holds besides the E orders: the kept-group bits.
inline constexpr int group_words = max_experts / warp_lanes;

__device__ inline int lane_id() { return static_cast<int>(threadIdx.x) & (warp_lanes - 1); }

__device__ inline rank_key warp_max_key(rank_key key) {
  for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
    const rank_key other = __shfl_xor_sync(full_warp, key, offset);
    key = other > key ? other : key;
  }
  return key;
}

__device__ inline float warp_sum(float value) {
  for (int offset = warp_lanes / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(full_warp, value, offset);
  return value;
}

/// The lanes' partial weight sums merged (every lane gets the total).
__device__ inline weight_sum warp_merge(weight_sum sum) {
  for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
    weight_sum other;
    other.value = __shfl_xor_sync(full_warp, sum.value, offset);
    sum.merge(other);
  }
  return sum;
}

__device__ inline float warp_max_ignoring_nan(float value) {
  for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(full_warp, value, offset);
    value = other > value ? other : value;  // NaN never wins, as in softmax_in_place
  }
  return value;
}

/// A warp's slice of shared memory for one row: `order[e]` is expert e's `score_order` of
/// its rank score (the rank key without the expert), `kept_groups` the group limit's kept
/// groups as bits. Written and read by the warp only.
struct warp_row {
  std::uint32_t* order;        ///< [E]
  std::uint32_t* kept_groups;  ///< [group_words]

  __device__ rank_key key(int expert) const { return order_rank_key(order[expert], expert); }
};

/// Shared memory for the row slices of the warps of one block: `Words` 32-bit words, as many
/// slices of E + group_words words as fit (warps past that many sit out the per-row work).
template <int Words>
struct row_slices {
  std::uint32_t words[Words];

  /// Warps of a block of `warps` that get a slice for rows of `experts`.
  __device__ static int warps_with_rows(int warps, int experts) {
    const int fit = Words / (experts + group_words);
    return fit < warps ? fit : warps;
  }
  __device__ warp_row row_of(int warp, int experts) {
    std::uint32_t* base = words + warp * (experts + group_words);
    return {base, base + experts};
  }
};

/// The largest key of the row below `below` (keys are distinct), broadcast to every lane;
/// 0 when none. `eligible(e)` filters the experts.
template <class Eligible>
__device__ rank_key next_key_below(const warp_row& row, int experts, rank_key below, Eligible eligible) {
  rank_key best = 0;
  for (int e = lane_id(); e < experts; e += warp_lanes) {
    const rank_key key = row.key(e);
    if (key < below && key > best && eligible(e)) best = key;
  }
  return warp_max_key(best);
}

/// Marks the `topk_group` best groups in `row.kept_groups` (SPEC section 1), from the s of
/// every expert held in `row.order` as orders. Overwrites `row.order[0..n_group)` with the
/// groups' orders: group g is scored from experts at or above g * size >= g, so every slot it
/// overwrites has been read. Every lane calls it; the caller rewrites the row's orders after.
__device__ inline void mark_kept_groups(const warp_row& row, const group_limit& groups, int experts) {
  const int lane = lane_id();
  const int group_size = experts / groups.n_group;
  for (int g = 0; g < groups.n_group; ++g) {
    // The group's two best (s, expert) keys, ranked as detail::score_group ranks them.
    rank_key best = 0, second = 0;
    for (int e = g * group_size + lane; e < (g + 1) * group_size; e += warp_lanes) {
      const rank_key key = row.key(e);
      if (key > best) {
        second = best;
        best = key;
      } else if (key > second) {
        second = key;
      }
    }
    for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
      const rank_key other_best = __shfl_xor_sync(full_warp, best, offset);
      const rank_key other_second = __shfl_xor_sync(full_warp, second, offset);
      const rank_key lower_best = other_best > best ? best : other_best;
      const rank_key higher_second = other_second > second ? other_second : second;
      best = other_best > best ? other_best : best;
      second = lower_best > higher_second ? lower_best : higher_second;
    }
    float score = score_of_order(row.order[expert_of(best)]);
    if (groups.score == group_score::top2_sum && group_size > 1) {
      score = score + score_of_order(row.order[expert_of(second)]);
    }
    __syncwarp();
    if (lane == 0) row.order[g] = score_order(score);
    __syncwarp();
  }
  // A group is kept when fewer than topk_group groups rank above it.
  for (int w = 0; w * warp_lanes < groups.n_group; ++w) {  // uniform trip count: ballots
    const int g = w * warp_lanes + lane;
    bool kept = false;
    if (g < groups.n_group) {
      const rank_key mine = row.key(g);
      int above = 0;
      for (int h = 0; h < groups.n_group && above < groups.topk_group; ++h) above += row.key(h) > mine ? 1 : 0;
      kept = above < groups.topk_group;
    }
    const unsigned word = __ballot_sync(full_warp, kept);
    if (lane == 0) row.kept_groups[w] = word;
  }
  __syncwarp();
}

/// Scores `token`'s row into `row` and returns its statistics, as `score_row` does.
/// `denominator_free`: the policy reads p only as ratios within the top ranks and the row
/// is a finite softmax row without group limit or bias; p = exp(x - max) then (denominator 1),
/// exactly what the CPU's top-k-only path computes. With `dense_mass`, adds the row's p to it
/// in fixed point.
template <score_element Element>
__device__ row_stats score_row_on_warp(const routing_batch<Element>& batch, int token, bool denominator_free,
                                       const warp_row& row, std::int64_t* dense_mass) {
  constexpr float infinity = __builtin_huge_valf();
  const int lane = lane_id();
  const int experts = batch.experts();
  const Element* input = batch.scores.row(token);
  row_stats stats;
  if (batch.mode == scoring::softmax) {
    float m = -infinity;
    for (int e = lane; e < experts; e += warp_lanes) {
      const float x = to_float(input[e]);
      m = x > m ? x : m;
    }
    m = warp_max_ignoring_nan(m);
    stats.max_logit = m;
    if (m == infinity || m == -infinity) {
      float ties = 0;
      for (int e = lane; e < experts; e += warp_lanes) {
        ties += (m == -infinity || to_float(input[e]) == m) ? 1.0f : 0.0f;
      }
      stats.denominator = warp_sum(ties);  // small integers: exact in any order
    } else if (denominator_free && !batch.groups.enabled()) {
      stats.denominator = 1.0f;
    } else {
      weight_sum partial;
      for (int e = lane; e < experts; e += warp_lanes) {
        const float v = std::exp(to_float(input[e]) - m);
        partial.add(v == v ? v : 0.0f);  // NaN logits weigh nothing
      }
      stats.denominator = warp_merge(partial).rounded();
    }
  }
  const bool grouped = batch.groups.enabled();
  // Candidate totals skip NaN and negative p, and the experts of dropped groups.
  weight_sum total;
  float max_p = 0;
  const auto count_candidate = [&](float p) {
    if (p > 0) {
      total.add(p);
      max_p = p > max_p ? p : max_p;
    }
  };
  for (int e = lane; e < experts; e += warp_lanes) {
    const float x = to_float(input[e]);
    const float p = probability_of(batch.mode, x, stats);
    if (dense_mass != nullptr) {
      atomicAdd(reinterpret_cast<unsigned long long*>(dense_mass + e),
                static_cast<unsigned long long>(to_fixed_mass(p)));  // integers: any order
    }
    // With a group limit the slice first holds s, what group scores sum.
    row.order[e] = score_order(grouped ? selection_score(p, batch.bias, e) : rank_score(x, p, batch.bias, e));
    if (!grouped) count_candidate(p);
  }
  __syncwarp();
  if (grouped) {
    mark_kept_groups(row, batch.groups, experts);
    const int group_size = experts / batch.groups.n_group;
    constexpr std::uint32_t excluded = score_order(-infinity);  // excluded_rank_key's order
    for (int e = lane; e < experts; e += warp_lanes) {
      const int g = e / group_size;
      if (((row.kept_groups[g / warp_lanes] >> (g % warp_lanes)) & 1u) == 0) {
        row.order[e] = excluded;
        continue;
      }
      const float x = to_float(input[e]);
      const float p = probability_of(batch.mode, x, stats);
      row.order[e] = score_order(rank_score(x, p, batch.bias, e));
      count_candidate(p);
    }
    __syncwarp();
  }
  stats.candidate_total = warp_merge(total).rounded();
  stats.max_candidate_p = warp_max_ignoring_nan(max_p);
  return stats;
}

/// Rank orders of `token`'s row into `row`, without its p where its keys come from its input
/// alone (`keys_from_input_alone`).
template <score_element Element>
__device__ void rank_row_on_warp(const routing_batch<Element>& batch, int token, const warp_row& row) {
  if (batch.keys_from_input_alone()) {
    const Element* input = batch.scores.row(token);
    for (int e = lane_id(); e < batch.experts(); e += warp_lanes) row.order[e] = score_order(to_float(input[e]));
    __syncwarp();
  } else {
    (void)score_row_on_warp(batch, token, false, row, nullptr);
  }
}

}  // namespace moe_routing::cuda::detail

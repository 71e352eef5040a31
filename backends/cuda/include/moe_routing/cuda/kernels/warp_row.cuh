#pragma once
/// \file
/// One router row on one warp: lane l holds experts l, l + 32, ... (at most 32 each, as
/// E <= 1024). Scores the row with the very formulas of `score_row.hpp`, applies the
/// group limit, and selects ranks by repeated warp maxima of the rank keys. Sums that
/// the CPU makes serially (softmax denominator, candidate total) are warp reductions
/// here, so p may differ from the CPU's in the last bits (SPEC preamble). Ranks use rank
/// keys of the input values, exact on both backends, except in rows with a bias, which
/// rank by s = p + bias and so share p's last bits.

#include <cmath>
#include <cstdint>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"

namespace moe_routing::cuda::detail {

inline constexpr unsigned full_warp = 0xffffffffu;
inline constexpr int warp_lanes = 32;
inline constexpr int experts_per_lane = max_experts / warp_lanes;

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

__device__ inline float warp_max_ignoring_nan(float value) {
  for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(full_warp, value, offset);
    value = other > value ? other : value;  // NaN never wins, as in softmax_in_place
  }
  return value;
}

/// A lane's share of a row: x (the input), p and the rank key of each of its experts.
struct lane_row {
  float x[experts_per_lane];
  float p[experts_per_lane];
  rank_key keys[experts_per_lane];
  int count = 0;  ///< experts this lane holds
};

/// The largest key of the row below `below` (keys are distinct), broadcast to every lane;
/// 0 when none. `eligible(slot)` filters the lane's experts.
template <class Eligible>
__device__ rank_key next_key_below(const lane_row& row, rank_key below, Eligible eligible) {
  rank_key best = 0;
  for (int i = 0; i < row.count; ++i) {
    const rank_key key = row.keys[i];
    if (key < below && key > best && eligible(i)) best = key;
  }
  return warp_max_key(best);
}

/// The value a lane holds for `expert`, fetched from the lane that owns it.
__device__ inline float owner_value(const float* values, int count, int expert) {
  const int slot = expert / warp_lanes;
  const float mine = slot < count ? values[slot] : 0.0f;
  return __shfl_sync(full_warp, mine, expert % warp_lanes);
}

/// Keeps, in `row.keys`, only the experts of the `topk_group` best groups (SPEC section 1);
/// the others get `excluded_rank_key`. `s` are the lane's selection scores. Returns the
/// lane's slots whose expert stays a candidate, as bits.
__device__ inline unsigned apply_group_limit(lane_row& row, const float* s, const group_limit& groups, int experts) {
  const int lane = lane_id();
  const int group_size = experts / groups.n_group;
  rank_key group_keys[experts_per_lane] = {};  // this lane's groups: lane, lane + 32, ...
  for (int g = 0; g < groups.n_group; ++g) {
    // The group's two best (s, expert) keys, ranked as detail::score_group ranks them.
    rank_key best = 0, second = 0;
    for (int i = 0; i < row.count; ++i) {
      const int e = lane + i * warp_lanes;
      if (e / group_size != g) continue;
      const rank_key key = make_rank_key(s[i], e);
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
    float score = owner_value(s, row.count, expert_of(best));
    if (groups.score == group_score::top2_sum && group_size > 1) {
      score = score + owner_value(s, row.count, expert_of(second));
    }
    if (g % warp_lanes == lane) group_keys[g / warp_lanes] = make_rank_key(score, g);
  }
  // A group is kept when fewer than topk_group groups rank above it.
  const int my_groups = lane < groups.n_group ? (groups.n_group - 1 - lane) / warp_lanes + 1 : 0;
  int above[experts_per_lane] = {};
  for (int h = 0; h < groups.n_group; ++h) {
    const rank_key key_h = __shfl_sync(full_warp, group_keys[h / warp_lanes], h % warp_lanes);
    for (int i = 0; i < my_groups; ++i) above[i] += key_h > group_keys[i] ? 1 : 0;
  }
  unsigned kept_groups[experts_per_lane];  // word w, bit l: group 32 w + l is kept
  const int group_words = (groups.n_group + warp_lanes - 1) / warp_lanes;
  for (int w = 0; w < group_words; ++w) {
    kept_groups[w] = __ballot_sync(full_warp, w < my_groups && above[w] < groups.topk_group);
  }
  unsigned kept_slots = 0;
  for (int i = 0; i < row.count; ++i) {
    const int e = lane + i * warp_lanes;
    const int g = e / group_size;
    if ((kept_groups[g / warp_lanes] >> (g % warp_lanes)) & 1u) {
      kept_slots |= 1u << i;
    } else {
      row.keys[i] = excluded_rank_key(e);
    }
  }
  return kept_slots;
}

/// Scores `token`'s row into `row` and returns its statistics, as `score_row` does.
/// `denominator_free`: the policy reads p only as ratios within the top ranks and the row
/// is a finite softmax row without group limit or bias; p = exp(x - max) then (denominator 1),
/// exactly what the CPU's top-k-only path computes.
template <score_element Element>
__device__ row_stats score_row_on_warp(const routing_batch<Element>& batch, int token, bool denominator_free,
                                       lane_row& row) {
  constexpr float infinity = __builtin_huge_valf();
  const int lane = lane_id();
  const int experts = batch.experts();
  const Element* input = batch.scores.row(token);
  row.count = 0;
  for (int e = lane; e < experts; e += warp_lanes) row.x[row.count++] = to_float(input[e]);
  row_stats stats;
  float s[experts_per_lane];
  if (batch.mode == scoring::softmax) {
    float m = -infinity;
    for (int i = 0; i < row.count; ++i) m = row.x[i] > m ? row.x[i] : m;
    m = warp_max_ignoring_nan(m);
    stats.max_logit = m;
    if (m == infinity || m == -infinity) {
      float ties = 0;
      for (int i = 0; i < row.count; ++i) ties += (m == -infinity || row.x[i] == m) ? 1.0f : 0.0f;
      stats.denominator = warp_sum(ties);  // small integers: exact in any order
    } else if (denominator_free && !batch.groups.enabled()) {
      stats.denominator = 1.0f;
    } else {
      float partial = 0;
      for (int i = 0; i < row.count; ++i) {
        const float v = std::exp(row.x[i] - m);
        partial += v == v ? v : 0.0f;
      }
      stats.denominator = warp_sum(partial);
    }
    for (int i = 0; i < row.count; ++i) row.p[i] = probability_of(scoring::softmax, row.x[i], stats);
  } else {
    for (int i = 0; i < row.count; ++i) row.p[i] = probability_of(batch.mode, row.x[i], stats);
  }
  for (int i = 0; i < row.count; ++i) {
    const int e = lane + i * warp_lanes;
    s[i] = selection_score(row.p[i], batch.bias, e);  // what group scores sum
    row.keys[i] = make_rank_key(rank_score(row.x[i], row.p[i], batch.bias, e), e);
  }
  const unsigned candidates = batch.groups.enabled() ? apply_group_limit(row, s, batch.groups, experts) : ~0u;
  // Candidate totals skip NaN and negative p, and the experts of dropped groups.
  float total = 0, max_p = 0;
  for (int i = 0; i < row.count; ++i) {
    if (((candidates >> i) & 1u) == 0) continue;
    if (row.p[i] > 0) {
      total += row.p[i];
      max_p = row.p[i] > max_p ? row.p[i] : max_p;
    }
  }
  stats.candidate_total = warp_sum(total);
  stats.max_candidate_p = warp_max_ignoring_nan(max_p);
  return stats;
}

}  // namespace moe_routing::cuda::detail

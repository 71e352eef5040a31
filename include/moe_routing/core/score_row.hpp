#pragma once
/// \file
/// Scoring of one router row (SPEC section 1): weight probabilities p, rank keys from
/// the selection scores s, the group limit, and the row statistics that later steps
/// need to recompute any p exactly. Shared by every backend so that they agree bit for
/// bit on the same math library.

#include <cmath>
#include <limits>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/config.hpp"
#include "moe_routing/core/fixed_mass.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/weight_sum.hpp"

namespace moe_routing {

struct row_stats {
  float max_logit = 0;        ///< softmax: largest non-NaN logit
  float denominator = 1;      ///< softmax: sum of exp(x - max_logit) (see probability_of), a `weight_sum`
  float candidate_total = 0;  ///< sum of p over the row's candidate experts, a `weight_sum`
  float max_candidate_p = 0;  ///< largest p among candidates (NaN-free)
};

/// The sigmoid of x from exp(-x): the one formula of `probability_of` and of `score_row`, which
/// takes a row's exps all at once, so the two give the same bits.
MOE_ROUTING_HOST_DEVICE inline float sigmoid_from_exp_of_negative(float exp_of_negative) noexcept {
  return 1.0f / (1.0f + exp_of_negative);
}

/// p of one expert from its input value. Softmax conventions for non-finite rows,
/// chosen so that no row ever produces NaN p: NaN logits get p = 0; when some logit
/// is +inf, the +inf logits share p = 1 equally; when no logit is finite or +inf,
/// p = 1/E for every expert.
MOE_ROUTING_HOST_DEVICE inline float probability_of(scoring mode, float x, const row_stats& stats) noexcept {
  switch (mode) {
    case scoring::softmax: {
      const float m = stats.max_logit;
      if (m == std::numeric_limits<float>::infinity()) {
        return x == m ? 1.0f / stats.denominator : 0.0f;
      }
      if (m == -std::numeric_limits<float>::infinity()) return 1.0f / stats.denominator;
      if (x != x) return 0.0f;
      return std::exp(x - m) / stats.denominator;
    }
    case scoring::sigmoid:
      return sigmoid_from_exp_of_negative(std::exp(-x));
    case scoring::sqrtsoftplus:
      return std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x)));
    case scoring::probabilities:
      return x;
  }
  return x;
}

/// The selection score s of an expert (SPEC section 1): its p, plus bias[e] when a bias
/// is given. Group scores sum these.
MOE_ROUTING_HOST_DEVICE inline float selection_score(float p, const float* bias, int expert) noexcept {
  return bias != nullptr ? p + bias[expert] : p;
}

/// The value an expert is ranked by. Without a bias, the input x itself: every scoring
/// maps x to p monotonically, so the order is s's, without exp's rounding (identical on
/// every backend) and without the ties where p saturates to 1 or underflows to 0. With a
/// bias, s = p + bias.
MOE_ROUTING_HOST_DEVICE inline float rank_score(float x, float p, const float* bias, int expert) noexcept {
  return bias != nullptr ? p + bias[expert] : x;
}

namespace detail {

/// Keeps the best two of the orders taken so far, equal ones counted twice, by maxima and minima.
MOE_ROUTING_HOST_DEVICE inline void take_into_best_two(std::uint32_t& best, std::uint32_t& second,
                                                       std::uint32_t order) noexcept {
  const std::uint32_t lower = order < best ? order : best;
  best = order < best ? best : order;
  second = lower < second ? second : lower;
}

/// A group's score from the orders of its best two members (`score_group`).
MOE_ROUTING_HOST_DEVICE inline float group_score_of_orders(std::uint32_t best, std::uint32_t second, int members,
                                                           group_score kind) noexcept {
  const float first_score = score_of_order(best);
  if (kind == group_score::max || members == 1) return first_score;
  return first_score + score_of_order(second);
}

/// Score of one expert group from the s values of its members: the best s, or the sum of the
/// two best. Taken from the members' `score_order`s (the rank keys without the expert), which
/// give the same group key as the members' own s: expert indices only break ties between equal
/// orders, and equal orders are equal scores but for the signs of zeros, which no sum or maximum
/// ranks apart. The two best are kept by maxima and minima, not branches: on random rows the
/// branches went each way unpredictably (DeepSeek-V3's 8 groups of 32, `scoring/deepseek_v3` in
/// the routing benchmark). The CPU's vector form is `cpu/simd/group_score_avx2.hpp`.
MOE_ROUTING_HOST_DEVICE inline float score_group(const float* s, int begin, int end, group_score kind) noexcept {
  std::uint32_t best = 0, second = 0;  // order 0 is NaN's, the lowest
  for (int e = begin; e < end; ++e) take_into_best_two(best, second, score_order(s[e]));
  return group_score_of_orders(best, second, end - begin, kind);
}

}  // namespace detail

/// The scoring pass's exps: `values[i] = std::exp(values[i])`, one library call each. A backend
/// may pass `score_row` its own, when it returns the same values (the CPU's vector one,
/// `cpu/simd/exp_avx2.hpp`), since `probability_of` recomputes single p with `std::exp`.
struct library_exp {
  MOE_ROUTING_HOST_DEVICE void operator()(float* values, int count) const noexcept {
    for (int i = 0; i < count; ++i) values[i] = std::exp(values[i]);
  }
};

/// The scoring pass's group scores: `detail::score_group`. A backend may pass `score_row` its own,
/// when it returns the same group keys (the CPU's vector one, `cpu/simd/group_score_avx2.hpp`).
struct scalar_group_scores {
  MOE_ROUTING_HOST_DEVICE float operator()(const float* s, int begin, int end, group_score kind) const noexcept {
    return detail::score_group(s, begin, end, kind);
  }
};

namespace detail {

/// Softmax statistics and p of a row whose inputs are already in `p`, in place:
/// one exp per expert. p = exp(x - max) / denominator, the formula `probability_of`
/// uses, so later recomputations of one p match bit for bit. The denominator is a
/// `weight_sum` (double, rounded once), so a backend that sums in another order agrees.
MOE_ROUTING_NO_EXEC_CHECK
template <class ExpInPlace>
MOE_ROUTING_HOST_DEVICE void softmax_in_place(float* p, int experts, row_stats& stats,
                                              ExpInPlace exp_in_place) noexcept {
  constexpr float infinity = std::numeric_limits<float>::infinity();
  float m = -infinity;
  for (int e = 0; e < experts; ++e) m = p[e] > m ? p[e] : m;
  stats.max_logit = m;
  if (m == infinity || m == -infinity) {
    float denominator = 0;
    for (int e = 0; e < experts; ++e) denominator += (m == -infinity || p[e] == m) ? 1.0f : 0.0f;
    stats.denominator = denominator;
    for (int e = 0; e < experts; ++e) p[e] = probability_of(scoring::softmax, p[e], stats);
    return;
  }
  for (int e = 0; e < experts; ++e) p[e] -= m;
  exp_in_place(p, experts);
  weight_sum sum;
  for (int e = 0; e < experts; ++e) {
    const float v = p[e];
    p[e] = v == v ? v : 0.0f;  // NaN logits weigh nothing
    sum.add(p[e]);
  }
  const float denominator = sum.rounded();
  stats.denominator = denominator;
  for (int e = 0; e < experts; ++e) p[e] = p[e] / denominator;
}

}  // namespace detail

/// Scores one row: writes p[e] and keys[e] for every expert and returns the row
/// statistics. With a group limit, non-candidate experts get `excluded_rank_key`.
/// `scratch` needs room for E floats (the s values) when a group limit is enabled. The
/// softmax's and the sigmoid's exps are `exp_in_place`'s (`library_exp`), the group scores
/// `group_score_of`'s (`scalar_group_scores`).
MOE_ROUTING_NO_EXEC_CHECK
template <score_element Element, class ExpInPlace = library_exp, class GroupScores = scalar_group_scores>
MOE_ROUTING_HOST_DEVICE row_stats score_row(const Element* row, int experts, scoring mode, const float* bias,
                                            const group_limit& groups, float* p, rank_key* keys, float* scratch,
                                            ExpInPlace exp_in_place = {}, GroupScores group_score_of = {}) noexcept {
  row_stats stats;
  for (int e = 0; e < experts; ++e) p[e] = to_float(row[e]);
  if (bias == nullptr) {
    for (int e = 0; e < experts; ++e) keys[e] = make_rank_key(p[e], e);  // ranked by the input
  }
  if (mode == scoring::softmax) {
    detail::softmax_in_place(p, experts, stats, exp_in_place);
  } else if (mode == scoring::sigmoid) {
    for (int e = 0; e < experts; ++e) p[e] = -p[e];
    exp_in_place(p, experts);
    for (int e = 0; e < experts; ++e) p[e] = sigmoid_from_exp_of_negative(p[e]);
  } else {
    for (int e = 0; e < experts; ++e) p[e] = probability_of(mode, p[e], stats);
  }
  if (bias != nullptr) {
    for (int e = 0; e < experts; ++e) keys[e] = make_rank_key(selection_score(p[e], bias, e), e);
  }
  if (groups.enabled()) {
    for (int e = 0; e < experts; ++e) scratch[e] = selection_score(p[e], bias, e);
  }
  bool group_kept[max_experts];
  const int group_size = groups.enabled() ? experts / groups.n_group : experts;
  if (groups.enabled()) {
    // A group is kept when fewer than topk_group groups rank above it.
    rank_key group_keys[max_experts];
    for (int g = 0; g < groups.n_group; ++g) {
      group_keys[g] = make_rank_key(group_score_of(scratch, g * group_size, (g + 1) * group_size, groups.score), g);
    }
    for (int g = 0; g < groups.n_group; ++g) {
      int above = 0;
      for (int h = 0; h < groups.n_group && above < groups.topk_group; ++h) {
        above += group_keys[h] > group_keys[g] ? 1 : 0;
      }
      group_kept[g] = above < groups.topk_group;
      if (!group_kept[g]) {
        for (int e = g * group_size; e < (g + 1) * group_size; ++e) keys[e] = excluded_rank_key(e);
      }
    }
  }
  // Candidate totals skip NaN and negative p (possible only for probabilities input). Group by
  // group in expert order (the sum's order is the expert order either way), so no expert needs
  // a division to find its group.
  weight_sum total;
  float max_p = 0;
  for (int first = 0; first < experts; first += group_size) {
    if (groups.enabled() && !group_kept[first / group_size]) continue;
    for (int e = first; e < first + group_size; ++e) {
      const float value = p[e];
      if (value > 0) {
        total.add(value);
        max_p = value > max_p ? value : max_p;
      }
    }
  }
  stats.candidate_total = total.rounded();
  stats.max_candidate_p = max_p;
  return stats;
}

/// Rank keys of one row without its p, for rescoring a row later: without a bias the row
/// ranks by its input values and needs no p, unless a group limit does. `p` and `scratch`
/// are scratch space of E floats.
template <score_element Element>
MOE_ROUTING_HOST_DEVICE void rank_row(const Element* row, int experts, scoring mode, const float* bias,
                                      const group_limit& groups, float* p, rank_key* keys, float* scratch) noexcept {
  if (keys_from_input_alone(bias, groups)) {
    for (int e = 0; e < experts; ++e) keys[e] = make_rank_key(to_float(row[e]), e);
    return;
  }
  (void)score_row(row, experts, mode, bias, groups, p, keys, scratch);
}

/// Keeps `top[0..filled)` the largest keys seen, in descending order, at most `count`
/// of them: inserts `key` if it belongs. O(count) per insertion.
MOE_ROUTING_HOST_DEVICE inline void insert_ranked(rank_key* top, int& filled, int count, rank_key key) noexcept {
  if (filled == count && key <= top[count - 1]) return;
  int position = filled < count ? filled++ : count - 1;
  while (position > 0 && top[position - 1] < key) {
    top[position] = top[position - 1];
    --position;
  }
  top[position] = key;
}

/// Tuning data: experts whose best is compared with the current k-th key before any of
/// them is inserted (one vector's worth of floats).
inline constexpr int top_k_scan_block = 16;

/// The scan both top-k selections share: inserts expert e's `key_of(e)` in blocks of
/// `top_k_scan_block`, and once `count` keys are held skips a block whose largest
/// `bound_of(e)` (an upper bound of the key, cheap to vectorise) does not beat the k-th key.
template <class KeyOf, class BoundOf>
MOE_ROUTING_HOST_DEVICE void top_k_by_insertion(int experts, int count, rank_key* top_keys, KeyOf key_of,
                                                BoundOf bound_of) noexcept {
  int filled = 0, e = 0;
  for (; e + top_k_scan_block <= experts; e += top_k_scan_block) {
    if (filled == count) {
      rank_key best = 0;
      for (int l = 0; l < top_k_scan_block; ++l) {
        const rank_key bound = bound_of(e + l);
        best = bound > best ? bound : best;
      }
      if (best <= top_keys[count - 1]) continue;
    }
    for (int l = 0; l < top_k_scan_block; ++l) insert_ranked(top_keys, filled, count, key_of(e + l));
  }
  for (; e < experts; ++e) insert_ranked(top_keys, filled, count, key_of(e));
}

/// Writes the `count` best keys of a scored row to `top_keys` in rank order.
/// O(E + inserts * count).
MOE_ROUTING_HOST_DEVICE inline void top_k_of_keys(const rank_key* keys, int experts, int count,
                                                  rank_key* top_keys) noexcept {
  const auto key = [keys](int e) { return keys[e]; };
  top_k_by_insertion(experts, count, top_keys, key, key);
}

/// `top_k_of_keys` of a row ranked by its raw values (any row without a bias), without
/// writing every key. A block is skipped by `skip_order` (branch-free) with every index
/// bit set: no key of the block can exceed that bound.
template <score_element Element>
MOE_ROUTING_HOST_DEVICE void top_k_of_values_by_insertion(const Element* row, int experts, int count,
                                                          rank_key* top_keys) noexcept {
  top_k_by_insertion(
      experts, count, top_keys, [row](int e) { return make_rank_key(to_float(row[e]), e); },
      [row](int e) { return static_cast<rank_key>(skip_order(to_float(row[e]))) << 32 | 0xffffffffu; });
}

/// A token's sparse top-k gates from its top-k input values `top_x` and p `top_p`, in rank
/// order. Softmax rows ranked by their logits use exp(x_j - x_top1) renormalised over the
/// top-k: p / sum of p with the softmax denominator cancelled, so a backend that never
/// computed the denominator gets the same bits. Other rows, and a non-finite top logit,
/// renormalise p. (With a bias the top-ranked logit need not be the largest of the top-k,
/// so exp(x_j - x_top1) could overflow: such rows are not ranked by their logits.)
MOE_ROUTING_HOST_DEVICE inline void top_k_gates(bool softmax_by_logits, const float* top_x, const float* top_p, int k,
                                                float* gates) noexcept {
  if (softmax_by_logits && std::isfinite(top_x[0])) {
    row_stats unit;
    unit.max_logit = top_x[0];
    unit.denominator = 1.0f;
    float relative[max_top_k];
    for (int j = 0; j < k; ++j) relative[j] = probability_of(scoring::softmax, top_x[j], unit);
    sparse_gates(relative, k, gates);
  } else {
    sparse_gates(top_p, k, gates);
  }
}

}  // namespace moe_routing

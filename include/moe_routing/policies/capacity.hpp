#pragma once
/// \file
/// Capacity re-routing, `capacity(c)`: a post-assignment step of `refine` that caps each
/// expert at c tokens and moves a token's overflow to its next best expert already in S
/// (capacity-aware inference). It adds no expert to the batch, so |active| never grows;
/// under expert parallelism it bounds the straggler, on the CPU executor the longest
/// per-expert sweep.
///
/// Where it sits: after refine, as `prune(k0=4) | refine(k=8) | capacity(c=16)` in text, or
/// `refine{.k = 8, .capacity = 16}` in C++ (the text form is sugar for refine's own
/// `capacity` parameter, so both policy forms, the checks and the CUDA kernel parameters
/// carry it with no new stage kind). The parser accepts it only right after refine or a
/// preset. In prefill a decode-only policy routes exactly as vanilla, without capacity.
///
/// The pass, one order on every backend (a serial sweep; O(k (n^2 + n |S|)) in the worst
/// case, the n^2 an insertion sort of each round's seat order):
///  1. every guaranteed slot (the first `guaranteed[i]` of a row) takes a seat first, even
///     over c: capacity never moves an expert an earlier stage guaranteed (SPEC section 6);
///  2. the other slots round by round, slot j ascending; within round j the tokens by the p
///     of their slot-j expert, highest first (an overloaded expert keeps its highest-scoring
///     tokens), token index only to break an exact tie of p, so permuting whole requests
///     permutes the plan (SPEC section 6, invariant 7). A slot keeps its
///     expert while that expert has fewer than c seats taken; otherwise it moves to the
///     token's best-ranked member of S (rank key without a group limit, bias applied) that
///     has room and is not in the token's row; when none has room it stays where it is,
///     over c (no token loses an expert or its mass: engines expect every slot of a
///     counted row to be computed);
///  3. a row that changed is put back in rank order and weighed again with `refine::weigh`.
/// So an expert ends over c only when every member of S outside the token's row was full
/// (or through guaranteed slots), and the per-expert counts are the final assignment's.

#include <array>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/policies/refine.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

/// The text form's `capacity(c=16)`: read by the parser into `refine::capacity`.
struct capacity {
  static constexpr const char* name = "capacity";
  int c = 0;  ///< tokens per expert, at least 1

  static constexpr auto parameters() {
    using parameter = stage_parameter<capacity>;
    return std::array{
        parameter{
            .name = "c", .qualified = "capacity.c", .integer = &capacity::c, .required = true, .range = at_least_one},
    };
  }
};

namespace detail {
/// Marks a slot moved during the pass; every weight of such a row is written again.
inline constexpr float moved_slot_mark = -1.0f;

/// A slot's seat priority: its p, NaN lowest (ties, -inf among them, go by token index).
MOE_ROUTING_HOST_DEVICE inline float seat_priority(float p) noexcept {
  return p == p ? p : -std::numeric_limits<float>::infinity();
}

MOE_ROUTING_HOST_DEVICE inline bool row_holds(const std::int32_t* ids, int count, int expert) noexcept {
  for (int j = 0; j < count; ++j) {
    if (ids[j] == expert) return true;
  }
  return false;
}
}  // namespace detail

/// The rows refine wrote, as the pass sees them (a plan's `ids`, `weights`, `counts`, `top_k`).
struct assigned_rows {
  std::int32_t* ids = nullptr;           ///< [n, width]
  float* weights = nullptr;              ///< [n, width]
  const std::int32_t* counts = nullptr;  ///< [n]
  int width = 0;
};

/// Re-routes the assigned rows so that no expert holds more than `stage.capacity` tokens
/// where S had room (see the file comment for the order). `load` is scratch of `experts`
/// entries; on return it holds each expert's final token count. `order` is scratch of
/// `tokens` entries (a round's seat order). The accessors are the
/// backend's: `in_selection(e)`, `guaranteed_of(i)`, `key_of(i, e)` (the token's rank key of
/// e), `probability_of(i, e)` (its p, exactly as the scoring pass computed it) and
/// `repad(ids, count)` (the padding after a changed row's first `count` ids).
template <class InSelection, class GuaranteedOf, class KeyOf, class ProbabilityOf, class Repad>
MOE_ROUTING_HOST_DEVICE void reroute_over_capacity(const refine& stage, const assigned_rows& plan, int tokens,
                                                   int experts, std::int32_t* load, std::int32_t* order,
                                                   InSelection&& in_selection, GuaranteedOf&& guaranteed_of,
                                                   KeyOf&& key_of, ProbabilityOf&& probability_of, Repad&& repad) {
  const int cap = stage.capacity;
  const int width = plan.width;
  for (int e = 0; e < experts; ++e) load[e] = 0;
  for (int i = 0; i < tokens; ++i) {  // 1: guaranteed slots are never moved
    const int count = plan.counts[i];
    const int kept = guaranteed_of(i) < count ? guaranteed_of(i) : count;
    for (int j = 0; j < kept; ++j) ++load[plan.ids[static_cast<std::size_t>(i) * width + j]];
  }
  for (int j = 0; j < width; ++j) {  // 2: by slot, then by p descending, token index last
    int round = 0;
    for (int i = 0; i < tokens; ++i) {
      if (j >= plan.counts[i] || j < guaranteed_of(i)) continue;
      const float p = detail::seat_priority(probability_of(i, plan.ids[static_cast<std::size_t>(i) * width + j]));
      int at = round++;  // insertion sort: ascending i, so equal p keeps index order
      for (; at > 0; --at) {
        const int other = order[at - 1];
        if (!(detail::seat_priority(probability_of(other, plan.ids[static_cast<std::size_t>(other) * width + j])) < p))
          break;
        order[at] = other;
      }
      order[at] = i;
    }
    for (int r = 0; r < round; ++r) {
      const int i = order[r];
      std::int32_t* row = plan.ids + static_cast<std::size_t>(i) * width;
      const int expert = row[j];
      if (load[expert] < cap) {
        ++load[expert];
        continue;
      }
      int best = -1;
      rank_key best_key = 0;
      for (int e = 0; e < experts; ++e) {
        if (load[e] >= cap || !in_selection(e) || detail::row_holds(row, plan.counts[i], e)) continue;
        const rank_key key = key_of(i, e);
        if (best < 0 || key > best_key) {
          best = e;
          best_key = key;
        }
      }
      if (best < 0) {
        ++load[expert];  // S is full outside this row: the slot stays, over c
        continue;
      }
      row[j] = best;
      ++load[best];
      plan.weights[static_cast<std::size_t>(i) * width + j] = detail::moved_slot_mark;
    }
  }
  for (int i = 0; i < tokens; ++i) {  // 3: changed rows in rank order, weighed again
    const int count = plan.counts[i];
    std::int32_t* row = plan.ids + static_cast<std::size_t>(i) * width;
    float* weights = plan.weights + static_cast<std::size_t>(i) * width;
    bool changed = false;
    for (int j = 0; j < count; ++j) changed = changed || weights[j] == detail::moved_slot_mark;
    if (!changed) continue;
    rank_key keys[max_top_k];
    for (int j = 0; j < count; ++j) keys[j] = key_of(i, row[j]);
    for (int j = 1; j < count; ++j) {  // insertion sort: at most k entries, keys distinct
      const rank_key key = keys[j];
      const std::int32_t id = row[j];
      int at = j;
      for (; at > 0 && keys[at - 1] < key; --at) {
        keys[at] = keys[at - 1];
        row[at] = row[at - 1];
      }
      keys[at] = key;
      row[at] = id;
    }
    float p[max_top_k];
    for (int j = 0; j < count; ++j) p[j] = probability_of(i, row[j]);
    stage.weigh(p, count, weights);
    repad(row, count);  // repeat padding repeats the first id, which may have changed
  }
}

}  // namespace moe_routing

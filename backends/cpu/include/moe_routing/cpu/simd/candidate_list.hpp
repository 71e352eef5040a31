#pragma once
/// \file
/// What the vector top-k paths (`value_top_k.hpp` for AVX-512, `value_top_k_avx2.hpp` for
/// AVX2) share about a candidate list, a row's experts as two arrays of rank orders and ids:
/// - `no_key_limit`, the key limit that admits every key;
/// - `insert_below`, the exact one-by-one path they fall back on where their branch-free
///   ranking cannot run (tied float keys; on AVX-512 also a count over 16 with more than 32
///   experts listed, or more than 32 listed experts at or above the bound);
/// - `place_ranked`, the end of that branch-free ranking: the ranked candidates placed.

#include <cstdint>
#include <type_traits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/cpu/simd/keep_scalar.hpp"

namespace moe_routing::cpu {

/// Above every key (+inf's keys, the largest, have order 0xff800000).
inline constexpr rank_key no_key_limit = ~rank_key{0};

namespace detail {

/// The candidates whose keys are below `below`, inserted one by one into `top_keys` (the best
/// `count`, in rank order). Returns how many it wrote.
inline int insert_below(const std::uint32_t* orders, const std::uint32_t* ids, int found, int count, rank_key below,
                        rank_key* top_keys) noexcept {
  int filled = 0;
  for (int c = 0; c < found; ++c) {
    const rank_key key = order_rank_key(orders[c], static_cast<int>(ids[c]));
    if (key < below) insert_ranked(top_keys, filled, count, key);
  }
  return filled;
}

/// The end of the branch-free ranking, the same on every vector width: `ranks[c]` says how many
/// of the `found` candidates' short keys exceed candidate c's. Candidates not below the caller's
/// key limit have short key 0 and so rank `kept`, the number that are below it; `rank_sum` is the
/// ranks' total. Writes the keys of the best min(kept, count) in rank order and returns how many,
/// or returns -1, having written nothing, when two kept candidates' float keys tie (their short
/// keys hold no expert to break the tie; the caller then inserts one by one). Needs count <=
/// `max_top_k`.
template <score_element Element>
[[gnu::always_inline]] inline int place_ranked(const std::uint32_t* orders, const std::uint32_t* ids, const int* ranks,
                                               int found, int kept, int rank_sum, int count,
                                               rank_key* top_keys) noexcept {
  if constexpr (std::is_same_v<Element, float>) {
    // Distinct keys rank the wanted 0..kept-1 and the others `kept`; tied keys share the
    // lower rank, so a tie makes the sum smaller.
    if (rank_sum != kept * (kept - 1) / 2 + (found - kept) * kept) return -1;
  }
  int placed[max_top_k + 1];  // slot `count` takes the candidates ranked count or later
  // Placed apart from the ranking, by a minimum rather than a branch (which ranks fall short is
  // random): a store to a rank-dependent address inside the ranking loop measured 1.4x slower
  // (on the AVX-512 path).
  // Both loops stay scalar: vectorized, they become a scatter and two gathers (`keep_scalar`).
  for (int c = 0; c < found; ++c) {
    int slot = ranks[c] < count ? ranks[c] : count;
    keep_scalar(slot);
    placed[slot] = c;
  }
  const int placed_count = kept < count ? kept : count;
  for (int j = 0; j < placed_count; ++j) {
    int candidate = placed[j];
    keep_scalar(candidate);
    top_keys[j] = order_rank_key(orders[candidate], static_cast<int>(ids[candidate]));
  }
  return placed_count;
}

}  // namespace detail
}  // namespace moe_routing::cpu

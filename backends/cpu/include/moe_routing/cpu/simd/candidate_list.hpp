#pragma once
/// \file
/// What the vector top-k paths (`value_top_k.hpp` for AVX-512, `value_top_k_avx2.hpp` for
/// AVX2) share about a candidate list, a row's experts as two arrays of rank orders and ids:
/// the key limit that admits every key, and the exact one-by-one path those paths fall back
/// on where their branch-free ranking cannot run (tied float keys; on AVX-512 also a count
/// over 16 with more than 32 experts listed, or more than 32 listed experts at or above the
/// bound).

#include <cstdint>

#include "moe_routing/core/rank_key.hpp"
#include "moe_routing/core/score_row.hpp"

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

}  // namespace detail
}  // namespace moe_routing::cpu

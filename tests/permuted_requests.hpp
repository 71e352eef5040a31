#pragma once
// SPEC section 6 invariant 7, "permuting whole requests permutes the plan's rows and
// nothing else", as the parts every body that checks it needs: requests to permute, the
// problem with its requests shuffled, and the comparison of the two plans.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "test_support.hpp"

namespace test {

/// Offsets of requests of 1 to 4 tokens over `n` rows: several requests to permute.
inline std::vector<std::int32_t> random_request_offsets(int n, std::mt19937& rng) {
  std::vector<std::int32_t> offsets = {0};
  while (offsets.back() < n)
    offsets.push_back(std::min(n, offsets.back() + std::uniform_int_distribution<int>(1, 4)(rng)));
  return offsets;
}

/// A problem with its whole requests in another order, and where each row came from.
struct permuted_requests {
  problem permuted;
  std::vector<int> source_row;  ///< row r of `permuted` is row source_row[r] of the original
};

/// `p` (its segments set) with its requests shuffled by `rng`. The copy is float32 and
/// holds p's reference floats, so a float16 or bfloat16 problem keeps its rounded values.
inline permuted_requests permute_requests(const problem& p, std::mt19937& rng) {
  std::vector<int> order(p.segments.size() - 1);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  permuted_requests out{p, {}};
  std::vector<float> values;
  std::vector<std::uint8_t> mask;
  std::vector<std::int32_t> offsets = {0};
  for (int r : order) {
    for (int i = p.segments[r]; i < p.segments[r + 1]; ++i) {
      for (int e = 0; e < p.ref.E; ++e) values.push_back(p.ref.x[static_cast<std::size_t>(i) * p.ref.E + e]);
      if (!p.ref.mask.empty()) mask.push_back(p.ref.mask[i]);
      out.source_row.push_back(i);
    }
    offsets.push_back(static_cast<int>(out.source_row.size()));
  }
  set_segments(out.permuted, offsets);
  out.permuted.ref.mask = mask;
  out.permuted.type = element::f32;
  store_scores(out.permuted, values);
  return out;
}

/// `after` (the plan of `permute_requests`' problem) is `before` with its rows moved:
/// the same S, active set and loads, and each row's ids, count and weights bit for bit.
inline void check_rows_permuted(const mr::routing_plan& before, const mr::routing_plan& after,
                                const std::vector<int>& source_row, int top_k) {
  REQUIRE(after.summary().active == before.summary().active);
  REQUIRE(after.summary().selected == before.summary().selected);
  REQUIRE(after.expert_tokens() == before.expert_tokens());
  for (int row = 0; row < static_cast<int>(source_row.size()); ++row) {
    REQUIRE(after.count(row) == before.count(source_row[row]));
    for (int j = 0; j < top_k; ++j) {
      REQUIRE(after.id(row, j) == before.id(source_row[row], j));
      REQUIRE(after.weight(row, j) == before.weight(source_row[row], j));
    }
  }
}

}  // namespace test

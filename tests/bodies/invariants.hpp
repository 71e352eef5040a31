#pragma once
// SPEC section 6: the invariants every backend is held to, on random problems, as test
// bodies for every backend runner.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "backends/route_on.hpp"
#include "permuted_requests.hpp"
#include "test_support.hpp"

namespace test::bodies {

/// A row's rank order computed here by hand (selection scores sorted, NaN last).
inline std::vector<int> hand_ranking(const problem& p, int token) { return naive::score_token(p.ref, token).order; }

inline void check_plan_invariants(const problem& p, const mr::routing_plan& plan, const mr::runtime_policy& policy) {
  const int k = p.top_k;
  for (int i = 0; i < p.ref.n; ++i) {
    CAPTURE(i);
    const int count = plan.count(i);
    REQUIRE(count <= k);  // 1: count <= k
    if (!p.ref.valid(i)) {
      REQUIRE(count == 0);
      for (int j = 0; j < k; ++j) REQUIRE(plan.weight(i, j) == 0.0f);
      continue;
    }
    REQUIRE(count >= 1);
    const std::vector<int> order = hand_ranking(p, i);
    std::vector<int> rank(p.ref.E);
    for (int r = 0; r < p.ref.E; ++r) rank[order[r]] = r;
    float sum = 0;
    for (int j = 0; j < count; ++j) {
      const int e = plan.id(i, j);
      REQUIRE(e >= 0);
      REQUIRE(e < p.ref.E);
      REQUIRE(plan.summary().selected.contains(e));  // 1: every id is in S
      REQUIRE(plan.summary().active.contains(e));
      if (j > 0) REQUIRE(rank[plan.id(i, j - 1)] < rank[e]);  // 1: distinct, in rank order
      const float w = plan.weight(i, j);
      REQUIRE(std::isfinite(w));  // 5: no NaN, no negative
      REQUIRE(w >= 0.0f);
      sum += w;
    }
    for (int j = 0; j < plan.guaranteed(i); ++j) {  // 3: guaranteed experts assigned
      bool found = false;
      for (int s = 0; s < count; ++s) found = found || plan.id(i, s) == order[j];
      REQUIRE(found);
    }
    if (policy.assignment.weights == mr::weighting::renormalize) {  // 5: rows sum to scale
      REQUIRE(std::fabs(sum - policy.assignment.scale) <= 1e-5f * policy.assignment.scale);
    }
    for (int j = count; j < k; ++j) REQUIRE(plan.weight(i, j) == 0.0f);  // padding weighs 0
  }
  REQUIRE(plan.summary().active_count <= plan.summary().selected_count);  // 4
}

template <class Runner>
void invariants_on_random_policies() {
  std::mt19937 rng(2468);
  for (int trial = 0; trial < 800; ++trial) {
    const problem p = random_problem(rng);
    const std::string text = random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    check_plan_invariants(p, route_on<Runner>(p, policy), policy);
  }
}

template <class Runner>
void vanilla_is_top_k_by_hand() {
  std::mt19937 rng(1357);
  for (int trial = 0; trial < 300; ++trial) {
    problem p = random_problem(rng);
    p.ref.prefill = false;
    const auto plan = route_on<Runner>(p, mr::presets::vanilla(p.top_k));
    for (int i = 0; i < p.ref.n; ++i) {
      if (!p.ref.valid(i)) continue;
      const std::vector<int> order = hand_ranking(p, i);
      REQUIRE(plan.count(i) == p.top_k);
      for (int j = 0; j < p.top_k; ++j) REQUIRE(plan.id(i, j) == order[j]);
    }
  }
}

template <class Runner>
void oea_active_is_union_of_baselines() {
  std::mt19937 rng(8642);
  for (int trial = 0; trial < 300; ++trial) {
    const problem p = random_problem(rng);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const auto plan = route_on<Runner>(p, mr::presets::oea(k0, p.top_k));
    std::vector<bool> baseline(p.ref.E, false);
    for (int i = 0; i < p.ref.n; ++i) {
      if (!p.ref.valid(i)) continue;
      const auto order = hand_ranking(p, i);
      for (int j = 0; j < plan.guaranteed(i); ++j) baseline[order[j]] = true;
      REQUIRE(plan.guaranteed(i) <= k0);
    }
    REQUIRE(plan.summary().active_count == std::count(baseline.begin(), baseline.end(), true));
  }
}

template <class Runner>
void masked_rows_change_nothing() {
  std::mt19937 rng(1122);
  for (int trial = 0; trial < 200; ++trial) {
    problem p = random_problem(rng);
    p.ref.mask.clear();
    set_segments(p, {});
    if (p.ref.n == 0) continue;
    const std::string text = random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const auto plain = route_on<Runner>(p, policy);

    // Insert padding rows (garbage scores, mask 0) between the real ones.
    problem padded = p;
    std::vector<float> values;
    std::vector<std::uint8_t> mask;
    std::vector<int> original_row;
    for (int i = 0; i < p.ref.n; ++i) {
      const int pads = std::uniform_int_distribution<int>(0, 2)(rng);
      for (int q = 0; q < pads; ++q) {
        for (int e = 0; e < p.ref.E; ++e) values.push_back(std::normal_distribution<float>(0, 5)(rng));
        mask.push_back(0);
        original_row.push_back(-1);
      }
      for (int e = 0; e < p.ref.E; ++e) values.push_back(p.ref.x[static_cast<std::size_t>(i) * p.ref.E + e]);
      mask.push_back(1);
      original_row.push_back(i);
    }
    padded.ref.n = static_cast<int>(mask.size());
    padded.type = element::f32;  // the reference floats are already what p's rows hold
    store_scores(padded, values);
    padded.ref.mask = mask;
    const auto with_padding = route_on<Runner>(padded, policy);
    REQUIRE(with_padding.summary().active == plain.summary().active);
    REQUIRE(with_padding.summary().selected == plain.summary().selected);
    for (int row = 0; row < padded.ref.n; ++row) {
      const int i = original_row[row];
      if (i < 0) {
        REQUIRE(with_padding.count(row) == 0);
        continue;
      }
      REQUIRE(with_padding.count(row) == plain.count(i));
      for (int j = 0; j < p.top_k; ++j) {
        REQUIRE(with_padding.id(row, j) == plain.id(i, j));
        REQUIRE(with_padding.weight(row, j) == plain.weight(i, j));
      }
    }
  }
}

template <class Runner>
void permuted_requests_permute_rows() {
  std::mt19937 rng(3344);
  for (int trial = 0; trial < 200; ++trial) {
    problem p = random_problem(rng);
    if (p.ref.n == 0) continue;
    if (p.segments.empty()) set_segments(p, random_request_offsets(p.ref.n, rng));
    const std::string text = random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const auto before = route_on<Runner>(p, policy);
    const permuted_requests moved = permute_requests(p, rng);
    check_rows_permuted(before, route_on<Runner>(moved.permuted, policy), moved.source_row, p.top_k);
  }
}

template <class Runner>
void vanilla_active_count_follows_occupancy() {
  const int experts = 256, k = 8;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (const int n : {8, 32}) {
    const double expected = experts * (1.0 - std::pow(1.0 - static_cast<double>(k) / experts, n));
    double total = 0;
    const int batches = 400;
    std::vector<float> scores(static_cast<std::size_t>(n) * experts);
    for (int b = 0; b < batches; ++b) {
      for (auto& s : scores) s = uniform(rng);
      const problem p = problem_from_rows(scores, experts, k, naive::mode::probabilities);
      total += route_on<Runner>(p, mr::presets::vanilla(k)).summary().active_count;
    }
    CAPTURE(n);
    CHECK(std::fabs(total / batches - expected) / expected < 0.01);
  }
}

}  // namespace test::bodies

/// The invariants as test cases on `Runner`.
#define MOE_ROUTING_INVARIANT_TESTS(Runner)                                                                         \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "invariants 1, 3, 4, 5 hold for random policies and batches",               \
                                test::bodies::invariants_on_random_policies<Runner>())                              \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "invariant 2: vanilla equals top-k sorted by hand",                         \
                                test::bodies::vanilla_is_top_k_by_hand<Runner>())                                   \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "invariant 4: OEA's |active| is the size of the union of the baselines",    \
                                test::bodies::oea_active_is_union_of_baselines<Runner>())                           \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "invariant 6: masked rows change nothing for the others",                   \
                                test::bodies::masked_rows_change_nothing<Runner>())                                 \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "invariant 7: permuting whole requests permutes the rows and nothing else", \
                                test::bodies::permuted_requests_permute_rows<Runner>())                             \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner,                                                                             \
                                "invariant 8: vanilla |active| under uniform scores follows E(1 - (1 - k/E)^n)",    \
                                test::bodies::vanilla_active_count_follows_occupancy<Runner>())

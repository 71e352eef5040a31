#pragma once
// Capacity re-routing (`capacity(c)`, policies/capacity.hpp) as test bodies for every
// backend runner: hand-worked examples, the naive reference on random batches, the bound
// it promises and SPEC section 6's invariants on the re-routed plans.

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "backends/route_on.hpp"
#include "bodies/hand_examples.hpp"
#include "bodies/invariants.hpp"
#include "naive_capacity.hpp"
#include "permuted_requests.hpp"
#include "plan_checks.hpp"
#include "test_support.hpp"

namespace test::bodies {

/// Hand table (hand_examples.hpp), S = every expert, refine(k=2), c = 1:
///   rows before: t0 {0,1}  t1 {1,2}  t2 {3,4}; no guarantees.
///   slot 0: t0 e0, t1 e1, t2 e3 take seats.
///   slot 1, by p of the slot's expert: t1 e2 (.35), t0 e1 (.3), t2 e4 (.2).
///           t1 e2 takes a seat -> {1,2}.
///           t0 e1 is full; room in S outside {0,1}: 4, 5 (2 and 3 are full); t0 ranks 4 (.03)
///           first -> {0,4}.
///           t2 e4 is now full; room outside {3,4}: 5 -> {3,5}.
///   weights: t0 .5/.53 .03/.53, t1 .4/.75 .35/.75, t2 .6/.7 .1/.7; one token per expert.
template <class Runner>
void hand_capacity_moves_overflow() {
  mr::routing_plan plan;
  const auto policy = mr::parse_policy_or_throw("topk_union(k=3) | refine(k=2) | capacity(c=1)");
  CHECK(assigned<Runner>(policy, hand_table_problem(), &plan) == rows{{0, 4}, {1, 2}, {3, 5}});
  CHECK(plan.weight(0, 0) == doctest::Approx(0.5 / 0.53).epsilon(1e-6));
  CHECK(plan.weight(0, 1) == doctest::Approx(0.03 / 0.53).epsilon(1e-6));
  CHECK(plan.weight(1, 1) == doctest::Approx(0.35 / 0.75).epsilon(1e-6));
  CHECK(plan.weight(2, 1) == doctest::Approx(0.1 / 0.7).epsilon(1e-6));
  CHECK(plan.expert_tokens() == std::vector<std::int32_t>{1, 1, 1, 1, 1, 1});
  CHECK(plan.summary().active_count == 6);
}

/// Seats go by p, not by row: softmax rows [3,2,0,0] and [3,2.5,0,0], one request each,
/// S = {0,1}, refine(k=1), c = 1. t0's p of e0 is the higher, so t0 keeps e0 and t1 moves
/// to e1; with the two requests swapped the plan's rows swap too (invariant 7).
template <class Runner>
void hand_capacity_seats_by_probability() {
  const auto policy = mr::parse_policy_or_throw("topk_union(k=2) | refine(k=1) | capacity(c=1)");
  problem p = problem_from_rows({3, 2, 0, 0, 3, 2.5f, 0, 0}, 4, 2);
  set_segments(p, {0, 1, 2});
  CHECK(assigned<Runner>(policy, p) == rows{{0}, {1}});
  problem swapped = problem_from_rows({3, 2.5f, 0, 0, 3, 2, 0, 0}, 4, 2);
  set_segments(swapped, {0, 1, 2});
  CHECK(assigned<Runner>(policy, swapped) == rows{{1}, {0}});
}

/// E = 4, k = 2, probabilities:  t0 .6 .3 .05 .05 (ranks 0 1 2 3), t1 .5 .1 .3 .1 (ranks 0 2 1 3).
/// prune(k0=1) guarantees e0 to both tokens: it keeps 2 > c = 1 tokens, since capacity never
/// moves a guaranteed expert; t0's e1 and t1's e2 take seats; nothing moves.
/// Without the guarantee (topk_union(k=2), S = {0,1,2}): slot 0: t0 e0 (.6) before t1 e0
/// (.5): t0 seated, t1's e0 full, moves to its best with room outside {0,2}: e1 -> t1 {2,1}
/// in rank order; slot 1: t0 e1 (.3) and t1 e2 (.3) tie on p, so token index: t0's e1 is now
/// full, moves to e2 (room still) -> t0 {0,2}; t1's e2 is full and S outside {1,2} is full:
/// it stays, over c. Loads 1, 1, 2.
template <class Runner>
void hand_capacity_keeps_guarantees() {
  const problem p =
      problem_from_rows({0.6f, 0.3f, 0.05f, 0.05f, 0.5f, 0.1f, 0.3f, 0.1f}, 4, 2, naive::mode::probabilities);
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | greedy_mass(size=4) | refine(k=2) | capacity(c=1)"),
                         p, &plan) == rows{{0, 1}, {0, 2}});
  CHECK(plan.expert_tokens()[0] == 2);
  CHECK(plan.guaranteed(0) == 1);
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("topk_union(k=2) | refine(k=2) | capacity(c=1)"), p, &plan) ==
        rows{{0, 2}, {2, 1}});
  CHECK(plan.expert_tokens() == std::vector<std::int32_t>{1, 1, 2, 0});
}

/// A random problem capacity can be checked on by hand: no group limit (capacity ranks S
/// without one, the naive ranking applies it).
inline problem capacity_problem(std::mt19937& rng) {
  problem p = random_problem(rng);
  p.ref.n_group = 0;
  p.ref.topk_group = 0;
  return p;
}

/// The library's capacity plan against the naive reference, and its promise: an expert
/// holds more than c tokens only through guaranteed slots or where every member of S
/// outside an overflowing token's row was full.
/// A random policy capacity may follow: capacity refuses a rank limit (refine.max_rank).
inline std::string capacity_base_text(std::mt19937& rng, const problem& p) {
  std::string text = random_policy_text(rng, p);
  while (text.find("max_rank=") != std::string::npos) text = random_policy_text(rng, p);
  return text;
}

template <class Runner>
void capacity_matches_naive() {
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 400; ++trial) {
    const problem p = capacity_problem(rng);
    const int c = std::uniform_int_distribution<int>(1, std::max(1, p.ref.n))(rng);
    const std::string text = capacity_base_text(rng, p) + " | capacity(c=" + std::to_string(c) + ")";
    CAPTURE(trial);
    CAPTURE(text);
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    const mr::routing_plan got = route_on<Runner>(p, policy);
    naive::plan want = naive::route(p.ref, to_naive(policy), p.top_k);
    // SPEC section 1: in prefill a decode-only policy routes exactly as vanilla, uncapped.
    const naive::policy reference = to_naive(policy);
    const bool as_vanilla =
        p.ref.prefill && std::any_of(reference.sets.begin(), reference.sets.end(), [](const naive::stage& s) {
          return s.kind == "vote_drop" || s.kind == "confidence_keep";
        });
    const int effective_c = as_vanilla ? p.ref.n * p.top_k + 1 : c;
    const std::vector<int> load = naive::apply_capacity(
        p.ref, want, effective_c, policy.assignment.weights == mr::weighting::raw, policy.assignment.scale);
    check_against_naive(got, want, text);
    for (int e = 0; e < p.ref.E; ++e) REQUIRE(got.expert_tokens()[static_cast<std::size_t>(e)] == load[e]);
    check_plan_invariants(p, got, policy);

    for (int e = 0; e < p.ref.E; ++e) {  // over c only where no room existed
      if (load[e] <= effective_c) continue;
      int guaranteed_holders = 0, stuck_holders = 0;
      for (int i = 0; i < p.ref.n; ++i) {
        for (int j = 0; j < got.count(i); ++j) {
          if (got.id(i, j) != e) continue;
          if (j < got.guaranteed(i)) {
            ++guaranteed_holders;
            continue;
          }
          bool room_elsewhere = false;
          got.summary().selected.for_each([&](int f) {
            bool in_row = false;
            for (int s = 0; s < got.count(i); ++s) in_row = in_row || got.id(i, s) == f;
            room_elsewhere = room_elsewhere || (!in_row && load[f] < effective_c);
          });
          stuck_holders += room_elsewhere ? 0 : 1;
        }
      }
      CAPTURE(e);
      REQUIRE(stuck_holders >= load[e] - std::max(effective_c, guaranteed_holders));
    }
  }
}

/// SPEC section 6 invariant 7 with capacity: on random tie-free batches (distinct values,
/// no NaN), permuting whole requests permutes the capped plan's rows and nothing else.
template <class Runner>
void capacity_permuted_requests_permute_rows() {
  std::mt19937 rng(9911);
  for (int trial = 0; trial < 300; ++trial) {
    problem p = capacity_problem(rng);
    if (p.ref.n == 0) continue;
    std::vector<float> values(static_cast<std::size_t>(p.ref.n) * p.ref.E);
    for (auto& v : values) {
      v = p.ref.scoring == naive::mode::probabilities ? std::uniform_real_distribution<float>(0.01f, 1.0f)(rng)
                                                      : std::normal_distribution<float>(0.0f, 2.0f)(rng);
    }
    p.type = element::f32;
    store_scores(p, values);
    set_segments(p, random_request_offsets(p.ref.n, rng));
    const int c = std::uniform_int_distribution<int>(1, std::max(1, p.ref.n / 2))(rng);
    const std::string text = capacity_base_text(rng, p) + " | capacity(c=" + std::to_string(c) + ")";
    CAPTURE(trial);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const auto before = route_on<Runner>(p, policy);
    const permuted_requests moved = permute_requests(p, rng);
    check_rows_permuted(before, route_on<Runner>(moved.permuted, policy), moved.source_row, p.top_k);
  }
}

/// A capacity no expert can reach changes no id, count or load, and no weight beyond rounding.
template <class Runner>
void capacity_unreached_changes_nothing() {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 100; ++trial) {
    const problem p = capacity_problem(rng);
    const std::string text = capacity_base_text(rng, p);
    CAPTURE(text);
    const mr::routing_plan plain = route_on<Runner>(p, mr::parse_policy_or_throw(text));
    const mr::routing_plan capped = route_on<Runner>(
        p, mr::parse_policy_or_throw(text + " | capacity(c=" + std::to_string(std::max(1, p.ref.n)) + ")"));
    // Capacity reads p across tokens, so a softmax row is scored with its full denominator
    // (scoring_needs::top_k_only off) and weights may differ from the plain plan's in the
    // last bits; every id and count is the same.
    REQUIRE(plain.ids() == capped.ids());
    REQUIRE(plain.counts() == capped.counts());
    REQUIRE(plain.summary().active == capped.summary().active);
    REQUIRE(plain.summary().selected == capped.summary().selected);
    REQUIRE(plain.expert_tokens() == capped.expert_tokens());
    REQUIRE(plain.device_loads() == capped.device_loads());
    for (std::size_t at = 0; at < plain.weights().size(); ++at)
      REQUIRE(std::fabs(plain.weights()[at] - capped.weights()[at]) <= 1e-6f * (1.0f + std::fabs(plain.weights()[at])));
  }
}

}  // namespace test::bodies

#define MOE_ROUTING_CAPACITY_TESTS(Runner)                                                                             \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "capacity(c=1) moves each overflow to the token's best expert in S with room", \
                                test::bodies::hand_capacity_moves_overflow<Runner>())                                  \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "capacity seats an overloaded expert's tokens by p, not by row",               \
                                test::bodies::hand_capacity_seats_by_probability<Runner>())                            \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "invariant 7 with capacity: permuting whole requests permutes the rows",       \
                                test::bodies::capacity_permuted_requests_permute_rows<Runner>())                       \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "capacity never moves a guaranteed expert, and keeps a slot when S is full",   \
                                test::bodies::hand_capacity_keeps_guarantees<Runner>())                                \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "capacity agrees with the naive reference and exceeds c only without room",    \
                                test::bodies::capacity_matches_naive<Runner>())                                        \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "a capacity no expert reaches leaves the plan (weights up to rounding)",       \
                                test::bodies::capacity_unreached_changes_nothing<Runner>())

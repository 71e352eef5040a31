#pragma once
// coverage_greedy, prune_to_budget and prune_to_latency on every backend runner: against
// naive references written here from their definitions (plain, non-lazy greedy; unions
// rebuilt for every depth), SPEC section 6's invariants, hand-worked examples, the
// coverage objective against greedy_mass's, and a binding error.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "backends/route_on.hpp"
#include "bodies/hand_examples.hpp"
#include "bodies/invariants.hpp"
#include "plan_checks.hpp"
#include "test_support.hpp"

namespace test::bodies {

/// Every valid token's full rank order and the gates of its top-k, by hand.
struct naive_top_lists {
  std::vector<std::vector<int>> order;           // [n][E], empty for invalid tokens
  std::vector<std::vector<std::int64_t>> gates;  // [n][top_k] fixed-point gates, rank order
};

/// The gate of each of a token's top-k: p itself (dense), or p over the top-k renormalised
/// (sparse; a softmax row without a bias takes exp(x - x_top1) for p, docs/design.md), 1/k
/// each when that sum is not a positive finite number.
inline naive_top_lists naive_lists(const problem& p, bool dense) {
  naive_top_lists lists;
  const int n = p.ref.n, E = p.ref.E, k = p.top_k;
  lists.order.resize(static_cast<std::size_t>(n));
  lists.gates.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (!p.ref.valid(i)) continue;
    const naive::token_info t = naive::score_token(p.ref, i);
    lists.order[static_cast<std::size_t>(i)] = t.order;
    const float* x = &p.ref.x[static_cast<std::size_t>(i) * E];
    const float top = x[t.order[0]];
    const bool relative = p.ref.scoring == naive::mode::softmax && p.ref.bias.empty() && std::isfinite(top);
    std::vector<float> value(static_cast<std::size_t>(k));
    float sum = 0;
    for (int j = 0; j < k; ++j) {
      const int e = t.order[static_cast<std::size_t>(j)];
      value[static_cast<std::size_t>(j)] = dense || !relative ? t.p[static_cast<std::size_t>(e)] : std::exp(x[e] - top);
      sum += std::max(0.0f, value[static_cast<std::size_t>(j)]);
    }
    for (int j = 0; j < k; ++j) {
      float g = value[static_cast<std::size_t>(j)];
      if (!dense) g = !(sum > 0) || std::isinf(sum) ? 1.0f / static_cast<float>(k) : std::max(0.0f, g) / sum;
      lists.gates[static_cast<std::size_t>(i)].push_back(naive::fixed(g));
    }
  }
  return lists;
}

/// F(S): per valid token, the `uses` largest gates among its top-k experts in S, summed.
inline std::int64_t naive_coverage(const problem& p, const naive_top_lists& lists, const std::vector<bool>& S,
                                   int uses) {
  std::int64_t total = 0;
  for (int i = 0; i < p.ref.n; ++i) {
    if (!p.ref.valid(i)) continue;
    std::vector<std::int64_t> held;
    for (int j = 0; j < p.top_k; ++j) {
      if (S[static_cast<std::size_t>(lists.order[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)])])
        held.push_back(lists.gates[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
    }
    std::sort(held.begin(), held.end(), std::greater<>());
    for (int j = 0; j < std::min(uses, static_cast<int>(held.size())); ++j) total += held[static_cast<std::size_t>(j)];
  }
  return total;
}

/// The union of every valid token's best `depth` experts.
inline std::vector<bool> naive_union(const problem& p, const naive_top_lists& lists, int depth) {
  std::vector<bool> S(static_cast<std::size_t>(p.ref.E), false);
  for (int i = 0; i < p.ref.n; ++i) {
    if (!p.ref.valid(i)) continue;
    for (int j = 0; j < depth; ++j)
      S[static_cast<std::size_t>(lists.order[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)])] = true;
  }
  return S;
}

/// The plain (not lazy) greedy on F from S: each round tries every expert outside S,
/// takes the largest positive gain (the lowest index among equals), `wanted` rounds.
inline void naive_coverage_greedy(const problem& p, const naive_top_lists& lists, std::vector<bool>& S, int wanted,
                                  int uses) {
  for (int round = 0; round < wanted; ++round) {
    const std::int64_t base = naive_coverage(p, lists, S, uses);
    int best = -1;
    std::int64_t best_gain = 0;
    for (int e = 0; e < p.ref.E; ++e) {
      if (S[static_cast<std::size_t>(e)]) continue;
      S[static_cast<std::size_t>(e)] = true;
      const std::int64_t gain = naive_coverage(p, lists, S, uses) - base;
      S[static_cast<std::size_t>(e)] = false;
      if (gain > best_gain) {
        best_gain = gain;
        best = e;
      }
    }
    if (best < 0) return;
    S[static_cast<std::size_t>(best)] = true;
  }
}

/// Each valid token's first `k` members of S in its rank order (its best one when none).
inline std::vector<std::vector<int>> naive_rows(const problem& p, const naive_top_lists& lists,
                                                const std::vector<bool>& S, int k) {
  std::vector<std::vector<int>> rows(static_cast<std::size_t>(p.ref.n));
  for (int i = 0; i < p.ref.n; ++i) {
    if (!p.ref.valid(i)) continue;
    for (const int e : lists.order[static_cast<std::size_t>(i)]) {
      if (S[static_cast<std::size_t>(e)] && static_cast<int>(rows[static_cast<std::size_t>(i)].size()) < k)
        rows[static_cast<std::size_t>(i)].push_back(e);
    }
  }
  return rows;
}

inline void check_selected_and_rows(const problem& p, const mr::routing_plan& plan, const std::vector<bool>& S,
                                    const naive_top_lists& lists, int k, const std::vector<int>& guaranteed) {
  for (int e = 0; e < p.ref.E; ++e) {
    CAPTURE(e);
    REQUIRE(plan.summary().selected.contains(e) == static_cast<bool>(S[static_cast<std::size_t>(e)]));
  }
  const auto rows = naive_rows(p, lists, S, k);
  for (int i = 0; i < p.ref.n; ++i) {
    CAPTURE(i);
    const auto& row = rows[static_cast<std::size_t>(i)];
    REQUIRE(plan.count(i) == static_cast<int>(row.size()));
    for (int j = 0; j < plan.count(i); ++j) REQUIRE(plan.id(i, j) == row[static_cast<std::size_t>(j)]);
    REQUIRE(plan.guaranteed(i) == guaranteed[static_cast<std::size_t>(i)]);
  }
}

inline std::vector<bool> selected_of(const problem& p, const mr::routing_plan& plan) {
  std::vector<bool> S(static_cast<std::size_t>(p.ref.E), false);
  for (int e = 0; e < p.ref.E; ++e) S[static_cast<std::size_t>(e)] = plan.summary().selected.contains(e);
  return S;
}

inline problem small_random_problem(std::mt19937& rng) {
  return random_problem(rng, {.max_tokens = 40, .max_experts = 128, .allow_non_finite = true});
}

template <class Runner>
void coverage_greedy_equals_plain_greedy() {
  std::mt19937 rng(9001);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 150; ++trial) {
    const problem p = small_random_problem(rng);
    const int k = p.top_k, E = p.ref.E;
    const int k0 = uniform(1, k), uses = uniform(0, k), refine_k = uniform(k0, k);
    const bool dense = uniform(0, 3) == 0, by_size = uniform(0, 1) == 0;
    const int target = by_size ? uniform(0, std::min(E, 24)) : uniform(0, std::min(E, 12));
    const bool opens = trial % 3 == 0 && !dense;  // coverage_greedy first (sparse gate only)
    const std::string stage = "coverage_greedy(" + std::string(by_size ? "size=" : "add=") + std::to_string(target) +
                              ",k=" + std::to_string(uses) + (dense ? ",gate=dense" : "") + ")";
    const std::string text = (opens ? "" : "prune(k0=" + std::to_string(k0) + ") | ") + stage +
                             " | refine(k=" + std::to_string(refine_k) + ")";
    CAPTURE(text);
    CAPTURE(trial);
    CAPTURE(static_cast<int>(p.ref.scoring));
    CAPTURE(p.ref.bias.size());
    CAPTURE(p.ref.n_group);
    CAPTURE(static_cast<int>(p.type));
    CAPTURE(p.ref.prefill);
    if (opens && target == 0) continue;  // cannot open a policy
    const auto policy = mr::parse_policy_or_throw(text);
    const mr::routing_plan plan = route_on<Runner>(p, policy);
    const naive_top_lists lists = naive_lists(p, dense);
    // S0 and its guarantees: the naive router's prune (a NaN p ends a baseline early).
    const naive::plan pruned = naive::route(p.ref, {.sets = {naive::stage{.kind = "prune", .k0 = k0}}}, k);
    std::vector<bool> S = opens ? std::vector<bool>(static_cast<std::size_t>(E), false) : pruned.S;
    const int held = static_cast<int>(std::count(S.begin(), S.end(), true));
    naive_coverage_greedy(p, lists, S, by_size ? std::max(0, target - held) : target, uses == 0 ? k : uses);
    check_selected_and_rows(p, plan, S, lists, refine_k,
                            opens ? std::vector<int>(static_cast<std::size_t>(p.ref.n), 0) : pruned.guaranteed);
    check_plan_invariants(p, plan, policy);
  }
}

template <class Runner>
void budget_stages_equal_naive_depth() {
  std::mt19937 rng(9002);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const problem p = small_random_problem(rng);
    const int k = p.top_k, E = p.ref.E;
    const int deepest = uniform(0, k);  // 0: the model's top-k
    const int deepest_k = deepest == 0 ? k : deepest;
    const int refine_k = uniform(deepest_k, k);
    const bool latency = trial % 2 == 1;
    // Quarter steps: exact in float, so the text and the naive model read the same numbers.
    const float t_fetch = static_cast<float>(uniform(1, 8)) / 4.0f, t_token = static_cast<float>(uniform(0, 4)) / 4.0f;
    const int budget = uniform(1, E);
    const float target = static_cast<float>(uniform(1, 4 * (E + 40 * k))) / 4.0f;
    const std::string stage =
        latency ? "prune_to_latency(target=" + std::to_string(target) + ",t_fetch=" + std::to_string(t_fetch) +
                      ",t_token=" + std::to_string(t_token) + ",k=" + std::to_string(deepest) + ")"
                : "prune_to_budget(budget=" + std::to_string(budget) + ",k=" + std::to_string(deepest) + ")";
    const std::string text = stage + " | refine(k=" + std::to_string(refine_k) + ")";
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const naive_top_lists lists = naive_lists(p, false);
    int valid = 0;
    for (int i = 0; i < p.ref.n; ++i) valid += p.ref.valid(i) ? 1 : 0;
    const auto fits = [&](int loaded) {
      if (!latency) return loaded <= budget;
      const double assignments = static_cast<double>(valid) * std::min(deepest_k, loaded);
      return loaded * static_cast<double>(t_fetch) + assignments * static_cast<double>(t_token) <=
             static_cast<double>(target);
    };
    int depth = 1;  // the largest depth that fits, by trying every one
    for (int d = 1; d <= deepest_k; ++d) {
      const auto U = naive_union(p, lists, d);
      if (fits(static_cast<int>(std::count(U.begin(), U.end(), true)))) depth = d;
    }
    // Every valid token's best `depth` ranks guaranteed, whatever their p: the naive
    // per_request with no addition (prune would end a baseline at a NaN p).
    naive::policy reference{.sets = {naive::stage{.kind = "per_request", .k0 = depth}}, .k = refine_k};
    const mr::routing_plan plan = route_on<Runner>(p, policy);
    check_against_naive(plan, naive::route(p.ref, reference, k), text);
    check_plan_invariants(p, plan, policy);
  }
}

template <class Runner>
void coverage_greedy_with_the_model_k_is_greedy_mass() {
  std::mt19937 rng(9003);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 150; ++trial) {
    const problem p = small_random_problem(rng);
    const std::string k0 = std::to_string(uniform(1, p.top_k)), size = std::to_string(uniform(0, p.ref.E));
    const std::string tail = ") | refine(k=" + std::to_string(p.top_k) + ")";
    CAPTURE(k0);
    CAPTURE(size);
    const auto coverage =
        route_on<Runner>(p, mr::parse_policy_or_throw("prune(k0=" + k0 + ") | coverage_greedy(size=" + size + tail));
    const auto mass =
        route_on<Runner>(p, mr::parse_policy_or_throw("prune(k0=" + k0 + ") | greedy_mass(size=" + size + tail));
    CHECK(selected_of(p, coverage) == selected_of(p, mass));
  }
}

/// E = 4, top-k 2, probabilities (p = the numbers), tokens use k = 1 expert:
///
///   expert:    0    1    2    3     sparse gates = p (each row's top-2 sums to 1)
///   token 0:  .6   .4    0    0     c: e0 1.2, e1 .8, e2 .7, e3 .3
///   token 1:  .6   .4    0    0
///   token 2:   0    0   .7   .3
///
/// greedy_mass(size=2) takes e0 and e1 by c: S = {0, 1}; token 2 has nothing of its own
/// and takes e0 (p = 0). F(S) with k = 1: .6 + .6 + 0 = 1.2.
/// coverage_greedy(size=2, k=1): round 1 gains are c, e0 (1.2) joins; round 2: e1 would
/// give tokens 0 and 1 nothing (.4 < their .6 already held), e2 gives token 2 .7, e3 .3:
/// e2 joins. S = {0, 2}, F = .6 + .6 + .7 = 1.9, strictly more.
template <class Runner>
void hand_coverage_beats_greedy_mass() {
  const problem p =
      problem_from_rows({.6f, .4f, 0, 0, .6f, .4f, 0, 0, 0, 0, .7f, .3f}, 4, 2, naive::mode::probabilities);
  mr::routing_plan coverage, mass;
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("coverage_greedy(size=2,k=1) | refine(k=1)"), p, &coverage) ==
        rows{{0}, {0}, {2}});
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("greedy_mass(size=2) | refine(k=1)"), p, &mass) ==
        rows{{0}, {0}, {0}});
  const naive_top_lists lists = naive_lists(p, false);
  const std::int64_t f_coverage = naive_coverage(p, lists, selected_of(p, coverage), 1);
  const std::int64_t f_mass = naive_coverage(p, lists, selected_of(p, mass), 1);
  CHECK(coverage.summary().selected_count == mass.summary().selected_count);
  CHECK(f_coverage > f_mass);
  CHECK(static_cast<double>(f_coverage) / 4294967296.0 == doctest::Approx(1.9).epsilon(1e-6));
  CHECK(static_cast<double>(f_mass) / 4294967296.0 == doctest::Approx(1.2).epsilon(1e-6));
}

/// On the hand table (docs/policies.md; k = 3), after prune(k0=1) (S = {0,1,3}; token 0
/// holds e0 .556 e1 .333, token 1 e1 .471 e3 .118, token 2 e3 .667), k = 1 and add = 1:
/// e2 would give token 1 nothing (.412 < .471 held) and token 0 nothing; e4 gives token 2
/// nothing (.222 < .667); e5 nothing: no gain is positive, S stays {0,1,3}, where
/// greedy_mass(add=1) adds e2 (c .523). With k = 2: token 0 already holds two (its 2nd,
/// e1 .333, outweighs e2's .111: 0); token 1's e2 .412 replaces e3 .118 (+.294); token 2
/// holds one, so e4 adds .222 and e5 .111: e2 joins, and token 2 (ranks 3 4 5 2 1 0) takes
/// {3, 2, 1}.
template <class Runner>
void hand_coverage_greedy() {
  mr::routing_plan plan;
  assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | coverage_greedy(add=1,k=1) | refine(k=3)"),
                   hand_table_problem(), &plan);
  CHECK(plan.summary().selected_count == 3);
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | coverage_greedy(add=1,k=2) | refine(k=3)"),
                         hand_table_problem(), &plan) == rows{{0, 1, 2}, {1, 2, 3}, {3, 2, 1}});
  CHECK(plan.summary().selected_count == 4);
  CHECK(plan.guaranteed(2) == 1);
}

/// The hand table's unions by depth: k0 = 1 gives {0,1,3} (3 experts), k0 = 2 adds e2 and
/// e4 (5), k0 = 3 all 6.
/// - budget 5: k0 = 2 fits, 3 does not: B = {0,1} {1,2} {3,4}, S = {0,1,2,3,4}; refine(k=3)
///   rows {0,1,2} {1,2,3} {3,4,2}, two ranks guaranteed.
/// - budget 3: k0 = 1, OEA's {0,1,3}: rows {0,1,3} {1,3,0} {3,1,0}.
/// - budget 2: even k0 = 1 needs 3 experts; k0 = 1 all the same.
/// - latency, t_fetch 1, t_token .25, 3 tokens taking min(3, |union|) = 3 experts each:
///   T(1) = 3 + 2.25 = 5.25, T(2) = 7.25, T(3) = 8.25. target 8 gives k0 = 2, 7 gives 1.
template <class Runner>
void hand_prune_to_budget_and_latency() {
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune_to_budget(budget=5) | refine(k=3)"), hand_table_problem(),
                         &plan) == rows{{0, 1, 2}, {1, 2, 3}, {3, 4, 2}});
  CHECK(plan.guaranteed(0) == 2);
  CHECK(plan.summary().selected_count == 5);
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune_to_budget(budget=3) | refine(k=3)"), hand_table_problem(),
                         &plan) == rows{{0, 1, 3}, {1, 3, 0}, {3, 1, 0}});
  CHECK(plan.guaranteed(1) == 1);
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune_to_budget(budget=2) | refine(k=3)"), hand_table_problem(),
                         &plan) == rows{{0, 1, 3}, {1, 3, 0}, {3, 1, 0}});
  CHECK(plan.summary().selected_count == 3);
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune_to_latency(target=8,t_fetch=1,t_token=0.25) | refine(k=3)"),
                         hand_table_problem(), &plan) == rows{{0, 1, 2}, {1, 2, 3}, {3, 4, 2}});
  CHECK(plan.guaranteed(2) == 2);
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune_to_latency(target=7,t_fetch=1,t_token=0.25) | refine(k=3)"),
                         hand_table_problem(), &plan) == rows{{0, 1, 3}, {1, 3, 0}, {3, 1, 0}});
  // k caps the depth: k = 1 is OEA's k0 = 1 whatever the budget.
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune_to_budget(budget=6,k=1) | refine(k=3)"), hand_table_problem(),
                         &plan) == rows{{0, 1, 3}, {1, 3, 0}, {3, 1, 0}});
}

/// A budget stage whose deepest guarantee is the model's top-k (k = 0, here 3) cannot be
/// followed by a refine that assigns fewer: refused when bound, naming both.
template <class Runner>
void budget_guarantee_deeper_than_refine_is_refused() {
  const problem p = hand_table_problem();
  mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k});
  const mr::status s = Runner::route(mr::parse_policy_or_throw("prune_to_budget(budget=4) | refine(k=2)"), p, plan);
  CHECK(Runner::reports(s,
                        "invalid parameter: refine.k = 2: must reach the deepest guarantee (a k of 0 there is the "
                        "model's top-k), prune_to_budget.k = 3"));
}

}  // namespace test::bodies

/// The coverage_greedy and budget-stage cases on `Runner`.
#define MOE_ROUTING_COVERAGE_BUDGET_TESTS(Runner)                                                                \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "coverage_greedy equals a plain greedy on F from its definition",        \
                                test::bodies::coverage_greedy_equals_plain_greedy<Runner>())                     \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "prune_to_budget and prune_to_latency equal prune at the naive depth",   \
                                test::bodies::budget_stages_equal_naive_depth<Runner>())                         \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "coverage_greedy with the model's k selects what greedy_mass selects",   \
                                test::bodies::coverage_greedy_with_the_model_k_is_greedy_mass<Runner>())         \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "coverage_greedy by hand: F strictly above greedy_mass's at equal |S|",  \
                                test::bodies::hand_coverage_beats_greedy_mass<Runner>())                         \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "coverage_greedy by hand: gains past the k-th held expert",              \
                                test::bodies::hand_coverage_greedy<Runner>())                                    \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "prune_to_budget and prune_to_latency by hand: the depth per batch",     \
                                test::bodies::hand_prune_to_budget_and_latency<Runner>())                        \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "a budget stage guaranteeing more ranks than refine assigns is refused", \
                                test::bodies::budget_guarantee_deeper_than_refine_is_refused<Runner>())

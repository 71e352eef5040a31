#pragma once
// Expert-parallel levelling (`ep_level`) on every backend runner: against naive
// references written here from its definition, the levelling property itself, hand-worked
// examples, and SPEC section 6's invariants on policies that use it.

#include <algorithm>
#include <cstdint>
#include <numeric>
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

/// Each device's count of experts in `set` under `p`'s placement.
inline std::vector<int> naive_device_loads(const problem& p, const std::vector<bool>& set) {
  std::vector<int> load(static_cast<std::size_t>(p.ref.G), 0);
  for (int e = 0; e < p.ref.E; ++e)
    if (set[static_cast<std::size_t>(e)]) ++load[static_cast<std::size_t>(p.ref.placement[e])];
  return load;
}

/// ep_level from its definition, on a problem of probabilities (p = input): S0 = the union
/// of every valid token's best k0 (prune), then each device below the busiest one adds its
/// experts outside S0 with positive sparse mass, heaviest first (ties to the lower index),
/// until it reaches the busiest one's load; then every token takes its best k in S.
inline naive::plan naive_oea_levelled(const problem& p, int k0, int k) {
  const int n = p.ref.n, E = p.ref.E, top_k = p.top_k;
  std::vector<std::vector<int>> order(static_cast<std::size_t>(n));
  std::vector<bool> S(static_cast<std::size_t>(E), false);
  std::vector<std::int64_t> mass(static_cast<std::size_t>(E), 0);
  for (int i = 0; i < n; ++i) {
    if (!p.ref.valid(i)) continue;
    const float* x = &p.ref.x[static_cast<std::size_t>(i) * E];
    auto& o = order[static_cast<std::size_t>(i)];
    for (int e = 0; e < E; ++e) o.push_back(e);
    std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return x[a] > x[b]; });
    for (int j = 0; j < k0; ++j) S[static_cast<std::size_t>(o[static_cast<std::size_t>(j)])] = true;
    float sum = 0;
    for (int j = 0; j < top_k; ++j) sum += std::max(0.0f, x[o[static_cast<std::size_t>(j)]]);
    for (int j = 0; j < top_k; ++j) {
      const int e = o[static_cast<std::size_t>(j)];
      mass[static_cast<std::size_t>(e)] += naive::fixed(std::max(0.0f, x[e]) / sum);
    }
  }
  std::vector<int> load = naive_device_loads(p, S);
  const int most = load.empty() ? 0 : *std::max_element(load.begin(), load.end());
  for (int g = 0; g < p.ref.G; ++g) {
    while (load[static_cast<std::size_t>(g)] < most) {
      int best = -1;
      for (int e = 0; e < E; ++e) {
        const auto at = static_cast<std::size_t>(e);
        if (S[at] || p.ref.placement[e] != g || mass[at] <= 0) continue;
        if (best < 0 || mass[at] > mass[static_cast<std::size_t>(best)]) best = e;
      }
      if (best < 0) break;
      S[static_cast<std::size_t>(best)] = true;
      ++load[static_cast<std::size_t>(g)];
    }
  }
  naive::plan out;
  out.n = n;
  out.k = top_k;
  out.S = S;
  out.ids.assign(static_cast<std::size_t>(n) * top_k, -1);
  out.counts.assign(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    if (!p.ref.valid(i)) continue;
    int c = 0;
    for (const int e : order[static_cast<std::size_t>(i)]) {
      if (c == k) break;
      if (S[static_cast<std::size_t>(e)]) out.ids[static_cast<std::size_t>(i) * top_k + c++] = e;
    }
    out.counts[static_cast<std::size_t>(i)] = c;
  }
  return out;
}

/// S, and each token's count and ids, equal the naive plan's (its weights are not computed).
inline void require_selection_and_rows(const problem& p, const mr::routing_plan& got, const naive::plan& want) {
  for (int e = 0; e < p.ref.E; ++e) REQUIRE(got.summary().selected.contains(e) == want.S[static_cast<std::size_t>(e)]);
  for (int i = 0; i < p.ref.n; ++i) {
    REQUIRE(got.count(i) == want.counts[static_cast<std::size_t>(i)]);
    for (int j = 0; j < got.count(i); ++j) REQUIRE(got.id(i, j) == want.ids[static_cast<std::size_t>(i) * p.top_k + j]);
  }
}

/// A random problem of probabilities with a random placement over 1..`max_devices` devices.
inline problem random_placed_probabilities(std::mt19937& rng, int max_devices) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int experts_choices[] = {4, 8, 16, 64, 256};
  const int E = experts_choices[uniform(0, 4)];
  const int n = uniform(1, 40);
  std::vector<float> values(static_cast<std::size_t>(n) * E);
  for (auto& v : values) v = std::uniform_real_distribution<float>(0.001f, 1.0f)(rng);
  problem p = problem_from_rows(values, E, uniform(1, std::min(E, 8)), naive::mode::probabilities);
  const int G = uniform(1, std::min(E, max_devices));
  std::vector<std::int32_t> placement(static_cast<std::size_t>(E));
  for (auto& d : placement) d = uniform(0, G - 1);
  set_placement(p, G, placement);
  return p;
}

template <class Runner>
void ep_level_equals_naive_reference() {
  std::mt19937 rng(5151);
  for (int trial = 0; trial < 300; ++trial) {
    const problem p = random_placed_probabilities(rng, 16);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const std::string text =
        "prune(k0=" + std::to_string(k0) + ") | ep_level() | refine(k=" + std::to_string(p.top_k) + ")";
    CAPTURE(text);
    const naive::plan want = naive_oea_levelled(p, k0, p.top_k);
    const mr::routing_plan got = route_on<Runner>(p, mr::parse_policy_or_throw(text));
    require_selection_and_rows(p, got, want);
  }
}

/// On the library's random problems (every scoring mode, masks, groups, both gates, after
/// any opening stage): ep_level equals the naive router's ep_fill with m_g set to the
/// busiest device's load of the naive S before it (the two fill each device the same way
/// up to that target).
template <class Runner>
void ep_level_equals_ep_fill_to_the_busiest_load() {
  std::mt19937 rng(6262);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    problem p = random_problem(rng);
    if (p.placement.empty()) {
      const int G = std::uniform_int_distribution<int>(1, 8)(rng);
      std::vector<std::int32_t> placement(static_cast<std::size_t>(p.ref.E));
      for (auto& d : placement) d = std::uniform_int_distribution<int>(0, G - 1)(rng);
      set_placement(p, G, placement);
    }
    p.ref.prefill = false;
    const bool dense = std::bernoulli_distribution(0.5)(rng);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const std::string before = std::bernoulli_distribution(0.5)(rng)
                                   ? "prune(k0=" + std::to_string(k0) + ")"
                                   : "per_request(k0=" + std::to_string(k0) + ",m_r=1) | ep_fill(m_g=1)";
    const std::string text =
        before + " | ep_level(" + (dense ? "gate=dense" : "") + ") | refine(k=" + std::to_string(p.top_k) + ")";
    CAPTURE(text);
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    naive::policy opening = to_naive(policy);
    opening.sets.pop_back();
    const naive::plan first = naive::route(p.ref, opening, p.top_k);
    const std::vector<int> load = naive_device_loads(p, first.S);
    naive::policy filled = opening;
    filled.sets.push_back({.kind = "ep_fill", .m_g = *std::max_element(load.begin(), load.end()), .dense = dense});
    check_against_naive(route_on<Runner>(p, policy), naive::route(p.ref, filled, p.top_k), text);
    check_plan_invariants(p, route_on<Runner>(p, policy), policy);
    ++compared;
  }
  CHECK(compared > 300);
}

/// After ep_level no device is below the busiest one's load unless none of its experts
/// outside S has mass (on probabilities, sparse gate: is in a valid token's top-k), and
/// the busiest load is the one before ep_level.
template <class Runner>
void ep_level_leaves_no_device_below_the_busiest() {
  std::mt19937 rng(7373);
  for (int trial = 0; trial < 300; ++trial) {
    const problem p = random_placed_probabilities(rng, 32);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const std::string K = std::to_string(p.top_k);
    const auto before =
        route_on<Runner>(p, mr::parse_policy_or_throw("prune(k0=" + std::to_string(k0) + ") | refine(k=" + K + ")"));
    const auto after = route_on<Runner>(
        p, mr::parse_policy_or_throw("prune(k0=" + std::to_string(k0) + ") | ep_level() | refine(k=" + K + ")"));
    std::vector<bool> S0(static_cast<std::size_t>(p.ref.E)), S(static_cast<std::size_t>(p.ref.E)),
        candidate(static_cast<std::size_t>(p.ref.E), false);
    for (int e = 0; e < p.ref.E; ++e) {
      S0[static_cast<std::size_t>(e)] = before.summary().selected.contains(e);
      S[static_cast<std::size_t>(e)] = after.summary().selected.contains(e);
      if (S0[static_cast<std::size_t>(e)]) REQUIRE(S[static_cast<std::size_t>(e)]);  // only adds
    }
    for (int i = 0; i < p.ref.n; ++i) {
      const auto order = hand_ranking(p, i);
      for (int j = 0; j < p.top_k; ++j) candidate[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] = true;
    }
    const std::vector<int> load0 = naive_device_loads(p, S0), load = naive_device_loads(p, S);
    const int most = *std::max_element(load0.begin(), load0.end());
    REQUIRE(*std::max_element(load.begin(), load.end()) == most);
    for (int g = 0; g < p.ref.G; ++g) {
      CAPTURE(g);
      if (load[static_cast<std::size_t>(g)] == most) continue;
      for (int e = 0; e < p.ref.E; ++e) {
        if (p.ref.placement[e] == g)
          REQUIRE(!(candidate[static_cast<std::size_t>(e)] && !S[static_cast<std::size_t>(e)]));
      }
    }
  }
}

template <class Runner>
void hand_ep_level() {
  // Devices {e0,e1} {e2,e3} {e4,e5}. prune(k0=1): S0 = {0,1,3}, loads {2,1,0}. Levelled to
  // 2: device 1 adds e2 (its only candidate), device 2 adds e4 then e5 (c .222 > .111).
  problem p = hand_table_problem();
  set_placement(p, 3, {0, 0, 1, 1, 2, 2});
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | ep_level() | refine(k=2)"), p, &plan) ==
        rows{{0, 1}, {1, 2}, {3, 4}});
  CHECK(plan.summary().selected_count == 6);
  CHECK(plan.summary().max_device_load == 2);
  CHECK(plan.device_loads() == std::vector<std::int32_t>{2, 2, 1});  // e5 is in S but no row takes it

  // Composed with ep_fill(m_g=1): device 2 takes e4 first, levelling adds e2 and e5.
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | ep_fill(m_g=1) | ep_level() | refine(k=2)"), p,
                         &plan) == rows{{0, 1}, {1, 2}, {3, 4}});
  CHECK(plan.summary().selected_count == 6);
}

template <class Runner>
void hand_ep_level_runs_out_of_candidates() {
  // Devices {e0..e4} {e5}. prune(k0=1): S0 = {0,1,3}, loads {3,0}: device 1 adds e5 (c .111)
  // and stays below 3, having nothing else.
  problem p = hand_table_problem();
  set_placement(p, 2, {0, 0, 0, 0, 0, 1});
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | ep_level() | refine(k=2)"), p, &plan) ==
        rows{{0, 1}, {1, 3}, {3, 5}});
  CHECK(plan.summary().selected_count == 4);
  CHECK(plan.device_loads() == std::vector<std::int32_t>{3, 1});
  // Already level (one device): nothing to add.
  set_placement(p, 1, {0, 0, 0, 0, 0, 0});
  assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | ep_level(gate=dense) | refine(k=2)"), p, &plan);
  CHECK(plan.summary().selected_count == 3);
}

// ---- redundant experts (EPLB) ----

/// Gives `p` a replica map: `physical_to_logical` over `devices` devices (slots spread
/// evenly, in order), its rows in slot order, and the placement of each first replica.
inline void set_replicas(problem& p, int devices, const std::vector<std::int32_t>& physical_to_logical,
                         mr::replica_choice rule = mr::replica_choice::token_modulo) {
  const int E = p.ref.E, P = static_cast<int>(physical_to_logical.size());
  p.replica_p2l = physical_to_logical;
  p.replica_counts.assign(static_cast<std::size_t>(E), 0);
  for (const auto e : physical_to_logical) ++p.replica_counts[static_cast<std::size_t>(e)];
  p.replica_width = *std::max_element(p.replica_counts.begin(), p.replica_counts.end());
  p.replica_l2p.assign(static_cast<std::size_t>(E) * p.replica_width, -1);
  std::vector<int> filled(static_cast<std::size_t>(E), 0);
  std::vector<std::int32_t> placement(static_cast<std::size_t>(E), -1);
  for (int slot = 0; slot < P; ++slot) {
    const auto e = static_cast<std::size_t>(physical_to_logical[static_cast<std::size_t>(slot)]);
    if (filled[e] == 0) placement[e] = slot / (P / devices);
    p.replica_l2p[e * p.replica_width + filled[e]++] = slot;
  }
  p.replica_rule = rule;
  set_placement(p, devices, placement);
}

/// A random map for `p`: every expert once plus up to 2 E extra replicas, shuffled over
/// P slots (a multiple of G).
inline void set_random_replicas(problem& p, std::mt19937& rng, int devices) {
  const int E = p.ref.E;
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int P = std::min(E + uniform(0, 2 * E), mr::max_experts);
  P -= P % devices;
  while (P < E) P += devices;
  std::vector<std::int32_t> slots;
  for (int e = 0; e < E; ++e) slots.push_back(e);
  while (static_cast<int>(slots.size()) < P) slots.push_back(uniform(0, E - 1));
  std::shuffle(slots.begin(), slots.end(), rng);
  set_replicas(
      p, devices, slots,
      std::bernoulli_distribution(0.5)(rng) ? mr::replica_choice::least_loaded : mr::replica_choice::token_modulo);
}

/// Each physical slot's device, each device's slots of the experts in `set` (every
/// replica of a selected expert counts).
inline std::vector<int> naive_slot_loads(const problem& p, const std::vector<bool>& set) {
  const int P = static_cast<int>(p.replica_p2l.size());
  std::vector<int> load(static_cast<std::size_t>(p.ref.G), 0);
  for (int slot = 0; slot < P; ++slot)
    if (set[static_cast<std::size_t>(p.replica_p2l[static_cast<std::size_t>(slot)])])
      ++load[static_cast<std::size_t>(slot / (P / p.ref.G))];
  return load;
}

/// ep_level with replicas from its definition, on probabilities: S0 = prune(k0); M = the
/// busiest device's slots of S0; candidates (outside S, positive sparse mass) by mass
/// descending then index; each taken when adding all its slots leaves every device at most
/// M. Then every token takes its best k in S.
inline naive::plan naive_oea_levelled_with_replicas(const problem& p, int k0, int k) {
  naive::plan out = naive_oea_levelled(p, k0, k);  // for the mass order only: recompute S
  const int n = p.ref.n, E = p.ref.E, top_k = p.top_k;
  std::vector<bool> S(static_cast<std::size_t>(E), false);
  std::vector<std::int64_t> mass(static_cast<std::size_t>(E), 0);
  std::vector<std::vector<int>> order(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float* x = &p.ref.x[static_cast<std::size_t>(i) * E];
    auto& o = order[static_cast<std::size_t>(i)];
    for (int e = 0; e < E; ++e) o.push_back(e);
    std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return x[a] > x[b]; });
    for (int j = 0; j < k0; ++j) S[static_cast<std::size_t>(o[static_cast<std::size_t>(j)])] = true;
    float sum = 0;
    for (int j = 0; j < top_k; ++j) sum += x[o[static_cast<std::size_t>(j)]];
    for (int j = 0; j < top_k; ++j)
      mass[static_cast<std::size_t>(o[static_cast<std::size_t>(j)])] +=
          naive::fixed(x[o[static_cast<std::size_t>(j)]] / sum);
  }
  const std::vector<int> load0 = naive_slot_loads(p, S);
  const int most = *std::max_element(load0.begin(), load0.end());
  std::vector<int> candidates;
  for (int e = 0; e < E; ++e)
    if (!S[static_cast<std::size_t>(e)] && mass[static_cast<std::size_t>(e)] > 0) candidates.push_back(e);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int a, int b) { return mass[static_cast<std::size_t>(a)] > mass[static_cast<std::size_t>(b)]; });
  for (const int e : candidates) {
    std::vector<bool> with = S;
    with[static_cast<std::size_t>(e)] = true;
    const std::vector<int> load = naive_slot_loads(p, with);
    if (*std::max_element(load.begin(), load.end()) <= most) S = with;
  }
  out.S = S;
  for (int i = 0; i < n; ++i) {
    int c = 0;
    for (const int e : order[static_cast<std::size_t>(i)]) {
      if (c == k) break;
      if (S[static_cast<std::size_t>(e)]) out.ids[static_cast<std::size_t>(i) * top_k + c++] = e;
    }
    out.counts[static_cast<std::size_t>(i)] = c;
  }
  return out;
}

/// XShare's ep_fill with replicas from its definition, on probabilities: S0 = prune(k0);
/// rounds over devices 0..G-1, each whose slots of S number fewer than m_g adds its
/// heaviest expert outside S with a replica on it (positive sparse mass, ties to the lower
/// index); loads recounted from S every time; until a round adds nothing.
inline std::vector<bool> naive_oea_filled_with_replicas(const problem& p, int k0, int m_g) {
  const int E = p.ref.E, top_k = p.top_k, P = static_cast<int>(p.replica_p2l.size()), G = p.ref.G;
  std::vector<bool> S(static_cast<std::size_t>(E), false);
  std::vector<std::int64_t> mass(static_cast<std::size_t>(E), 0);
  for (int i = 0; i < p.ref.n; ++i) {
    const float* x = &p.ref.x[static_cast<std::size_t>(i) * E];
    std::vector<int> o(static_cast<std::size_t>(E));
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return x[a] > x[b]; });
    for (int j = 0; j < k0; ++j) S[static_cast<std::size_t>(o[static_cast<std::size_t>(j)])] = true;
    float sum = 0;
    for (int j = 0; j < top_k; ++j) sum += x[o[static_cast<std::size_t>(j)]];
    for (int j = 0; j < top_k; ++j)
      mass[static_cast<std::size_t>(o[static_cast<std::size_t>(j)])] +=
          naive::fixed(x[o[static_cast<std::size_t>(j)]] / sum);
  }
  const auto on_device = [&](int e, int g) {
    for (int slot = g * (P / G); slot < (g + 1) * (P / G); ++slot)
      if (p.replica_p2l[static_cast<std::size_t>(slot)] == e) return true;
    return false;
  };
  for (bool added = true; added;) {
    added = false;
    for (int g = 0; g < G; ++g) {
      if (naive_slot_loads(p, S)[static_cast<std::size_t>(g)] >= m_g) continue;
      int best = -1;
      for (int e = 0; e < E; ++e) {
        const auto at = static_cast<std::size_t>(e);
        if (S[at] || mass[at] <= 0 || !on_device(e, g)) continue;
        if (best < 0 || mass[at] > mass[static_cast<std::size_t>(best)]) best = e;
      }
      if (best >= 0) {
        S[static_cast<std::size_t>(best)] = true;
        added = true;
      }
    }
  }
  return S;
}

/// The physical ids and device loads a plan's assignments get, from the rules' definitions.
inline void check_dispatch(const problem& p, const mr::routing_plan& plan) {
  const int P = static_cast<int>(p.replica_p2l.size()), G = p.ref.G, k = p.top_k;
  std::vector<int> tokens_on(static_cast<std::size_t>(G), 0), load(static_cast<std::size_t>(G), 0);
  std::vector<bool> used(static_cast<std::size_t>(P), false);
  for (int i = 0; i < p.ref.n; ++i) {
    for (int j = 0; j < plan.count(i); ++j) {
      const int e = plan.id(i, j);
      std::vector<int> replicas;  // in row order: slot order
      for (int slot = 0; slot < P; ++slot)
        if (p.replica_p2l[static_cast<std::size_t>(slot)] == e) replicas.push_back(slot);
      int want = replicas[static_cast<std::size_t>(i) % replicas.size()];
      if (p.replica_rule == mr::replica_choice::least_loaded) {
        want = replicas[0];
        for (const int slot : replicas)
          if (tokens_on[static_cast<std::size_t>(slot / (P / G))] < tokens_on[static_cast<std::size_t>(want / (P / G))])
            want = slot;
      }
      const int got = plan.physical_id(i, j);
      REQUIRE(p.replica_p2l[static_cast<std::size_t>(got)] == e);  // maps back to its logical id
      REQUIRE(got == want);
      ++tokens_on[static_cast<std::size_t>(got / (P / G))];
      if (!used[static_cast<std::size_t>(got)]) ++load[static_cast<std::size_t>(got / (P / G))];
      used[static_cast<std::size_t>(got)] = true;
    }
    for (int j = plan.count(i); j < k; ++j) REQUIRE(plan.physical_id(i, j) == plan.id(i, j));  // sentinel kept
  }
  for (int g = 0; g < G; ++g)
    REQUIRE(plan.device_loads()[static_cast<std::size_t>(g)] == load[static_cast<std::size_t>(g)]);
  REQUIRE(plan.summary().max_device_load == *std::max_element(load.begin(), load.end()));
}

template <class Runner>
void replicas_dispatch_and_count_physical_loads() {
  std::mt19937 rng(9191);
  for (int trial = 0; trial < 300; ++trial) {
    problem p = random_problem(rng, {.max_experts = 256});
    const int G = std::uniform_int_distribution<int>(1, std::min(8, p.ref.E))(rng);
    set_random_replicas(p, rng, G);
    const std::string K = std::to_string(p.top_k);
    const std::string texts[] = {"topk(k=" + K + ")", "prune(k0=1) | refine(k=" + K + ")",
                                 "prune(k0=1) | ep_fill(m_g=3) | refine(k=" + K + ")",
                                 "prune(k0=1) | ep_level() | refine(k=" + K + ")"};
    const std::string& text = texts[std::uniform_int_distribution<int>(0, 3)(rng)];
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const mr::routing_plan plan = route_on<Runner>(p, policy);
    check_plan_invariants(p, plan, policy);
    check_dispatch(p, plan);
    if (text.find("ep_") == std::string::npos) {  // replicas change no logical decision
      problem plain = p;
      plain.replica_p2l.clear();
      const mr::routing_plan without = route_on<Runner>(plain, policy);
      REQUIRE(without.ids() == plan.ids());
    }
  }
}

template <class Runner>
void ep_level_with_replicas_equals_naive_reference() {
  std::mt19937 rng(9292);
  for (int trial = 0; trial < 300; ++trial) {
    problem p = random_placed_probabilities(rng, 8);
    set_random_replicas(p, rng, p.ref.G);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const std::string text =
        "prune(k0=" + std::to_string(k0) + ") | ep_level() | refine(k=" + std::to_string(p.top_k) + ")";
    CAPTURE(text);
    const naive::plan want = naive_oea_levelled_with_replicas(p, k0, p.top_k);
    const mr::routing_plan got = route_on<Runner>(p, mr::parse_policy_or_throw(text));
    require_selection_and_rows(p, got, want);
    check_dispatch(p, got);
  }
}

template <class Runner>
void ep_fill_with_replicas_equals_naive_reference() {
  std::mt19937 rng(9393);
  for (int trial = 0; trial < 300; ++trial) {
    problem p = random_placed_probabilities(rng, 8);
    set_random_replicas(p, rng, p.ref.G);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const int m_g = std::uniform_int_distribution<int>(0, 8)(rng);
    const std::string text = "prune(k0=" + std::to_string(k0) + ") | ep_fill(m_g=" + std::to_string(m_g) +
                             ") | refine(k=" + std::to_string(p.top_k) + ")";
    CAPTURE(text);
    const std::vector<bool> want = naive_oea_filled_with_replicas(p, k0, m_g);
    const mr::routing_plan got = route_on<Runner>(p, mr::parse_policy_or_throw(text));
    for (int e = 0; e < p.ref.E; ++e) REQUIRE(got.summary().selected.contains(e) == want[static_cast<std::size_t>(e)]);
    check_dispatch(p, got);
  }
}

template <class Runner>
void hand_replicas() {
  // The hand table over 2 devices, slots {e0, e1, e3 | e2, e3, e4, ... }: P = 8, 4 per
  // device: device 0 = {e0, e1, e3, e5}, device 1 = {e2, e3, e4, e0}: e0 and e3 twice.
  problem p = hand_table_problem();
  set_replicas(p, 2, {0, 1, 3, 5, 2, 3, 4, 0});
  mr::routing_plan plan;
  // Vanilla top-3 rows {0,1,2} {1,2,3} {3,4,5}. Modulo: t0's e0 -> slot 0 (0 mod 2); t1's
  // e3 -> its replica 1 = slot 5; t2's e3 -> replica 0 = slot 2 (2 mod 2).
  CHECK(assigned<Runner>(mr::presets::vanilla(3), p, &plan) == rows{{0, 1, 2}, {1, 2, 3}, {3, 4, 5}});
  CHECK(plan.physical_ids() == std::vector<std::int32_t>{0, 1, 4, 1, 4, 5, 2, 6, 3});
  CHECK(plan.device_loads() == std::vector<std::int32_t>{4, 3});  // {0,1,2,3} and {4,5,6}
  CHECK(plan.summary().max_device_load == 4);
  // ep_level after prune(k0=1): S0 = {0,1,3}: slots device 0 {0,1,2}, device 1 {5, 7} ->
  // loads {3, 2}, M = 3. By mass: e2 (.523) has its slot on device 1 -> {3, 3}: taken;
  // e4 (.222) on device 1 -> 4 > 3: not; e5 (.111) on device 0 -> 4: not.
  CHECK(assigned<Runner>(mr::parse_policy_or_throw("prune(k0=1) | ep_level() | refine(k=2)"), p, &plan) ==
        rows{{0, 1}, {1, 2}, {3, 2}});
  CHECK(plan.summary().selected_count == 4);
  // Rows {0,1} {1,2} {3,2}: t0 e0 -> slot 0, t1 -> e1 slot 1, e2 slot 4; t2 e3 -> slot 2.
  CHECK(plan.device_loads() == std::vector<std::int32_t>{3, 1});
}

template <class Runner>
void replica_map_errors_name_parameter_and_value() {
  problem p = hand_table_problem();
  set_replicas(p, 2, {0, 1, 3, 5, 2, 3, 4, 0});
  mr::routing_plan plan({.tokens = 3, .experts = 6, .top_k = 3, .devices = 2});
  p.replica_width = 0;  // a shape fault: every backend checks it on the host
  CHECK(Runner::reports(Runner::route(mr::presets::vanilla(3), p, plan),
                        "shape mismatch: replicas.max_replicas = 0: must be in [1, physical_count - E + 1] "
                        "replicas.physical_count = 8"));
  set_replicas(p, 2, {0, 1, 3, 5, 2, 3, 4, 0});
  p.ref.G = 4;                 // the batch's devices differ from the map's
  p.replica_p2l.push_back(0);  // (a ninth slot, so that 4 devices would not divide 8)
  CHECK(!Runner::route(mr::presets::vanilla(3), p, plan).ok());
  // The map's arrays and the placement against them: the CPU reads them on the host, the
  // CUDA backend on the device (where input_status names the parameter and rule, value 0).
  set_replicas(p, 2, {0, 1, 3, 5, 2, 3, 4, 0});
  p.replica_l2p[1] = 4;  // e0's second slot named as slot 4 (it holds e2)
  CHECK(Runner::reports(Runner::route(mr::presets::vanilla(3), p, plan),
                        "invalid input: replicas.logical_to_physical[0][1] = 4: names a slot holding another expert: "
                        "physical_to_logical of it is replicas.physical_to_logical[p] = 2"));
  set_replicas(p, 2, {0, 1, 3, 5, 2, 3, 4, 0});
  p.placement[0] = 1;  // e0's first replica is slot 0, on device 0
  CHECK(Runner::reports(Runner::route(mr::presets::vanilla(3), p, plan),
                        "invalid input: placement[0] = 1: must be the device of the expert's first replica, with a "
                        "replica map: device = 0"));
  // A padding sentinel naming a logical expert would read as that expert and be dispatched
  // to one of its replicas: refused on the host (the sentinel is a host value) by both.
  set_replicas(p, 2, {0, 1, 3, 5, 2, 3, 4, 0});
  mr::routing_plan zero_sentinel(
      {.tokens = 3, .experts = 6, .top_k = 3, .devices = 2, .pad = {mr::padding_kind::sentinel, 0}});
  CHECK(mr::to_string(Runner::route(mr::presets::vanilla(3), p, zero_sentinel)) ==
        "invalid parameter: plan.pad.sentinel_value = 0: must not name a logical expert, in [0, E), with a replica "
        "map batch.E = 6");
  mr::routing_plan vllm_sentinel(
      {.tokens = 3, .experts = 6, .top_k = 3, .devices = 2, .pad = {mr::padding_kind::sentinel, 8}});
  CHECK(Runner::route(mr::presets::vanilla(3), p, vllm_sentinel).ok());  // P: names no slot
}

}  // namespace test::bodies

/// The ep_level cases on `Runner`.
#define MOE_ROUTING_EXPERT_PARALLEL_TESTS(Runner)                                                                    \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "ep_level equals a naive reference on random placed batches",                \
                                test::bodies::ep_level_equals_naive_reference<Runner>())                             \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "ep_level equals the naive ep_fill up to the busiest load, invariants hold", \
                                test::bodies::ep_level_equals_ep_fill_to_the_busiest_load<Runner>())                 \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "ep_level leaves no device below the busiest unless it has no candidate",    \
                                test::bodies::ep_level_leaves_no_device_below_the_busiest<Runner>())                 \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "ep_level by hand: devices filled up to the busiest one's load",             \
                                test::bodies::hand_ep_level<Runner>())                                               \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "ep_level by hand: a device with no candidate left stays below",             \
                                test::bodies::hand_ep_level_runs_out_of_candidates<Runner>())                        \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner,                                                                              \
                                "replicas: physical ids map back, follow the rule, loads count physical slots",      \
                                test::bodies::replicas_dispatch_and_count_physical_loads<Runner>())                  \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "replicas: ep_level equals a naive reference counting every replica",        \
                                test::bodies::ep_level_with_replicas_equals_naive_reference<Runner>())               \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "replicas: ep_fill equals a naive reference counting every replica",         \
                                test::bodies::ep_fill_with_replicas_equals_naive_reference<Runner>())                \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "replicas by hand: modulo dispatch and ep_level's busiest load",             \
                                test::bodies::hand_replicas<Runner>())                                               \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "replicas: a bad map is refused, naming the parameter and value",            \
                                test::bodies::replica_map_errors_name_parameter_and_value<Runner>())

// SPEC section 6: the invariants every backend is held to, on random problems.

#include <algorithm>
#include <numeric>
#include <random>

#include "plan_checks.hpp"

namespace {

namespace mr = test::mr;

/// A row's rank order computed here by hand (selection scores sorted, NaN last).
std::vector<int> hand_ranking(const test::problem& p, int token) {
  const naive::token_info info = naive::score_token(p.ref, token);
  return info.order;
}

void check_plan_invariants(const test::problem& p, const mr::routing_plan& plan, const mr::runtime_policy& policy) {
  const int k = p.top_k;
  for (int i = 0; i < p.ref.n; ++i) {
    CAPTURE(i);
    const int count = plan.count(i);
    REQUIRE(count <= k);                                        // 1: count <= k
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
      REQUIRE(plan.summary().selected.contains(e));             // 1: every id is in S
      REQUIRE(plan.summary().active.contains(e));
      if (j > 0) REQUIRE(rank[plan.id(i, j - 1)] < rank[e]);    // 1: distinct, in rank order
      const float w = plan.weight(i, j);
      REQUIRE(std::isfinite(w));                                // 5: no NaN, no negative
      REQUIRE(w >= 0.0f);
      sum += w;
    }
    for (int j = 0; j < plan.guaranteed(i); ++j) {              // 3: guaranteed experts assigned
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

}  // namespace

TEST_CASE("invariants 1, 3, 4, 5 hold for random policies and batches") {
  std::mt19937 rng(2468);
  for (int trial = 0; trial < 800; ++trial) {
    const test::problem p = test::random_problem(rng);
    const std::string text = test::random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    check_plan_invariants(p, test::route_problem(p, policy), policy);
  }
}

TEST_CASE("invariant 2: vanilla equals top-k sorted by hand") {
  std::mt19937 rng(1357);
  for (int trial = 0; trial < 300; ++trial) {
    test::problem p = test::random_problem(rng);
    p.ref.prefill = false;
    const auto plan = test::route_problem(p, mr::presets::vanilla(p.top_k));
    for (int i = 0; i < p.ref.n; ++i) {
      if (!p.ref.valid(i)) continue;
      const std::vector<int> order = hand_ranking(p, i);
      REQUIRE(plan.count(i) == p.top_k);
      for (int j = 0; j < p.top_k; ++j) REQUIRE(plan.id(i, j) == order[j]);
    }
  }
}

TEST_CASE("invariant 4: OEA's |active| is the size of the union of the baselines") {
  std::mt19937 rng(8642);
  for (int trial = 0; trial < 300; ++trial) {
    const test::problem p = test::random_problem(rng);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const auto plan = test::route_problem(p, mr::presets::oea(k0, p.top_k));
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

TEST_CASE("invariant 6: masked rows change nothing for the others") {
  std::mt19937 rng(1122);
  for (int trial = 0; trial < 200; ++trial) {
    test::problem_options options;
    test::problem p = test::random_problem(rng, options);
    p.ref.mask.clear();
    p.segments.clear();
    p.ref.segments.clear();
    if (p.ref.n == 0) continue;
    const std::string text = test::random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const auto plain = test::route_problem(p, policy);

    // Insert padding rows (garbage scores, mask 0) between the real ones.
    test::problem padded = p;
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
    padded.type = test::element::f32;  // the reference floats are already what p's rows hold
    test::store_scores(padded, values);
    padded.ref.mask = mask;
    const auto with_padding = test::route_problem(padded, policy);
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

TEST_CASE("invariant 7: permuting whole requests permutes the rows and nothing else") {
  std::mt19937 rng(3344);
  for (int trial = 0; trial < 200; ++trial) {
    test::problem p = test::random_problem(rng);
    if (p.ref.n == 0) continue;
    if (p.segments.empty()) {
      p.segments = {0};
      while (p.segments.back() < p.ref.n) p.segments.push_back(std::min(p.ref.n, p.segments.back() + std::uniform_int_distribution<int>(1, 4)(rng)));
      p.ref.segments.assign(p.segments.begin(), p.segments.end());
    }
    const std::string text = test::random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const auto before = test::route_problem(p, policy);

    const int requests = static_cast<int>(p.segments.size()) - 1;
    std::vector<int> permutation(requests);
    std::iota(permutation.begin(), permutation.end(), 0);
    std::shuffle(permutation.begin(), permutation.end(), rng);
    test::problem q = p;
    std::vector<float> values;
    std::vector<std::uint8_t> mask;
    std::vector<int> source_row;
    q.segments = {0};
    for (int r : permutation) {
      for (int i = p.segments[r]; i < p.segments[r + 1]; ++i) {
        for (int e = 0; e < p.ref.E; ++e) values.push_back(p.ref.x[static_cast<std::size_t>(i) * p.ref.E + e]);
        if (!p.ref.mask.empty()) mask.push_back(p.ref.mask[i]);
        source_row.push_back(i);
      }
      q.segments.push_back(static_cast<int>(source_row.size()));
    }
    q.ref.segments.assign(q.segments.begin(), q.segments.end());
    q.ref.mask = mask;
    q.type = test::element::f32;
    test::store_scores(q, values);
    const auto after = test::route_problem(q, policy);
    REQUIRE(after.summary().active == before.summary().active);
    REQUIRE(after.summary().selected == before.summary().selected);
    REQUIRE(after.expert_tokens() == before.expert_tokens());
    for (int row = 0; row < q.ref.n; ++row) {
      REQUIRE(after.count(row) == before.count(source_row[row]));
      for (int j = 0; j < p.top_k; ++j) {
        REQUIRE(after.id(row, j) == before.id(source_row[row], j));
        REQUIRE(after.weight(row, j) == before.weight(source_row[row], j));
      }
    }
  }
}

TEST_CASE("invariant 8: vanilla |active| under uniform scores follows E(1 - (1 - k/E)^n)") {
  const int experts = 256, k = 8;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (const int n : {8, 32}) {
    const double expected = experts * (1.0 - std::pow(1.0 - static_cast<double>(k) / experts, n));
    double total = 0;
    const int batches = 400;
    std::vector<float> scores(static_cast<std::size_t>(n) * experts);
    mr::cpu::workspace ws({n, experts, k});
    mr::routing_plan plan(n, k, experts);
    for (int b = 0; b < batches; ++b) {
      for (auto& s : scores) s = uniform(rng);
      mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
      batch.mode = mr::scoring::probabilities;
      REQUIRE(mr::cpu::route(mr::presets::vanilla(k), batch, plan.view(), ws).ok());
      total += plan.summary().active_count;
    }
    CAPTURE(n);
    CHECK(std::fabs(total / batches - expected) / expected < 0.01);
  }
}

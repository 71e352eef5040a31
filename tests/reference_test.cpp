// Every stage and preset against the naive router, over many random problems.

#include <random>

#include "plan_checks.hpp"

TEST_CASE("random policies agree with the naive router, id for id") {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 1500; ++trial) {
    const test::problem p = test::random_problem(rng);
    const std::string text = test::random_policy_text(rng, p);
    CAPTURE(trial);
    CAPTURE(text);
    CAPTURE(p.ref.n);
    CAPTURE(p.ref.E);
    CAPTURE(p.top_k);
    const auto policy = test::mr::parse_policy_or_throw(text);
    const auto got = test::route_problem(p, policy);
    const auto want = naive::route(p.ref, test::to_naive(policy), p.top_k);
    test::check_against_naive(got, want, text);
  }
}

TEST_CASE("large batches and expert counts agree with the naive router") {
  std::mt19937 rng(777);
  for (int trial = 0; trial < 12; ++trial) {
    test::problem_options options;
    options.max_tokens = 600;
    options.max_experts = 1024;
    const test::problem p = test::random_problem(rng, options);
    const std::string text = test::random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = test::mr::parse_policy_or_throw(text);
    test::check_against_naive(test::route_problem(p, policy, {}, std::execution::par),
                              naive::route(p.ref, test::to_naive(policy), p.top_k), text);
  }
}

TEST_CASE("compile-time presets give the same plan as their text form") {
  namespace mr = test::mr;
  std::mt19937 rng(99);
  for (int trial = 0; trial < 150; ++trial) {
    test::problem p = test::random_problem(rng);
    const int k = p.top_k, k0 = std::max(1, k / 2);
    const auto same = [&](const auto& compiled, const std::string& text) {
      CAPTURE(text);
      const auto a = test::route_problem(p, compiled);
      const auto b = test::route_problem(p, mr::parse_policy_or_throw(text));
      REQUIRE(test::identical(a, b));
      // and the runtime form of the compiled pipeline
      REQUIRE(test::identical(a, test::route_problem(p, mr::to_runtime_policy(compiled))));
    };
    const std::string K = std::to_string(k), K0 = std::to_string(k0);
    same(mr::presets::vanilla(k), "topk(k=" + K + ")");
    same(mr::presets::oea(k0, k), "oea(k0=" + K0 + ",k=" + K + ")");
    same(mr::presets::oea_general(k0, 0.5f, k, k0 + 3),
         "oea(k0=" + K0 + ",top_p=0.5,max_rank=" + std::to_string(k0 + 3) + ",k=" + K + ")");
    same(mr::presets::pruned_only(k0, k), "pruned(k0=" + K0 + ",k=" + K + ")");
    same(mr::presets::xshare_batch(k0, 5, k), "xshare(k0=" + K0 + ",m=5,k=" + K + ")");
    same(mr::presets::xshare_speculative(k0, 2, 3, k), "xshare_spec(k0=" + K0 + ",m=3,m_r=2,k=" + K + ")");
    same(mr::presets::lynx_latency(4, k), "lynx_lat(d=4,k=" + K + ")");
    same(mr::presets::lynx_accuracy(0.4f, 6, k), "lynx_acc(conf=0.4,budget=6,k=" + K + ")");
    same(mr::presets::dynamic_skipping(0.3f, k), "skip(beta=0.3,k=" + K + ")");
    same(mr::prune{.k0 = k0} | mr::greedy_mass{.mass = 0.5f} |
             mr::refine{.k = k, .weights = mr::weighting::raw, .scale = 2.0f},
         "prune(k0=" + K0 + ") | greedy_mass(mass=0.5) | refine(k=" + K + ",weights=raw,scale=2)");
    if (!p.placement.empty()) {
      same(mr::presets::xshare_expert_parallel(k0, 3, k), "xshare_ep(k0=" + K0 + ",m_g=3,k=" + K + ")");
    }
  }
}

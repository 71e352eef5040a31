// coverage_greedy, prune_to_budget and prune_to_latency on the CPU backend: the shared
// bodies (tests/bodies/coverage_budget.hpp, also run on CUDA by
// tests/cuda/backend_bodies_test.cu), their text form and their bad-input messages.

#include <string>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/cpu_backend_runner.hpp"
#include "bodies/coverage_budget.hpp"

MOE_ROUTING_COVERAGE_BUDGET_TESTS(test::cpu_backend_runner)

namespace {

namespace mr = moe_routing;

std::string error_of(const std::string& text) { return mr::to_string(mr::parse_policy(text).outcome); }

TEST_CASE("coverage_greedy, prune_to_budget and prune_to_latency parse with their parameters") {
  const mr::runtime_policy coverage = mr::parse_policy_or_throw("coverage_greedy(size=24) | refine(k=8)");
  REQUIRE(coverage.set_stage_count == 1);
  CHECK(coverage.set_stages[0].get<mr::coverage_greedy>().size == 24);
  CHECK(coverage.set_stages[0].get<mr::coverage_greedy>().k == 0);
  const mr::runtime_policy added =
      mr::parse_policy_or_throw("prune(k0=2) | coverage_greedy(m=6,k=4,gate=dense) | refine(k=8)");
  REQUIRE(added.set_stage_count == 2);
  CHECK(added.set_stages[1].get<mr::coverage_greedy>().add == 6);
  CHECK(added.set_stages[1].get<mr::coverage_greedy>().k == 4);
  CHECK(added.set_stages[1].get<mr::coverage_greedy>().gate == mr::column_mass::dense);

  const mr::runtime_policy budget = mr::parse_policy_or_throw("prune_to_budget(budget=40)|refine(k=8)");
  CHECK(budget.set_stages[0].get<mr::prune_to_budget>().budget == 40);
  CHECK(budget.set_stages[0].get<mr::prune_to_budget>().k == 0);
  const mr::runtime_policy latency =
      mr::parse_policy_or_throw("prune_to_latency(target=30, t_fetch=0.5, t_token=0.01, k=6) | refine(k=8)");
  const auto& stage = latency.set_stages[0].get<mr::prune_to_latency>();
  CHECK(stage.target == doctest::Approx(30.0f));
  CHECK(stage.t_fetch == doctest::Approx(0.5f));
  CHECK(stage.t_token == doctest::Approx(0.01f));
  CHECK(stage.k == 6);
  CHECK(mr::parse_policy_or_throw("prune_to_latency(target=30)|refine(k=8)")
            .set_stages[0]
            .get<mr::prune_to_latency>()
            .t_fetch == 1.0f);
}

TEST_CASE("the budget model's time is latency_model's") {
  // prune_to_latency cannot include metrics/ (the policies layer sees only core), so its
  // model is written again there: the two must agree.
  const mr::prune_to_latency stage{.target = 1, .t_fetch = 0.75f, .t_token = 0.125f, .k = 4};
  const mr::latency_model model{.t_fetch = 0.75, .t_token = 0.125};
  CHECK(stage.modelled_time(20, 16, 8) == model.time(20, 16LL * 4));
  CHECK(stage.modelled_time(3, 16, 8) == model.time(3, 16LL * 3));  // fewer experts than k: each token takes 3
}

TEST_CASE("coverage_greedy, prune_to_budget and prune_to_latency name the parameter and value they refuse") {
  CHECK(error_of("coverage_greedy(size=4,add=2) | refine(k=8)") ==
        "invalid parameter: coverage_greedy: takes one target of add and size, not both");
  CHECK(error_of("prune(k0=1) | coverage_greedy(k=2) | refine(k=8)") ==
        "invalid parameter: coverage_greedy: needs a target: add or size");
  CHECK(error_of("prune(k0=1) | coverage_greedy(size=-3) | refine(k=8)") ==
        "invalid parameter: coverage_greedy.size = -3: must be at least 0");
  CHECK(error_of("prune(k0=1) | coverage_greedy(add=2,k=-1) | refine(k=8)") ==
        "invalid parameter: coverage_greedy.k = -1: must not be negative");
  CHECK(error_of("coverage_greedy(add=2,gate=dense) | refine(k=8)").find("cannot open a policy") != std::string::npos);
  CHECK(error_of("prune_to_budget(budget=0) | refine(k=8)") ==
        "invalid parameter: prune_to_budget.budget = 0: must be at least 1");
  CHECK(error_of("prune_to_budget(k=2) | refine(k=8)").find("budget") != std::string::npos);
  CHECK(error_of("prune_to_budget(budget=4,k=6) | refine(k=4)") ==
        "invalid parameter: prune_to_budget.k = 6: must be at most the experts each token is assigned, refine.k = 4");
  CHECK(error_of("prune_to_latency(target=-1) | refine(k=8)") ==
        "invalid parameter: prune_to_latency.target = -1: must be finite and positive");
  CHECK(error_of("prune_to_latency(target=10,t_fetch=0) | refine(k=8)") ==
        "invalid parameter: prune_to_latency.t_fetch = 0: must be finite and positive");
  CHECK(error_of("prune_to_latency(target=10,t_token=-0.5) | refine(k=8)") ==
        "invalid parameter: prune_to_latency.t_token = -0.5: must be finite and not negative");
  CHECK(error_of("prune_to_latency(target=10,k=3) | refine(k=2)") ==
        "invalid parameter: prune_to_latency.k = 3: must be at most the experts each token is assigned, refine.k = 2");

  // Every batch keeps at least its top-1 guaranteed: a stage that replaces S cannot follow.
  CHECK(error_of("prune_to_budget(budget=4) | confidence_keep(min_confidence=0.5,budget=3) | refine(k=8)")
            .find("confidence_keep: replaces S") != std::string::npos);

  // At bind: k counts experts per token, and k = 0 (the model's top-k) against refine.
  const auto deep = mr::parse_policy_or_throw("prune_to_budget(budget=4,k=9) | refine(k=0)");
  CHECK(mr::to_string(mr::bind_policy(deep, {64, 8, false})) ==
        "invalid parameter: prune_to_budget.k = 9: must be at most the model's top_k = 8");
  const auto model_k = mr::parse_policy_or_throw("prune_to_latency(target=10) | refine(k=4)");
  CHECK(mr::to_string(mr::bind_policy(model_k, {64, 8, false})) ==
        "invalid parameter: refine.k = 4: must reach the deepest guarantee (a k of 0 there is the model's top-k), "
        "prune_to_latency.k = 8");
  CHECK(mr::bind_policy(model_k, {64, 4, false}).ok());
  const auto short_rank = mr::parse_policy_or_throw("prune_to_budget(budget=4) | refine(k=8,max_rank=2)");
  CHECK(mr::to_string(mr::bind_policy(short_rank, {64, 8, false})) ==
        "invalid parameter: refine.max_rank = 2: must reach every guaranteed expert: at least prune_to_budget.k = 8");
}

}  // namespace

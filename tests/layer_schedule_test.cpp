// Per-layer schedules (policies/layer_schedule.hpp) and their fit to a budget
// (metrics/schedule_fit.hpp, tools/moe-route/schedule_replay.hpp).

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/metrics/schedule_fit.hpp>
#include <moe_routing/policies/layer_schedule.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "plan_checks.hpp"
#include "schedule_replay.hpp"

namespace {
namespace mr = moe_routing;

/// The message of a schedule text that must not parse.
std::string schedule_error(const std::string& text) {
  mr::layer_schedule schedule;
  const mr::schedule_parse_result result = mr::parse_layer_schedule(text, schedule);
  REQUIRE_FALSE(result.outcome.ok());
  return result.message;
}

/// Every choice of every layer tried: the reference the fit must equal.
mr::fitted_schedule brute_force(const std::vector<std::vector<mr::layer_option>>& options, double budget) {
  mr::fitted_schedule best;
  std::vector<int> choice(options.size(), 0);
  while (true) {
    double cost = 0, gain = 0;
    for (std::size_t l = 0; l < options.size(); ++l) {
      cost += options[l][static_cast<std::size_t>(choice[l])].cost;
      gain += options[l][static_cast<std::size_t>(choice[l])].gain;
    }
    if (cost <= budget && (!best.feasible || gain > best.gain || (gain == best.gain && cost < best.cost))) {
      best = {true, choice, cost, gain};
    }
    std::size_t l = 0;
    while (l < options.size() && ++choice[l] == static_cast<int>(options[l].size())) choice[l++] = 0;
    if (l == options.size()) break;
  }
  return best;
}
}  // namespace

TEST_CASE("a schedule text gives one policy per layer, v*n repeats, no list means every layer") {
  const mr::layer_schedule s = mr::parse_layer_schedule_or_throw("prune(k0=[4,4*2,2]) | refine(k=[8,8,6,8])");
  REQUIRE(s.layer_count == 4);
  const int k0[] = {4, 4, 4, 2}, k[] = {8, 8, 6, 8};
  for (int l = 0; l < 4; ++l) {
    CAPTURE(l);
    CHECK(s.for_layer(l).set_stages[0].get<mr::prune>().k0 == k0[l]);
    CHECK(s.for_layer(l).assignment.k == k[l]);
  }
  CHECK(s.check_layers(4).ok());
  CHECK(mr::to_string(s.check_layers(48)).find("schedule layers = 4") != std::string::npos);
  const mr::layer_schedule one = mr::parse_layer_schedule_or_throw("oea(k0=2,k=8)");
  CHECK(one.layer_count == 1);
  CHECK(one.check_layers(48).ok());
  CHECK(one.for_layer(47).assignment.k == 8);
  CHECK(mr::parse_layer_schedule_or_throw("xshare(k0=1,m=[0,2,4],k=8) | capacity(c=[4,8,16])")
            .for_layer(2)
            .assignment.capacity == 16);
}

TEST_CASE("bad schedule text names the layer, the parameter and the value") {
  CHECK(schedule_error("prune(k0=[4,3,2,1]) | refine(k=[8,8,8])").find("k has 3 entries but k0 has 4") !=
        std::string::npos);
  const std::string range = schedule_error("prune(k0=[4,0,2]) | refine(k=8)");
  CHECK(range.find("layer 1 of 3 (k0=0)") != std::string::npos);
  CHECK(range.find("prune.k0 = 0") != std::string::npos);
  CHECK(schedule_error("prune(k0=[4,x]) | refine(k=8)").find("layer 1 of 2 (k0=x)") != std::string::npos);
  CHECK(schedule_error("prune(k0=[4*0]) | refine(k=8)").find("k0 entry '4*0'") != std::string::npos);
  CHECK(schedule_error("prune(k0=[4*200]) | refine(k=8)").find("k0 entry '4*200'") != std::string::npos);
  CHECK(schedule_error("prune(k0=[4,,2]) | refine(k=8)").find("k0 has an empty entry (entry 2)") != std::string::npos);
  CHECK(schedule_error("prune(k0=[4,2) | refine(k=8)").find("needs its ']'") != std::string::npos);
  CHECK(schedule_error("prune(k0=4]) | refine(k=8)").find("closes no list") != std::string::npos);
  CHECK(schedule_error("prune(k0=[4*100,2*100]) | refine(k=8)").find("more than 128 entries") != std::string::npos);
}

TEST_CASE("a schedule list is a plain parameter value inside a stage's parentheses") {
  // A list spanning stages once parsed by substituting raw text.
  const std::string spanning = schedule_error("prune(k0=[1) | topk_union(k=2, 1]) | refine()");
  CHECK(spanning.find("list of k0 at column 10 holds ')' at column 12") != std::string::npos);
  CHECK(spanning.find("entries are plain values") != std::string::npos);
  // A list of whole policies, not a parameter's value.
  CHECK(schedule_error("[prune(k0=1)|refine(), oea(k0=1,k=2)]").find("list at column 1 must be a parameter's value") !=
        std::string::npos);
  CHECK(schedule_error("prune(k0=1) | refine(k=8) [2]").find("list at column 27 must be a parameter's value") !=
        std::string::npos);
  CHECK(schedule_error("prune(k0=[1,k=2]) | refine(k=8)").find("holds '='") != std::string::npos);
  CHECK(schedule_error("prune(k0=[1,2] 3) | refine(k=8)").find("must be followed by ',' or ')'") != std::string::npos);
  CHECK(mr::parse_layer_schedule_or_throw("prune( k0 = [ 1 , 2 ] ) | refine(k=8)").layer_count == 2);
}

TEST_CASE("fit_schedule refuses NaN, infinite or negative costs and budgets and non-finite gains") {
  const auto refuses = [](const std::vector<std::vector<mr::layer_option>>& options, double budget,
                          const std::string& part) {
    try {
      (void)mr::fit_schedule(options, budget);
      FAIL("accepted");
    } catch (const std::invalid_argument& error) {
      CAPTURE(error.what());
      CHECK(std::string(error.what()).find(part) != std::string::npos);
    }
  };
  const double nan = std::nan(""), inf = INFINITY;
  refuses({{{1, 1}, {nan, 2}}}, 5, "layer 0 option 1: the cost must be finite and non-negative, not");
  refuses({{{1, 1}}, {{-1, 2}}}, 5, "layer 1 option 0: the cost must be finite and non-negative, not -1");
  refuses({{{inf, 1}}}, 5, "the cost must be finite");
  refuses({{{1, nan}}}, 5, "layer 0 option 0: the gain must be finite");
  refuses({{{1, -inf}}}, 5, "the gain must be finite");
  refuses({{{1, 1}}}, nan, "the budget must be finite and non-negative");
  refuses({{{1, 1}}}, -1, "the budget must be finite and non-negative, not -1");
  refuses({{{1, 1}}}, inf, "the budget must be finite");
  CHECK(mr::fit_schedule({{{1, -2}, {2, 3}}}, 5).choice == std::vector<int>{1});  // a negative gain is fine
}

TEST_CASE("a schedule routes layer l exactly as the single policy with layer l's values") {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 60; ++trial) {
    const test::problem p = test::random_problem(rng);
    const int k = p.top_k;
    const std::string K = std::to_string(k);
    const std::string a = std::to_string(1 + trial % k), b = std::to_string(k);
    const std::string m = std::to_string(trial % 5);
    const mr::layer_schedule s =
        mr::parse_layer_schedule_or_throw("xshare(k0=[" + a + "," + b + "*2],m=[" + m + ",0,3],k=" + K + ")");
    const std::string single[] = {"xshare(k0=" + a + ",m=" + m + ",k=" + K + ")",
                                  "xshare(k0=" + b + ",m=0,k=" + K + ")", "xshare(k0=" + b + ",m=3,k=" + K + ")"};
    for (int l = 0; l < 3; ++l) {
      CAPTURE(single[l]);
      REQUIRE(test::identical(test::route_problem(p, s.for_layer(l)),
                              test::route_problem(p, mr::parse_policy_or_throw(single[l]))));
    }
  }
}

TEST_CASE("the fit equals a brute-force search on tiny grids") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::vector<mr::layer_option>> options(static_cast<std::size_t>(1 + trial % 4));
    for (auto& layer : options) {
      layer.resize(static_cast<std::size_t>(1 + trial % 3));
      for (auto& o : layer) o = {std::round(unit(rng) * 8) / 2, unit(rng)};  // ties in cost on purpose
    }
    const double budget = unit(rng) * 4.0 * static_cast<double>(options.size());
    CAPTURE(trial);
    const mr::fitted_schedule fit = mr::fit_schedule(options, budget), want = brute_force(options, budget);
    REQUIRE(fit.feasible == want.feasible);
    if (!want.feasible) continue;
    CHECK(fit.cost <= budget);
    CHECK(fit.gain == want.gain);
    double cost = 0;
    for (std::size_t l = 0; l < options.size(); ++l) cost += options[l][static_cast<std::size_t>(fit.choice[l])].cost;
    CHECK(cost == doctest::Approx(fit.cost));
  }
}

TEST_CASE("on a small trace the fitted schedule keeps at least the best uniform's mass within its budget") {
  mr::synthetic::generator_config config = mr::synthetic::find_preset("qwen3-30b-a3b")->config;
  config.layers = 3;
  config.tokens_per_step = 16;
  config.steps = 6;
  config.seed = 3;
  const mr::io::trace trace = mr::synthetic::generate_trace(config);
  moe_route::layer_figure_cache cache(trace, {});
  const std::vector<std::string> grid = {"1", "2", "4", "8"};
  std::vector<std::vector<mr::layer_option>> options(3);
  std::vector<double> uniform_cost(grid.size(), 0), uniform_gain(grid.size(), 0);
  for (std::size_t v = 0; v < grid.size(); ++v) {
    const auto& layers = cache.layers_of("prune(k0=" + grid[v] + ") | refine(k=8)");
    for (int l = 0; l < 3; ++l) {
      options[static_cast<std::size_t>(l)].push_back({layers[l].active.mean, layers[l].retained_mass.mean});
      uniform_cost[v] += layers[l].active.mean;
      uniform_gain[v] += layers[l].retained_mass.mean;
    }
  }
  for (std::size_t v = 0; v < grid.size(); ++v) {
    const mr::fitted_schedule fit = mr::fit_schedule(options, uniform_cost[v]);
    REQUIRE(fit.feasible);
    CHECK(fit.cost <= uniform_cost[v]);
    CHECK(fit.gain >= uniform_gain[v]);
    CHECK(fit.gain == brute_force(options, uniform_cost[v]).gain);
    // The fitted schedule replayed as a schedule text gives the figures the fit added up.
    std::vector<std::string> values;
    for (const int c : fit.choice) values.push_back(grid[static_cast<std::size_t>(c)]);
    const std::string text = "prune(k0=" + moe_route::schedule_list_text(values) + ") | refine(k=8)";
    const moe_route::policy_replay replay = moe_route::replay_schedule(trace, text, cache);
    CHECK(replay.overall.retained_mass.mean * 3 == doctest::Approx(fit.gain));
  }
}

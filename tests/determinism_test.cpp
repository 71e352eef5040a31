// The same plan, bit for bit, for seq, par and par_unseq and for 1 to 8 threads;
// and many threads routing at once with their own workspaces and a shared policy.

#include <thread>

#include <tbb/global_control.h>

#include "plan_checks.hpp"

namespace {
namespace mr = test::mr;
}

TEST_CASE("plans are identical across execution policies and thread counts") {
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 40; ++trial) {
    test::problem_options options;
    options.max_tokens = 700;  // several chunks of 64 tokens
    const test::problem p = test::random_problem(rng, options);
    const std::string text = test::random_policy_text(rng, p);
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    const auto reference = test::route_problem(p, policy, {}, std::execution::seq);
    REQUIRE(test::identical(reference, test::route_problem(p, policy, {}, std::execution::par)));
    REQUIRE(test::identical(reference, test::route_problem(p, policy, {}, std::execution::par_unseq)));
    for (int threads = 1; threads <= 8; threads *= 2) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      REQUIRE(test::identical(reference, test::route_problem(p, policy, {}, std::execution::par)));
    }
  }
}

TEST_CASE("concurrent routing with a shared policy gives the single-thread plans") {
  std::mt19937 rng(777);
  std::vector<test::problem> problems;
  for (int i = 0; i < 16; ++i) problems.push_back(test::random_problem(rng));
  const auto policy = mr::parse_policy_or_throw("xshare(k0=1,m=4,k=1)");
  std::vector<mr::routing_plan> expected;
  for (const auto& p : problems) expected.push_back(test::route_problem(p, policy));
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (std::size_t i = 0; i < problems.size(); ++i) {
          const auto& p = problems[(i + static_cast<std::size_t>(t)) % problems.size()];
          mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G});
          mr::cpu::workspace ws({p.ref.n, p.ref.E, p.top_k});
          const auto s = p.type == test::element::f32
                             ? mr::cpu::route(policy, p.batch<float>(), plan.view(), ws, std::execution::par)
                         : p.type == test::element::f16
                             ? mr::cpu::route(policy, p.batch<mr::float16>(), plan.view(), ws)
                             : mr::cpu::route(policy, p.batch<mr::bfloat16>(), plan.view(), ws);
          if (!s.ok() || !test::identical(plan, expected[(i + static_cast<std::size_t>(t)) % problems.size()]))
            ++mismatches[static_cast<std::size_t>(t)];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(8, 0));
}

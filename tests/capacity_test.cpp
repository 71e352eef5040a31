// Capacity re-routing on the CPU backend: the shared bodies (tests/bodies/capacity.hpp, run
// on CUDA by tests/cuda/backend_bodies_test.cu) and the text form's checks.

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/cpu_backend_runner.hpp"
#include "bodies/capacity.hpp"

MOE_ROUTING_CAPACITY_TESTS(test::cpu_backend_runner)

namespace {
namespace mr = moe_routing;

std::string parse_error(const std::string& text) {
  const mr::parse_result result = mr::parse_policy(text);
  REQUIRE_FALSE(result.outcome.ok());
  return mr::describe(result, text);
}
}  // namespace

TEST_CASE("capacity(c) is refine's capacity, after refine or a preset") {
  const mr::runtime_policy after_refine = mr::parse_policy_or_throw("prune(k0=2) | refine(k=4) | capacity(c=16)");
  CHECK(after_refine.assignment.capacity == 16);
  CHECK(after_refine.assignment.k == 4);
  CHECK(mr::parse_policy_or_throw("oea(k0=2,k=4) | capacity(c=3)").assignment.capacity == 3);
  CHECK(mr::parse_policy_or_throw("prune(k0=2) | refine(k=4, capacity=5)").assignment.capacity == 5);
  CHECK_FALSE(mr::parse_policy_or_throw("oea(k0=2,k=4)").assignment.caps_experts());
  constexpr auto compiled = mr::prune{.k0 = 2} | mr::refine{.k = 4, .capacity = 16};
  CHECK(mr::to_runtime_policy(compiled).assignment.capacity == 16);
}

TEST_CASE("bad capacity text names the parameter and the value") {
  CHECK(parse_error("prune(k0=2) | refine(k=4) | capacity(c=0)").find("refine.capacity = 0") != std::string::npos);
  CHECK(parse_error("oea(k0=2,k=4) | capacity(c=-3)").find("refine.capacity = -3") != std::string::npos);
  CHECK(parse_error("prune(k0=2) | refine(k=4) | capacity()").find("(c)") != std::string::npos);
  CHECK(parse_error("prune(k0=2) | refine(k=4) | capacity(c=2.5)").find("integer") != std::string::npos);
  CHECK(parse_error("prune(k0=2) | refine(k=4, capacity=2) | capacity(c=3)").find("one capacity") != std::string::npos);
  CHECK(parse_error("prune(k0=2) | refine(k=4) | capacity(c=3) | capacity(c=3)").find("last step") !=
        std::string::npos);
  CHECK(parse_error("prune(k0=2) | refine(k=4) | prune(k0=1)").find("only capacity(c=...) may follow") !=
        std::string::npos);
  CHECK(parse_error("oea(k0=2,k=4) | refine(k=4)").find("column 15: expected the end of the policy: a preset") !=
        std::string::npos);
  CHECK(parse_error("capacity(c=3) | refine(k=4)").find("stage name") != std::string::npos);
}

TEST_CASE("an integer parameter too large for int is a range error naming the parameter and the value") {
  const std::string add = parse_error("prune(k0=2) | coverage_greedy(add=2147483647) | refine(k=4)");
  CAPTURE(add);
  CHECK(add.find("expected an integer within [-1e9, 1e9]") != std::string::npos);
  CHECK(add.find("add = 2147483647") != std::string::npos);
  const std::string c = parse_error("prune(k0=2) | refine(k=4) | capacity(c=-5000000000)");
  CAPTURE(c);
  CHECK(c.find("c = -5000000000") != std::string::npos);
  CHECK(parse_error("prune(k0=2) | refine(k=4) | capacity(c=2.5)").find("expected an integer value") !=
        std::string::npos);
}

TEST_CASE("capacity refuses a rank limit and a group limit, which its moves would not respect") {
  const mr::runtime_policy capped = mr::parse_policy_or_throw("prune(k0=2) | refine(k=4) | capacity(c=3)");
  CHECK(mr::bind_policy(capped, {64, 8, false}).ok());
  const std::string grouped = mr::to_string(mr::bind_policy(capped, {64, 8, false, true}));
  CHECK(grouped.find("refine.capacity = 3") != std::string::npos);
  CHECK(grouped.find("group limit") != std::string::npos);
  const mr::runtime_policy ranked = mr::parse_policy_or_throw("prune(k0=2) | refine(k=4, max_rank=16) | capacity(c=3)");
  const std::string rank_limited = mr::to_string(mr::bind_policy(ranked, {64, 8, false}));
  CHECK(rank_limited.find("refine.capacity = 3") != std::string::npos);
  CHECK(rank_limited.find("refine.max_rank = 16") != std::string::npos);
  // A rank limit at or past E limits nothing; without capacity both limits stay allowed.
  CHECK(mr::bind_policy(mr::parse_policy_or_throw("prune(k0=2) | refine(k=4, max_rank=64) | capacity(c=3)"),
                        {64, 8, false})
            .ok());
  CHECK(
      mr::bind_policy(mr::parse_policy_or_throw("prune(k0=2) | refine(k=4, max_rank=16)"), {64, 8, false, true}).ok());

  // Through the backend: a group-limited batch is refused before anything is written.
  std::vector<float> scores(2 * 8);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>((i * 5) % 8);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), 2, 8)};
  batch.groups = {.n_group = 4, .topk_group = 2};
  mr::routing_plan plan({.tokens = 2, .experts = 8, .top_k = 4});
  mr::cpu::workspace ws({.max_tokens = 2, .experts = 8, .top_k = 4});
  const mr::status refused = mr::cpu::route(capped, batch, plan.view(), ws);
  CHECK(mr::to_string(refused).find("group limit") != std::string::npos);
}

#pragma once
// The grouped MoE executor against the naive per-token loop of tests/naive_executor.hpp,
// as a test body for every backend runner: plans from every preset, n from 1 to 512,
// shared experts on and off, both projection layouts.

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "naive_executor.hpp"

namespace test::bodies {

/// The policies whose plans the executor runs: every preset, raw weights with a scale.
inline constexpr const char* executor_policies[] = {"topk(k=4)",
                                                    "oea(k0=2,k=4)",
                                                    "pruned(k0=1,k=4)",
                                                    "xshare(k0=1,m=3,k=4)",
                                                    "xshare_spec(k0=1,m=1,m_r=2,k=4)",
                                                    "lynx_lat(d=4,k=4)",
                                                    "lynx_acc(conf=0.3,budget=5,k=4,weights=raw,scale=2.5)",
                                                    "skip(beta=0.4,k=4)"};

/// `bf16_activations` (bfloat16 weights only) rounds x and the SwiGLU values to bfloat16
/// before each product, as the naive loop then does too; the tolerance is then a bfloat16
/// rounding step (2^-8: an intermediate that lands on the other side of a rounding
/// boundary moves by one step), else 1e-5. The plans are routed on the CPU: what is under
/// test is the executor.
template <class Runner, class Weight>
void executor_matches_naive_loop(std::uint32_t seed, int d, int h, int shared_h, bool bf16_activations) {
  std::mt19937 rng(seed);
  const int experts = 16, k = 4;
  const expert_bank<Weight> routed(experts, d, h, rng), shared(2, d, shared_h, rng);
  const bool rounded = std::is_same_v<Weight, mr::bfloat16> && bf16_activations;
  const double tolerance = rounded ? 1.0 / 256 : 1e-5;
  for (const int n : {1, 7, 64, 512}) {
    const layer_inputs inputs(n, d, experts, rng);
    const std::vector<float>& x = inputs.x;
    typename Runner::template executor<Weight> run(routed, &shared,
                                                   {n, k, experts, d, h, 2, shared_h, bf16_activations});
    for (const std::string text : executor_policies) {
      mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
      REQUIRE(mr::cpu::route(mr::parse_policy_or_throw(text), inputs.batch(), plan.view()).ok());
      for (const bool with_shared : {false, true}) {
        const auto reference = naive_forward(x, plan, routed, with_shared ? &shared : nullptr, rounded);
        for (const bool fused : {false, true}) {
          CAPTURE(n);
          CAPTURE(text);
          CAPTURE(with_shared);
          CAPTURE(fused);
          // NaN wherever the executor would fail to write.
          std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
          const mr::status s = run.forward(x, plan, with_shared, fused, y);
          REQUIRE_MESSAGE(s.ok(), mr::to_string(s));
          CHECK(relative_error(y, reference) < tolerance);
          if (n > 3) {
            for (int c = 0; c < d; ++c) REQUIRE(y[static_cast<std::size_t>(2) * d + c] == 0.0f);  // the masked token
          }
        }
      }
    }
  }
}

/// One workspace sized once for the largest batch (as engines size theirs) serving calls of
/// every smaller size in turn, each with another policy, and each call made twice: into a
/// separate y, and in place (y written over x, as an engine that reuses its hidden-state
/// buffer calls it). Every result equals the naive loop; a call that kept a larger call's
/// sizes or read x after writing y would not.
template <class Runner, class Weight>
void one_workspace_serves_every_smaller_call_and_in_place(std::uint32_t seed, int d, int h, bool bf16_activations) {
  std::mt19937 rng(seed);
  const int experts = 16, k = 4, largest = 512;
  const expert_bank<Weight> routed(experts, d, h, rng), shared(2, d, h, rng);
  const bool rounded = std::is_same_v<Weight, mr::bfloat16> && bf16_activations;
  const double tolerance = rounded ? 1.0 / 256 : 1e-5;
  typename Runner::template executor<Weight> run(routed, &shared, {largest, k, experts, d, h, 2, h, bf16_activations});
  int call = 0;
  for (const int n : {largest, 1, 64, 7, 300, 2}) {
    const layer_inputs inputs(n, d, experts, rng);
    const std::string text = executor_policies[call % std::size(executor_policies)];
    const bool with_shared = call % 2 == 0, fused = call % 3 == 0;
    ++call;
    mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
    REQUIRE(mr::cpu::route(mr::parse_policy_or_throw(text), inputs.batch(), plan.view()).ok());
    const auto reference = naive_forward(inputs.x, plan, routed, with_shared ? &shared : nullptr, rounded);
    CAPTURE(n);
    CAPTURE(text);
    std::vector<float> y(inputs.x.size(), std::numeric_limits<float>::quiet_NaN());
    const mr::status separate = run.forward(inputs.x, plan, with_shared, fused, y);
    REQUIRE_MESSAGE(separate.ok(), mr::to_string(separate));
    CHECK(relative_error(y, reference) < tolerance);
    std::vector<float> xy = inputs.x;
    const mr::status in_place = run.forward_in_place(xy, plan, with_shared, fused);
    REQUIRE_MESSAGE(in_place.ok(), mr::to_string(in_place));
    CHECK(relative_error(xy, reference) < tolerance);
  }
}

}  // namespace test::bodies

/// The executor checks every backend's executor has, as test cases on `Runner`. Weight
/// types and activation modes only some executors have are instantiated by their own test
/// files (tests/executor_test.cpp for the CPU's float32 activations).
#define MOE_ROUTING_EXECUTOR_TESTS(Runner)                                                                            \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "executor equals a naive per-token loop: float32 weights",                    \
                                test::bodies::executor_matches_naive_loop<Runner, float>(1, 64, 48, 40, false))       \
  MOE_ROUTING_BACKEND_TEST_CASE(                                                                                      \
      Runner, "executor equals a naive per-token loop: bfloat16 weights and activations",                             \
      test::bodies::executor_matches_naive_loop<Runner, test::mr::bfloat16>(4, 64, 48, 40, true); /* vector kernel */ \
      test::bodies::executor_matches_naive_loop<Runner, test::mr::bfloat16>(5, 128, 64, 96, true) /* whole tiles */)  \
  MOE_ROUTING_BACKEND_TEST_CASE(                                                                                      \
      Runner, "one executor workspace serves every smaller call, in place too",                                       \
      test::bodies::one_workspace_serves_every_smaller_call_and_in_place<Runner, float>(6, 64, 48, false);            \
      test::bodies::one_workspace_serves_every_smaller_call_and_in_place<Runner, test::mr::bfloat16>(7, 128, 64,      \
                                                                                                     true))

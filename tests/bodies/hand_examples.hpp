#pragma once
// Small examples worked out by hand, one or more per stage, as test bodies for every
// backend runner. Probabilities input, so p = s = the numbers written here. E = 6, k = 3,
// three tokens:
//
//   expert:     0     1     2     3     4     5      rank order   top-3
//   token 0:  0.50  0.30  0.10  0.05  0.03  0.02    0 1 2 3 4 5  {0,1,2}
//   token 1:  0.05  0.40  0.35  0.10  0.06  0.04    1 2 3 4 0 5  {1,2,3}
//   token 2:  0.02  0.03  0.05  0.60  0.20  0.10    3 4 5 2 1 0  {3,4,5}
//
// Sparse gates (p over the token's top-3 p): t0 .556 .333 .111, t1 .471 .412 .118,
// t2 .667 .222 .111. Column mass c: e0 .556, e1 .804, e2 .523, e3 .784, e4 .222, e5 .111.
// Votes (tokens with e in top-3): e0 1, e1 2, e2 2, e3 2, e4 1, e5 1.

#include <cmath>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "backends/route_on.hpp"
#include "test_support.hpp"

namespace test::bodies {

using rows = std::vector<std::vector<int>>;

inline const std::vector<float> hand_table = {
    0.50f, 0.30f, 0.10f, 0.05f, 0.03f, 0.02f, 0.05f, 0.40f, 0.35f,
    0.10f, 0.06f, 0.04f, 0.02f, 0.03f, 0.05f, 0.60f, 0.20f, 0.10f,
};

/// The table above as a problem of top-k `k`.
inline problem hand_table_problem(int k = 3) { return problem_from_rows(hand_table, 6, k, naive::mode::probabilities); }

/// Each row's assigned ids when `Runner` routes `p` (the plan into `out` when given).
template <class Runner, class Policy>
rows assigned(const Policy& policy, const problem& p = hand_table_problem(), mr::routing_plan* out = nullptr) {
  const mr::routing_plan plan = route_on<Runner>(p, policy);
  rows result(static_cast<std::size_t>(p.ref.n));
  for (int i = 0; i < p.ref.n; ++i) {
    for (int j = 0; j < plan.count(i); ++j) result[static_cast<std::size_t>(i)].push_back(plan.id(i, j));
  }
  if (out != nullptr) *out = plan;
  return result;
}

template <class Runner>
void hand_vanilla() {
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::vanilla(3), hand_table_problem(), &plan) ==
        rows{{0, 1, 2}, {1, 2, 3}, {3, 4, 5}});
  CHECK(plan.summary().active_count == 6);
  CHECK(plan.weight(0, 0) == doctest::Approx(0.5 / 0.9).epsilon(1e-6));
  CHECK(plan.weight(2, 2) == doctest::Approx(0.1 / 0.9).epsilon(1e-6));
}

template <class Runner>
void hand_oea() {
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::oea(1, 3), hand_table_problem(), &plan) == rows{{0, 1, 3}, {1, 3, 0}, {3, 1, 0}});
  CHECK(plan.summary().active_count == 3);
  CHECK(plan.weight(0, 2) == doctest::Approx(0.05 / 0.85).epsilon(1e-6));
  CHECK(plan.guaranteed(1) == 1);
}

template <class Runner>
void hand_top_p() {
  // t0: .5 + .3 >= .7; t1: .4 + .35 >= .7; t2: .6 + .2 >= .7: baselines {0,1} {1,2} {3,4}.
  CHECK(assigned<Runner>(mr::presets::oea_general(3, 0.7f, 3, 3)) == rows{{0, 1, 2}, {1, 2, 3}, {3, 4}});
}

template <class Runner>
void hand_dynamic_skipping() {
  // t0: .3 >= .25 but .1 < .25 -> {0,1}; t1: .35 >= .2 -> {1,2}; t2: .2 < .3 -> {3}.
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::dynamic_skipping(0.5f, 3), hand_table_problem(), &plan) ==
        rows{{0, 1, 2}, {1, 2, 3}, {3, 2, 1}});
  CHECK(plan.guaranteed(0) == 2);
  CHECK(plan.guaranteed(2) == 1);
}

template <class Runner>
void hand_greedy_add() {
  CHECK(assigned<Runner>(mr::presets::xshare_batch(1, 1, 2), hand_table_problem()) == rows{{0, 1}, {1, 2}, {3, 2}});
  // size = 5: S {0,1,3} grows by e2 then e4 (c .523 > .222)
  mr::routing_plan plan;
  assigned<Runner>(mr::prune{.k0 = 1} | mr::greedy_mass{.size = 5} | mr::refine{.k = 3}, hand_table_problem(), &plan);
  CHECK(plan.summary().selected_count == 5);
  CHECK(plan.summary().selected.contains(4));
  CHECK_FALSE(plan.summary().selected.contains(5));
}

template <class Runner>
void hand_greedy_ties() {
  // k = 2. Token 0 top-2 {0, 4}, token 1 top-2 {1, 2}, both with p .6 and .3, so e4 and e2
  // get the same c (1/3 each). prune(k0=1) makes S {0, 1}; add = 1 takes e2, not e4.
  const std::vector<float> tied = {
      0.60f, 0.02f, 0.05f, 0.01f, 0.30f, 0.02f, 0.05f, 0.60f, 0.30f, 0.01f, 0.02f, 0.02f,
  };
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::xshare_batch(1, 1, 2), problem_from_rows(tied, 6, 2, naive::mode::probabilities),
                         &plan) == rows{{0, 2}, {1, 2}});
  CHECK(plan.summary().selected_count == 3);
  CHECK_FALSE(plan.summary().selected.contains(4));
}

template <class Runner>
void hand_greedy_mass() {
  // Total c = 3 (one per token). From {0,1,3} (c = 2.144, 71%): tau = 0.8 adds e2 (2.667, 89%).
  mr::routing_plan plan;
  assigned<Runner>(mr::prune{.k0 = 1} | mr::greedy_mass{.mass = 0.8f} | mr::refine{.k = 3}, hand_table_problem(),
                   &plan);
  CHECK(plan.summary().selected_count == 4);
  CHECK(plan.summary().selected.contains(2));
  assigned<Runner>(mr::prune{.k0 = 1} | mr::greedy_mass{.mass = 0.7f} | mr::refine{.k = 3}, hand_table_problem(),
                   &plan);
  CHECK(plan.summary().selected_count == 3);
}

template <class Runner>
void hand_per_request() {
  // r0 = tokens 0,1: S0 {0,1}, its mass picks e2; r1 = token 2: S0 {3}, picks e4.
  problem p = hand_table_problem();
  set_segments(p, {0, 2, 3});
  CHECK(assigned<Runner>(mr::per_request{.k0 = 1, .m_r = 1} | mr::refine{.k = 2}, p) == rows{{0, 1}, {1, 2}, {3, 4}});
}

template <class Runner>
void hand_ep_fill() {
  // S0 = {0,1,3}: device 0 holds 2, device 1 holds 1 and adds e4 (c .222 > .111).
  problem p = hand_table_problem();
  set_placement(p, 2, {0, 0, 0, 1, 1, 1});
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::xshare_expert_parallel(1, 2, 2), p, &plan) == rows{{0, 1}, {1, 3}, {3, 4}});
  CHECK(plan.summary().max_device_load == 2);
  CHECK(plan.device_loads() == std::vector<std::int32_t>{2, 2});
}

template <class Runner>
void hand_vote_drop() {
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::lynx_latency(2, 3), hand_table_problem(), &plan) ==
        rows{{0, 1, 2}, {1, 2, 3}, {3, 2, 1}});
  CHECK(plan.summary().selected_count == 4);
  // d larger than S still leaves one expert
  assigned<Runner>(mr::presets::lynx_latency(100, 3), hand_table_problem(), &plan);
  CHECK(plan.summary().selected_count == 1);
}

template <class Runner>
void hand_confidence_keep() {
  CHECK(assigned<Runner>(mr::presets::lynx_accuracy(0.55f, 3, 2)) == rows{{3, 4}, {3, 4}, {3, 4}});
  // No confident token: all count. Top-1s {0,1,3}, then votes fill to 4: e2 (2 votes).
  mr::routing_plan plan;
  assigned<Runner>(mr::presets::lynx_accuracy(0.99f, 4, 2), hand_table_problem(), &plan);
  CHECK(plan.summary().selected_count == 4);
  CHECK(plan.summary().selected.contains(2));
}

template <class Runner>
void hand_refine_fallback() {
  // S = {3}; tokens 0 and 1 have no expert of S in ranks < 2, so they take expert 3.
  CHECK(assigned<Runner>(mr::confidence_keep{.min_confidence = 0.55f, .budget = 1} |
                         mr::refine{.k = 2, .max_rank = 2}) == rows{{3}, {3}, {3}});
}

template <class Runner>
void hand_weighting_and_padding() {
  mr::routing_plan plan;
  assigned<Runner>(mr::presets::vanilla(3, {mr::weighting::raw, 2.0f}), hand_table_problem(), &plan);
  CHECK(plan.weight(0, 0) == doctest::Approx(1.0f));
  CHECK(plan.weight(0, 1) == doctest::Approx(0.6f));
  CHECK(plan.weight(0, 2) == doctest::Approx(0.2f));

  problem p = hand_table_problem();
  p.ref.mask = {1, 0, 1};
  for (const auto kind : {mr::padding_kind::sentinel, mr::padding_kind::repeat}) {
    const mr::routing_plan padded = route_on<Runner>(p, mr::presets::pruned_only(1, 3), {kind, 6});
    const bool repeat = kind == mr::padding_kind::repeat;
    CHECK(padded.ids() == (repeat ? std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 3, 3, 3}
                                  : std::vector<std::int32_t>{0, 6, 6, 6, 6, 6, 3, 6, 6}));
    CHECK(padded.weights() == std::vector<float>{1, 0, 0, 0, 0, 0, 1, 0, 0});
    CHECK(padded.counts() == std::vector<std::int32_t>{1, 0, 1});
  }
}

template <class Runner>
void hand_group_limits() {
  // Groups of 2: {.9, 0}, {.4, .4}, {.1, .1}, {.5, 0}.
  // top2_sum: .9 .8 .2 .5 -> groups 0, 1 -> top-3 {0, 2, 3} (tie .4/.4 to the lower index)
  // max:      .9 .4 .1 .5 -> groups 0, 3 -> top-3 {0, 6, 1}
  problem p = problem_from_rows({0.9f, 0.0f, 0.4f, 0.4f, 0.1f, 0.1f, 0.5f, 0.0f}, 8, 3, naive::mode::probabilities);
  p.ref.n_group = 4;
  p.ref.topk_group = 2;
  p.ref.group_max = false;
  CHECK(assigned<Runner>(mr::presets::vanilla(3), p) == rows{{0, 2, 3}});
  p.ref.group_max = true;
  CHECK(assigned<Runner>(mr::presets::vanilla(3), p) == rows{{0, 6, 1}});
}

template <class Runner>
void hand_decode_only_in_prefill() {
  problem p = hand_table_problem();
  p.ref.prefill = true;
  CHECK(assigned<Runner>(mr::presets::lynx_latency(2, 3), p) == rows{{0, 1, 2}, {1, 2, 3}, {3, 4, 5}});
  CHECK(assigned<Runner>(mr::presets::lynx_accuracy(0.55f, 3, 3), p) == rows{{0, 1, 2}, {1, 2, 3}, {3, 4, 5}});
  // OEA is not decode-only: it prunes in prefill too.
  CHECK(assigned<Runner>(mr::presets::oea(1, 3), p) == rows{{0, 1, 3}, {1, 3, 0}, {3, 1, 0}});
}

template <class Runner>
void hand_softmax_bias() {
  // logits 2, 1, 0, -1: p = e^x / (e^2 + e^1 + e^0 + e^-1) = .644 .237 .087 .032.
  // bias 0, 0, 0.9, 0: s = .644 .237 .987 .032, so the top-2 are expert 2, then expert 0
  // (ranking the logits would give 0, 1). Renormalised weights: e^0 / (e^0 + e^2) = .1192
  // for expert 2, and e^2 / (e^0 + e^2) = .8808 for expert 0.
  problem p = problem_from_rows({2.0f, 1.0f, 0.0f, -1.0f}, 4, 2, naive::mode::softmax);
  p.ref.bias = {0.0f, 0.0f, 0.9f, 0.0f};
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::vanilla(2), p, &plan) == rows{{2, 0}});
  CHECK(plan.weight(0, 0) == doctest::Approx(1.0 / (1.0 + std::exp(2.0))).epsilon(1e-6));
  CHECK(plan.weight(0, 1) == doctest::Approx(std::exp(2.0) / (1.0 + std::exp(2.0))).epsilon(1e-6));
  p.ref.bias.clear();
  CHECK(assigned<Runner>(mr::presets::vanilla(2), p) == rows{{0, 1}});
}

template <class Runner>
void hand_sigmoid_saturation() {
  // sigmoid(17), sigmoid(20), sigmoid(25) and sigmoid(30) all round to 1.0f: ranked by p
  // they would tie and go to the lower index (0, 1); ranked by the logits, 30 and 25 win.
  const std::vector<float> logits = {20.0f, 30.0f, 25.0f, 17.0f};
  problem p = problem_from_rows(logits, 4, 2, naive::mode::sigmoid);
  for (const float x : logits) REQUIRE(1.0f / (1.0f + std::exp(-x)) == 1.0f);
  mr::routing_plan plan;
  CHECK(assigned<Runner>(mr::presets::vanilla(2), p, &plan) == rows{{1, 2}});
  CHECK(plan.weight(0, 0) == doctest::Approx(0.5f));
  // With a bias the order is s = p + bias's, whatever the logits say.
  p.ref.bias = {0.0f, 0.0f, 0.0f, 0.5f};
  CHECK(assigned<Runner>(mr::presets::vanilla(2), p) == rows{{3, 0}});
}

}  // namespace test::bodies

/// The hand examples as test cases on `Runner`.
#define MOE_ROUTING_HAND_EXAMPLE_TESTS(Runner)                                                                         \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "topk_union + refine: vanilla top-3, renormalised",                            \
                                test::bodies::hand_vanilla<Runner>())                                                  \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "prune(k0=1) + refine(k=3): OEA piggybacks on {0,1,3}",                        \
                                test::bodies::hand_oea<Runner>())                                                      \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "prune(k0=3, top_p=0.7) + refine(k=3, max_rank=3): two experts reach 70%",     \
                                test::bodies::hand_top_p<Runner>())                                                    \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner,                                                                                \
                                "prune(k0=3, skip_ratio=0.5): dynamic skipping keeps ranks with p >= p_top1 / 2",      \
                                test::bodies::hand_dynamic_skipping<Runner>())                                         \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "greedy_mass(add=1) after prune(k0=1): adds expert 2, the heaviest outside S", \
                                test::bodies::hand_greedy_add<Runner>())                                               \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "greedy_mass: equal column masses go to the lower index",                      \
                                test::bodies::hand_greedy_ties<Runner>())                                              \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "greedy_mass(mass=tau) grows S until it holds tau of the column mass",         \
                                test::bodies::hand_greedy_mass<Runner>())                                              \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "per_request(k0=1, m_r=1): each request adds its own heaviest expert",         \
                                test::bodies::hand_per_request<Runner>())                                              \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "ep_fill(m_g=2): only the device below its target adds an expert",             \
                                test::bodies::hand_ep_fill<Runner>())                                                  \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "vote_drop(d=2): drops the one-vote experts with the least mass, e5 then e4",  \
                                test::bodies::hand_vote_drop<Runner>())                                                \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "confidence_keep: only token 2 is confident (0.6 >= 0.55), and S = {3, 4, 5}", \
                                test::bodies::hand_confidence_keep<Runner>())                                          \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "refine falls back to the best expert in S beyond max_rank",                   \
                                test::bodies::hand_refine_fallback<Runner>())                                          \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "weighting: raw weights times scale, and padding conventions",                 \
                                test::bodies::hand_weighting_and_padding<Runner>())                                    \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "group-limited candidates: top2_sum and max pick different groups",            \
                                test::bodies::hand_group_limits<Runner>())                                             \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "decode-only stages route like vanilla in prefill",                            \
                                test::bodies::hand_decode_only_in_prefill<Runner>())                                   \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "softmax with a selection bias ranks by s = p + bias and weighs by p",         \
                                test::bodies::hand_softmax_bias<Runner>())                                             \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "sigmoid without a bias ranks by the logits where p saturates to 1",           \
                                test::bodies::hand_sigmoid_saturation<Runner>())

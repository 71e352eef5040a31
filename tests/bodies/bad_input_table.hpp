#pragma once
// Bad input gets a status whose message names the parameter and its value: a table of
// broken calls and the CPU backend's message for each, as a test body for every backend
// runner (the runner's `reports` says where a backend words an error differently).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "backends/call_overrides.hpp"
#include "test_support.hpp"

namespace test::bodies {

/// The plan a broken call routes into: by default the fixture's (4 tokens, k = 4, 16
/// experts, the problem's devices).
struct plan_shape {
  int tokens = 4, top_k = 4, experts = 16;
  std::optional<int> devices;
};

struct bad_input_row {
  const char* what;
  /// Changes what the inputs hold (bias, segments, placement) before a runner copies them.
  void (*inputs)(problem&) = nullptr;
  call_overrides call = {};
  plan_shape plan = {};
  /// The CPU backend's message, or "ok".
  const char* expected = "ok";
};

/// n = 4, E = 16, k = 4, every score 0.5, softmax; routed with oea(k0=2, k=4).
inline problem bad_input_fixture() { return problem_from_rows(std::vector<float>(64, 0.5f), 16, 4); }

inline std::vector<bad_input_row> bad_input_rows() {
  using batch = mr::routing_batch<float>;
  return {
      {.what = "the fixture itself is fine"},
      {.what = "row stride below E",
       .call = {.batch = [](batch& b) { b.scores.row_stride = 8; }},
       .expected = "shape mismatch: batch.row_stride = 8: must be at least batch.E = 16"},
      {.what = "null scores",
       .call = {.batch = [](batch& b) { b.scores.data = nullptr; }},
       .expected = "null pointer: batch.scores.data = 0: must not be null when batch.n = 4"},
      {.what = "too few experts",
       .call = {.batch = [](batch& b) { b.scores.cols = 1; }},
       .expected = "shape mismatch: batch.E = 1: must be in [2, max_experts] max_experts = 1024"},
      {.what = "batch larger than supported",
       .call = {.batch = [](batch& b) { b.scores.rows = 20000; }},
       .expected = "shape mismatch: batch.n = 20000: must be in [0, max_tokens] max_tokens = 16384"},
      {.what = "plan for another batch size",
       .call = {.batch = [](batch& b) { b.scores.rows = 3; }},
       .expected = "shape mismatch: plan.tokens = 4: must equal batch.n = 3"},
      {.what = "workspace for fewer experts",
       .call = {.workspace = mr::workspace_shape{4, 8, 4}},
       .expected = "workspace too small: workspace.experts = 8: must be at least batch.E = 16"},
      {.what = "a workspace for more experts serves a smaller batch",
       .call = {.workspace = mr::workspace_shape{4, 64, 4}}},
      {.what = "workspace for fewer tokens",
       .call = {.workspace = mr::workspace_shape{2, 16, 4}},
       .expected = "workspace too small: workspace.max_tokens = 2: must be at least batch.n = 4"},
      {.what = "k larger than E",
       .call = {.workspace = mr::workspace_shape{4, 3, 4},
                .batch =
                    [](batch& b) {
                      b.scores.cols = 3;
                      b.scores.row_stride = 16;
                    }},
       .expected = "invalid parameter: k = 4: must be at most the expert count E = 3"},
      {.what = "bias with probabilities input",
       .inputs =
           [](problem& p) {
             p.ref.bias.assign(16, 0.0f);
             p.ref.scoring = naive::mode::probabilities;
           },
       .expected = "invalid parameter: batch.bias = 1: does not apply to probabilities input (s = p); scoring mode is "
                   "batch.mode = 3"},
      {.what = "a bias is accepted with softmax scoring (s = p + bias)",
       .inputs = [](problem& p) { p.ref.bias.assign(16, 0.0f); }},
      {.what = "a plan sized for fewer experts than the batch",
       .plan = {.experts = 8},
       .expected =
           "shape mismatch: plan.experts = 8: (the length of plan.expert_tokens) must be at least batch.E = 16"},
      {.what = "a plan sized for fewer devices than the placement",
       .inputs =
           [](problem& p) {
             set_placement(p, 4, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
           },
       .plan = {.devices = 2},
       .expected = "shape mismatch: plan.devices = 2: (the length of plan.device_loads) must be at least "
                   "batch.device_count = 4"},
      {.what = "a hand-made plan view that gives expert_tokens without its length",
       .call = {.plan = [](mr::plan_view& view) { view.experts = 0; }},
       .expected =
           "shape mismatch: plan.experts = 0: (the length of plan.expert_tokens) must be at least batch.E = 16"},
      {.what = "a group limit that leaves fewer candidates than k",
       .call = {.batch =
                    [](batch& b) {
                      b.groups = {8, 1};
                    }},  // one group of two experts kept, k = 4
       .expected = "invalid parameter: groups.topk_group = 1: leaves topk_group * E / n_group candidate experts, fewer "
                   "than plan.top_k = 4"},
      {.what = "a group limit that leaves exactly k candidates",
       .call = {.batch =
                    [](batch& b) {
                      b.groups = {8, 2};
                    }}},
      {.what = "groups that do not divide E",
       .call = {.batch =
                    [](batch& b) {
                      b.groups = {5, 2};
                    }},
       .expected = "invalid parameter: groups.n_group = 5: must divide the expert count batch.E = 16"},
      {.what = "topk_group above n_group",
       .call = {.batch =
                    [](batch& b) {
                      b.groups = {4, 5};
                    }},
       .expected = "invalid parameter: groups.topk_group = 5: must be in [1, groups.n_group] groups.n_group = 4"},
      {.what = "segments that go backwards",
       .inputs =
           [](problem& p) {
             set_segments(p, {0, 3, 2, 4});
           },
       .expected = "invalid input: segments[2] = 2: must not be below the previous offset segments[1] = 3"},
      {.what = "segments that do not cover the batch",
       .inputs =
           [](problem& p) {
             set_segments(p, {0, 3});
           },
       .expected = "invalid input: segments[R] = 3: must equal batch.n = 4"},
      {.what = "placement outside the devices",
       .inputs =
           [](problem& p) {
             std::vector<std::int32_t> placement(16, 0);
             placement[7] = 2;
             set_placement(p, 2, placement);
           },
       .expected = "invalid input: placement[7] = 2: must be in [0, device_count) batch.device_count = 2"},
      {.what = "more devices than the library supports",
       .inputs = [](problem& p) { set_placement(p, 1, std::vector<std::int32_t>(16, 0)); },
       .call = {.batch = [](batch& b) { b.device_count = 5000; }},
       .expected = "invalid input: batch.device_count = 5000: must be in [1, max_experts] when a placement is given "
                   "max_experts = 1024"},
      {.what = "null plan buffers",
       .call = {.plan = [](mr::plan_view& view) { view.ids = nullptr; }},
       .expected = "null pointer: plan.ids = 0: must not be null when batch.n = 4"},
  };
}

template <class Runner>
void bad_input_is_named() {
  for (const bad_input_row& row : bad_input_rows()) {
    const std::string what = row.what, expected = row.expected;  // doctest prints a char* as a pointer
    CAPTURE(what);
    problem p = bad_input_fixture();
    if (row.inputs != nullptr) row.inputs(p);
    mr::routing_plan plan({.tokens = row.plan.tokens,
                           .experts = row.plan.experts,
                           .top_k = row.plan.top_k,
                           .devices = row.plan.devices.value_or(p.ref.G)});
    const mr::status got = Runner::route(mr::presets::oea(2, 4), p, plan, row.call);
    CHECK_MESSAGE(Runner::reports(got, expected),
                  "got \"" << mr::to_string(got) << "\", expected \"" << expected << "\"");
  }
}

}  // namespace test::bodies

/// The bad-input table as a test case on `Runner`.
#define MOE_ROUTING_BAD_INPUT_TESTS(Runner)                                          \
  MOE_ROUTING_BACKEND_TEST_CASE(Runner, "shape and input errors name what is wrong", \
                                test::bodies::bad_input_is_named<Runner>())

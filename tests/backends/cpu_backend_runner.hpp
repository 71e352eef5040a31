#pragma once
// The CPU backend behind the interface every backend runner has, so that one test body
// (tests/bodies/) runs on each backend:
//   route(policy, problem, host plan[, overrides]) -> status   routes into the host plan
//   reports(status, cpu_message) -> bool                         the backend's word for an error
//   executor<Weight>(routed, shared, shape).forward(x, plan, with_shared, fused, y) -> status
//                                                                (in cpu_executor_runner.hpp)
// plus `available()`, `unavailable_reason()`, `test_name_suffix` and `test_suite`
// (tests/backends/backend_test_case.hpp). The CUDA runner (cuda_backend_runner.cuh) has
// the same members.

#include <string>
#include <string_view>

#include <moe_routing/cpu.hpp>

#include "backends/call_overrides.hpp"
#include "test_support.hpp"

namespace test {

struct cpu_backend_runner {
  static constexpr const char* name = "cpu";
  /// Nothing appended: the CPU suite keeps its test names, and no test suite of its own.
  static constexpr const char* test_name_suffix = "";
  static constexpr const char* test_suite = "";
  static bool available() { return true; }
  static std::string unavailable_reason() { return {}; }

  /// Routes `p` into `plan` (its shape and padding are the caller's) with a workspace of
  /// the problem's shape unless `changes` says otherwise.
  template <class Policy>
  static mr::status route(const Policy& policy, const problem& p, mr::routing_plan& plan,
                          const call_overrides& changes = {}) {
    mr::cpu::workspace ws(changes.workspace.value_or(workspace_shape_of(p)));
    mr::plan_view view = plan.view();
    if (changes.plan) changes.plan(view);
    return visit_element_type(p.type, [&](auto element) {
      auto batch = p.batch<decltype(element)>();
      apply_batch_edit(changes, batch);
      return mr::cpu::route(policy, batch, view, ws);
    });
  }

  /// The CPU backend's messages are the reference: equal word for word.
  static bool reports(const mr::status& got, std::string_view cpu_message) { return mr::to_string(got) == cpu_message; }

  /// The grouped MoE executor, defined in tests/backends/cpu_executor_runner.hpp.
  template <class Weight>
  class executor;
};

}  // namespace test

#pragma once
// What a test may change in a routing call beyond the problem itself, shared by every
// backend runner: the workspace's shape, and last-moment edits of the batch and plan
// views, applied after the runner has placed the inputs where its backend reads them
// (bad-input tests break a shape or null a pointer there).

#include <functional>
#include <optional>
#include <type_traits>

#include <doctest/doctest.h>
#include <moe_routing/core/workspace_shape.hpp>
#include <moe_routing/moe_routing.hpp>

#include "test_support.hpp"

namespace test {

struct call_overrides {
  /// The workspace's shape; by default exactly the problem's (n, E, k).
  std::optional<mr::workspace_shape> workspace;
  /// Edits the batch view. Written for float32 problems: a runner refuses it on others.
  std::function<void(mr::routing_batch<float>&)> batch;
  /// Edits the plan view (its shape fields and pointers) before the call.
  std::function<void(mr::plan_view&)> plan;
};

inline mr::workspace_shape workspace_shape_of(const problem& p) { return {p.ref.n, p.ref.E, p.top_k}; }

/// Applies `changes.batch` to a batch of the problem's element type.
template <class Element>
void apply_batch_edit(const call_overrides& changes, mr::routing_batch<Element>& batch) {
  if (!changes.batch) return;
  if constexpr (std::is_same_v<Element, float>) {
    changes.batch(batch);
  } else {
    FAIL("a batch edit is written for float32 problems");
  }
}

/// Calls `visit(Element{})` with the problem's score element type.
template <class Visitor>
decltype(auto) visit_element_type(element type, Visitor&& visit) {
  switch (type) {
    case element::f16:
      return visit(mr::float16{});
    case element::bf16:
      return visit(mr::bfloat16{});
    case element::f32:
      break;
  }
  return visit(float{});
}

}  // namespace test

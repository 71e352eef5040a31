#pragma once
// Routing a test problem on any backend runner into a fresh host plan.

#include <doctest/doctest.h>
#include <moe_routing/moe_routing.hpp>

#include "test_support.hpp"

namespace test {

/// The plan `Runner`'s backend routes for `p` under `policy` (any policy form); the call
/// must succeed.
template <class Runner, class Policy>
mr::routing_plan route_on(const problem& p, const Policy& policy, mr::padding pad = {}) {
  mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G, .pad = pad});
  const mr::status s = Runner::route(policy, p, plan);
  REQUIRE_MESSAGE(s.ok(), mr::to_string(s));
  return plan;
}

}  // namespace test

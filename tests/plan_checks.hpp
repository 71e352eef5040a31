#pragma once
// Routing one test problem through the library, and comparing plans.

#include <execution>
#include <string>

#include <doctest/doctest.h>
#include <moe_routing/cpu.hpp>

#include "test_support.hpp"

namespace test {

/// Routes `p` with `policy` (any policy form) on the CPU backend into a fresh plan.
template <class Policy, class Exec = std::execution::sequenced_policy>
mr::routing_plan route_problem(const problem& p, const Policy& policy, mr::padding pad = {}, Exec exec = {}) {
  mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G, .pad = pad});
  mr::cpu::workspace ws({p.ref.n, p.ref.E, p.top_k});
  mr::status s;
  switch (p.type) {
    case element::f32:
      s = mr::cpu::route(policy, p.batch<float>(), plan.view(), ws, exec);
      break;
    case element::f16:
      s = mr::cpu::route(policy, p.batch<mr::float16>(), plan.view(), ws, exec);
      break;
    case element::bf16:
      s = mr::cpu::route(policy, p.batch<mr::bfloat16>(), plan.view(), ws, exec);
      break;
  }
  REQUIRE_MESSAGE(s.ok(), mr::to_string(s));
  return plan;
}

/// ids, counts and weights of the library plan equal the naive plan's.
inline void check_against_naive(const mr::routing_plan& got, const naive::plan& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.ids().size() == want.ids.size());
  for (int i = 0; i < want.n; ++i) {
    INFO("token " << i);
    REQUIRE(got.count(i) == want.counts[i]);
    for (int j = 0; j < want.k; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * want.k + j;
      if (j < want.counts[i]) {
        REQUIRE(got.ids()[at] == want.ids[at]);
        REQUIRE_MESSAGE(close(got.weights()[at], want.weights[at]), got.weights()[at] << " vs " << want.weights[at]);
      }
    }
    REQUIRE(got.guaranteed(i) == want.guaranteed[i]);
  }
  CHECK(got.summary().selected_count == want.selected);
  CHECK(got.summary().active_count == want.active_count);
  for (int e = 0; e < static_cast<int>(want.S.size()); ++e) {
    REQUIRE(got.summary().selected.contains(e) == static_cast<bool>(want.S[static_cast<std::size_t>(e)]));
  }
}

/// Bitwise equality of two plans (determinism).
inline bool identical(const mr::routing_plan& a, const mr::routing_plan& b) {
  const bool same_weight_bits = a.weights().size() == b.weights().size() &&
                                (a.weights().empty() || std::memcmp(a.weights().data(), b.weights().data(),
                                                                    a.weights().size() * sizeof(float)) == 0);
  return a.ids() == b.ids() && a.counts() == b.counts() && same_weight_bits &&
         a.summary().active == b.summary().active && a.summary().selected == b.summary().selected &&
         a.expert_tokens() == b.expert_tokens() && a.device_loads() == b.device_loads();
}

}  // namespace test

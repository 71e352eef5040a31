#pragma once
/// \file
/// The modelled time of one MoE layer under expert parallelism. Each device fetches its
/// own active experts and computes its own (token, expert) assignments, and the layer
/// ends when the slowest device does, so the batch pays for its busiest device:
///
///   T_EP = max over devices d of (N_active(d) * t_fetch + assignments(d) * t_token)
///
/// With t_token = 0 this is `max_device_load * t_fetch`. Without a placement every expert
/// is on one device and T_EP is `latency_model::time(N_active, assignments)`, the model of
/// `measure_plan`. A policy that spreads fewer experts unevenly can therefore save less
/// time than its |active| suggests, or none: what expert parallelism rewards is a lighter
/// busiest device (docs/choosing.md).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/metrics/plan_metrics.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing {

/// T_EP of `plan`, routed from `batch`, whose placement (if any) says which device holds
/// each expert. Counts the assignments of valid tokens only, as `measure_plan` does.
/// Precondition: `plan` was routed from `batch` (the routing call checked its placement).
/// O(n k + E + G); allocates two vectors of G entries (off the hot path).
template <score_element Element>
double expert_parallel_latency(const routing_batch<Element>& batch, const routing_plan& plan,
                               latency_model model = {}) {
  const int devices = batch.placement != nullptr ? std::max(1, batch.device_count) : 1;
  const auto device_of = [&](int expert) { return batch.placement != nullptr ? batch.placement[expert] : 0; };
  std::vector<int> active(static_cast<std::size_t>(devices), 0);
  std::vector<long long> assignments(static_cast<std::size_t>(devices), 0);
  plan.summary().active.for_each([&](int expert) { ++active[static_cast<std::size_t>(device_of(expert))]; });
  for (int token = 0; token < plan.tokens(); ++token) {
    if (!batch.is_valid(token)) continue;
    for (int j = 0; j < plan.count(token); ++j) ++assignments[static_cast<std::size_t>(device_of(plan.id(token, j)))];
  }
  double busiest = 0;
  for (int d = 0; d < devices; ++d) {
    busiest =
        std::max(busiest, model.time(active[static_cast<std::size_t>(d)], assignments[static_cast<std::size_t>(d)]));
  }
  return busiest;
}

}  // namespace moe_routing

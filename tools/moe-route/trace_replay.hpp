#pragma once
/// \file
/// The tool's view of a trace replay: the library's `moe_routing::cpu::replay_trace`
/// (any compiled or runtime policy; <moe_routing/cpu/trace_replay.hpp>) with the policy's
/// text beside its figures, as the reports print them. The figures are the library's, so
/// a custom stage replayed from C++ is measured exactly as `moe-route replay` measures
/// a built-in.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <moe_routing/cpu/trace_replay.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/metrics/plan_metrics.hpp>
#include <moe_routing/policies/policy_checks.hpp>

namespace moe_route {

namespace mr = moe_routing;

using figure = mr::replay_figure;
using replay_figures = mr::replay_figures;

struct policy_replay {
  std::string policy;
  replay_figures overall;              ///< over every (layer, step)
  std::vector<replay_figures> layers;  ///< per layer, over its steps
};

/// Called with (work done, total work) as a replay advances.
using replay_progress = std::function<void(long long, long long)>;

/// Replays `policy` (named `name` in the report) over the whole trace. Throws
/// routing_error if the policy does not fit the trace's shape.
template <mr::routing_policy Policy>
policy_replay replay_trace(const mr::io::trace& trace, const Policy& policy, const std::string& name,
                           mr::latency_model model = {}, const replay_progress& progress = {}) {
  mr::trace_replay_report report =
      progress ? mr::cpu::replay_trace(trace, policy, model, progress) : mr::cpu::replay_trace(trace, policy, model);
  return {name, report.overall, std::move(report.layers)};
}

}  // namespace moe_route

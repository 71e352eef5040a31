#pragma once
/// \file
/// Replays a policy over every layer and decode step of a trace, next to vanilla
/// top-k, and summarises what it would have cost and kept: per layer and overall, the
/// mean and spread (standard deviation over steps) of |active|, |S|, retained gate mass,
/// top-k recall, the largest device load and the modelled latency ratio to vanilla.
/// A tool concern (it owns strings and a std::function), so it lives with moe-route rather
/// than in the backend's public headers; the library calls it uses are the public `route`
/// and `measure_plan`.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <moe_routing/core/error.hpp>
#include <moe_routing/core/half.hpp>
#include <moe_routing/cpu/route.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/metrics/plan_metrics.hpp>
#include <moe_routing/plan/routing_plan.hpp>
#include <moe_routing/policies/presets.hpp>
#include <moe_routing/policies/runtime_policy.hpp>

namespace moe_route {

namespace mr = moe_routing;

/// Mean and spread of one figure over a set of steps.
struct figure {
  double mean = 0;
  double spread = 0;  ///< population standard deviation
};

struct replay_figures {
  figure active, selected, retained_mass, recall, max_device_load, latency_ratio;
  int steps = 0;  ///< every step; quality figures count only those with a valid token
};

struct policy_replay {
  std::string policy;
  replay_figures overall;              ///< over every (layer, step)
  std::vector<replay_figures> layers;  ///< per layer, over its steps
};

namespace detail {

/// Sum of x and x^2 of one figure over the steps that count for it.
struct figure_sum {
  double sum = 0, squares = 0;
  int count = 0;
  void add(double value) {
    sum += value;
    squares += value * value;
    ++count;
  }
  /// Mean and population spread; NaN for both when no step counted.
  figure result() const {
    if (count == 0) return {std::nan(""), std::nan("")};
    const double mean = sum / count;
    return {mean, std::sqrt(std::max(0.0, squares / count - mean * mean))};
  }
};

/// The report's figures accumulated step by step. Quality figures (retained mass, recall,
/// latency ratio) count only steps with a valid token: a step with nothing to route keeps
/// nothing and loses nothing, and averaging it as 1.0 would flatter every policy.
struct figure_sums {
  figure_sum active, selected, retained_mass, recall, max_device_load, latency_ratio;
  int steps = 0;
  void add(const mr::plan_metrics& m) {
    active.add(m.active);
    selected.add(m.selected);
    max_device_load.add(m.max_device_load);
    if (m.valid_tokens > 0) {
      retained_mass.add(m.mean_retained_mass);
      recall.add(m.mean_recall);
      latency_ratio.add(m.modelled_latency_ratio);
    }
    ++steps;
  }
  replay_figures result() const {
    return {active.result(),
            selected.result(),
            retained_mass.result(),
            recall.result(),
            max_device_load.result(),
            latency_ratio.result(),
            steps};
  }
};

}  // namespace detail

/// Called with (work done, total work) as a replay advances.
using replay_progress = std::function<void(long long, long long)>;

/// Replays `policy` (named `name` in the report) over the whole trace. Throws
/// routing_error if the policy does not fit the trace's shape.
inline policy_replay replay_trace(const mr::io::trace& trace, const mr::runtime_policy& policy, const std::string& name,
                                  mr::latency_model model = {}, const replay_progress& progress = {}) {
  int largest_step = 1;
  for (int s = 0; s < trace.step_count(); ++s) {
    largest_step = std::max(largest_step, trace.step_end(s) - trace.step_begin(s));
  }
  const int k = trace.top_k;
  mr::cpu::workspace ws({largest_step, trace.experts, k});
  const mr::runtime_policy vanilla = mr::to_runtime_policy(mr::presets::vanilla(k));
  std::vector<std::int32_t> segments;
  policy_replay report;
  report.policy = name;
  detail::figure_sums overall;
  const long long total = static_cast<long long>(trace.layers) * trace.step_count();
  for (int layer = 0; layer < trace.layers; ++layer) {
    detail::figure_sums per_layer;
    for (int s = 0; s < trace.step_count(); ++s) {
      const int n = trace.step_end(s) - trace.step_begin(s);
      mr::routing_plan plan(n, k, trace.experts, trace.devices), base(n, k, trace.experts, trace.devices);
      auto run = [&](const auto& batch) {
        mr::throw_if_failed(mr::cpu::route(vanilla, batch, base.view(), ws));
        mr::throw_if_failed(mr::cpu::route(policy, batch, plan.view(), ws));
        return mr::measure_plan(batch, plan, base, model);
      };
      const mr::plan_metrics m =
          trace.half ? run(trace.batch<mr::float16>(layer, s, segments)) : run(trace.batch<float>(layer, s, segments));
      per_layer.add(m);
      overall.add(m);
      if (progress) progress(static_cast<long long>(layer) * trace.step_count() + s + 1, total);
    }
    report.layers.push_back(per_layer.result());
  }
  report.overall = overall.result();
  return report;
}

}  // namespace moe_route

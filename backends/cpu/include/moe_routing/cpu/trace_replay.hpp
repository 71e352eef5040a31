#pragma once
/// \file
/// Replays any routing policy (a runtime policy, a built-in pipeline, or a pipeline with
/// stages of your own) over every layer and step of a router trace, next to vanilla top-k,
/// on the CPU backend: per layer and overall, the mean and spread (population standard
/// deviation over steps) of |active|, |S|, retained gate mass, top-k recall, the busiest
/// device's active experts and the modelled latency ratio to vanilla. `moe-route replay`
/// and `moe-route sweep` report exactly these figures, so a custom stage measured here is
/// measured as the tool measures the built-ins.
///
/// \code
///   const auto trace = moe_routing::io::load_trace("qwen");
///   const auto mine = moe_routing::prune{.k0 = 2} | my_stage{} | moe_routing::refine{.k = 8};
///   const auto report = moe_routing::cpu::replay_trace(trace, mine);
///   std::printf("|active| %.2f, retained mass %.3f\n", report.overall.active.mean,
///               report.overall.retained_mass.mean);
/// \endcode
/// (examples/replay_custom_stage.cpp; tests/tool_test.cpp checks it against the tool.)
///
/// The latency ratio is `T(policy) / T(vanilla)` per step with the model of
/// `measure_plan` (`T = N_active t_fetch + assignments t_token`); when the trace has a
/// placement, with `expert_parallel_latency` instead (the busiest device's time).
/// Off the hot path: it allocates plans and a workspace, and throws `routing_error` when
/// the policy does not fit the trace (its k above the trace's, a stage that needs a
/// placement the trace lacks, ...).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "moe_routing/core/error.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/route.hpp"
#include "moe_routing/cpu/workspace.hpp"
#include "moe_routing/io/trace.hpp"
#include "moe_routing/metrics/expert_parallel_latency.hpp"
#include "moe_routing/metrics/plan_metrics.hpp"
#include "moe_routing/plan/routing_plan.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/presets.hpp"

namespace moe_routing {

/// Mean and spread of one figure over a set of steps; both NaN when no step counted it.
struct replay_figure {
  double mean = 0;
  double spread = 0;  ///< population standard deviation
};

struct replay_figures {
  replay_figure active, selected, retained_mass, recall;
  replay_figure max_device_load;  ///< NaN without a placement: there is no device to be busiest
  replay_figure latency_ratio;    ///< device-aware when the trace has a placement
  int steps = 0;                  ///< every step; quality figures count only those with a valid token
};

struct trace_replay_report {
  replay_figures overall;              ///< over every (layer, step)
  std::vector<replay_figures> layers;  ///< per layer, over its steps
};

/// A progress callback that ignores progress.
struct no_replay_progress {
  constexpr void operator()(long long, long long) const noexcept {}
};

namespace detail {

/// Sum of x and x^2 of one figure over the steps that count for it.
struct replay_figure_sum {
  double sum = 0, squares = 0;
  int count = 0;
  void add(double value) {
    sum += value;
    squares += value * value;
    ++count;
  }
  replay_figure result() const {
    if (count == 0) return {std::nan(""), std::nan("")};
    const double mean = sum / count;
    return {mean, std::sqrt(std::max(0.0, squares / count - mean * mean))};
  }
};

/// What one step of one layer contributes.
struct replay_step {
  plan_metrics metrics;
  bool placed = false;
  double latency_ratio = 1.0;
};

/// The figures accumulated step by step. Quality figures (retained mass, recall, latency
/// ratio) count only steps with a valid token: a step with nothing to route keeps nothing
/// and loses nothing, and averaging it as 1.0 would flatter every policy.
struct replay_figure_sums {
  replay_figure_sum active, selected, retained_mass, recall, max_device_load, latency_ratio;
  int steps = 0;
  void add(const replay_step& step) {
    const plan_metrics& m = step.metrics;
    active.add(m.active);
    selected.add(m.selected);
    if (step.placed) max_device_load.add(m.max_device_load);
    if (m.valid_tokens > 0) {
      retained_mass.add(m.mean_retained_mass);
      recall.add(m.mean_recall);
      latency_ratio.add(step.latency_ratio);
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

namespace cpu {

/// Replays `policy` over the whole trace (see the file comment). `progress(done, total)`
/// is called after each (layer, step). Throws routing_error if the policy does not fit
/// the trace's shape (checked before the first step is routed).
template <routing_policy Policy, class Progress = no_replay_progress>
trace_replay_report replay_trace(const io::trace& trace, const Policy& policy, latency_model model = {},
                                 Progress&& progress = {}) {
  const int k = trace.top_k;
  throw_if_failed(bind_policy(policy, binding_shape{trace.experts, k, !trace.placement.empty()}));
  int largest_step = 1;
  for (int s = 0; s < trace.step_count(); ++s) {
    largest_step = std::max(largest_step, trace.step_end(s) - trace.step_begin(s));
  }
  workspace ws({largest_step, trace.experts, k});
  const auto vanilla = presets::vanilla(k);
  const bool placed = !trace.placement.empty();
  std::vector<std::int32_t> segments;
  trace_replay_report report;
  moe_routing::detail::replay_figure_sums overall;
  const long long total = static_cast<long long>(trace.layers) * trace.step_count();
  for (int layer = 0; layer < trace.layers; ++layer) {
    moe_routing::detail::replay_figure_sums per_layer;
    for (int s = 0; s < trace.step_count(); ++s) {
      const int n = trace.step_end(s) - trace.step_begin(s);
      const int devices = placed ? trace.devices : 0;
      routing_plan plan({.tokens = n, .experts = trace.experts, .top_k = k, .devices = devices}),
          base({.tokens = n, .experts = trace.experts, .top_k = k, .devices = devices});
      auto run = [&](const auto& batch) {
        throw_if_failed(route(vanilla, batch, base.view(), ws));
        throw_if_failed(route(policy, batch, plan.view(), ws));
        moe_routing::detail::replay_step step{measure_plan(batch, plan, base, model), placed, 1.0};
        step.latency_ratio = step.metrics.modelled_latency_ratio;
        if (placed) {
          const double vanilla_time = expert_parallel_latency(batch, base, model);
          step.latency_ratio = vanilla_time > 0 ? expert_parallel_latency(batch, plan, model) / vanilla_time : 1.0;
        }
        return step;
      };
      const moe_routing::detail::replay_step step =
          trace.half ? run(trace.batch<float16>(layer, s, segments)) : run(trace.batch<float>(layer, s, segments));
      per_layer.add(step);
      overall.add(step);
      progress(static_cast<long long>(layer) * trace.step_count() + s + 1, total);
    }
    report.layers.push_back(per_layer.result());
  }
  report.overall = overall.result();
  return report;
}

}  // namespace cpu

}  // namespace moe_routing

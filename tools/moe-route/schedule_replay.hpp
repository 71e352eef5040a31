#pragma once
// Per-layer schedules in `moe-route replay`: replaying a schedule text (a policy with
// per-layer lists, policies/layer_schedule.hpp) and fitting one to a budget (`--fit`).
//
// Layers are routed independently, so a schedule's figures at layer l are those of the
// uniform policy that holds layer l's values, at layer l: both commands replay each
// distinct per-layer policy once over the trace and read off the layers they need.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <moe_routing/metrics/schedule_fit.hpp>
#include <moe_routing/policies/layer_schedule.hpp>

#include "command_line.hpp"
#include "replay_output.hpp"
#include "trace_input.hpp"

namespace moe_route {

/// Pools per-layer figures into overall ones, each layer weighted by its step count
/// (exact for the means; the spread is the pooled population spread).
inline replay_figures pool_layers(const std::vector<replay_figures>& layers) {
  const auto pool = [&](auto member) {
    double sum = 0, squares = 0, weight = 0;
    for (const auto& layer : layers) {
      const figure& f = layer.*member;
      if (std::isnan(f.mean)) continue;
      const double w = layer.steps;
      sum += w * f.mean;
      squares += w * (f.spread * f.spread + f.mean * f.mean);
      weight += w;
    }
    if (weight == 0) return figure{std::nan(""), std::nan("")};
    const double mean = sum / weight;
    return figure{mean, std::sqrt(std::max(0.0, squares / weight - mean * mean))};
  };
  replay_figures out;
  out.active = pool(&replay_figures::active);
  out.selected = pool(&replay_figures::selected);
  out.retained_mass = pool(&replay_figures::retained_mass);
  out.recall = pool(&replay_figures::recall);
  out.max_device_load = pool(&replay_figures::max_device_load);
  out.latency_ratio = pool(&replay_figures::latency_ratio);
  for (const auto& layer : layers) out.steps += layer.steps;
  return out;
}

/// Per-layer figures of each distinct policy text, replayed once each.
class layer_figure_cache {
 public:
  layer_figure_cache(const mr::io::trace& trace, mr::latency_model model) : trace_(trace), model_(model) {}
  const std::vector<replay_figures>& layers_of(const std::string& text) {
    auto found = cache_.find(text);
    if (found != cache_.end()) return found->second;
    const mr::runtime_policy policy = parse_or_usage(text);
    const mr::status bound = mr::bind_policy(policy, {trace_.experts, trace_.top_k, !trace_.placement.empty()});
    if (!bound.ok()) throw usage_error(mr::to_string(bound) + " in '" + text + "'");
    return cache_[text] = replay_trace(trace_, policy, text, model_).layers;
  }

 private:
  const mr::io::trace& trace_;
  mr::latency_model model_;
  std::map<std::string, std::vector<replay_figures>> cache_;
};

/// The lists of a schedule text, or a usage error naming what is wrong.
inline std::vector<mr::detail::schedule_list> schedule_lists_or_usage(const std::string& text) {
  std::vector<mr::detail::schedule_list> lists;
  std::string message;
  if (!mr::detail::find_schedule_lists(text, lists, message)) throw usage_error(message + " in '" + text + "'");
  return lists;
}

/// Replays a schedule text (or a plain policy: a schedule of one entry) over the trace.
inline policy_replay replay_schedule(const mr::io::trace& trace, const std::string& text, layer_figure_cache& cache) {
  mr::layer_schedule checked;
  const mr::schedule_parse_result parsed = mr::parse_layer_schedule(text, checked);
  if (!parsed.outcome.ok()) throw usage_error(parsed.message);
  const mr::status fits = checked.check_layers(trace.layers);
  if (!fits.ok()) throw usage_error(mr::to_string(fits) + " in '" + text + "'");
  const auto lists = schedule_lists_or_usage(text);
  policy_replay report{text, {}, {}};
  for (int layer = 0; layer < trace.layers; ++layer) {
    const std::string layer_text = lists.empty() ? text : mr::schedule_layer_text(text, lists, layer);
    report.layers.push_back(cache.layers_of(layer_text)[static_cast<std::size_t>(layer)]);
  }
  report.overall = pool_layers(report.layers);
  return report;
}

/// `values` as a schedule list, runs written `v*n`: [4*3,3,2*44].
inline std::string schedule_list_text(const std::vector<std::string>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size();) {
    std::size_t run = 1;
    while (i + run < values.size() && values[i + run] == values[i]) ++run;
    if (i > 0) out += ",";
    out += values[i];
    if (run > 1) out += "*" + std::to_string(run);
    i += run;
  }
  return out + "]";
}

/// `replay --fit TEMPLATE [--budget B] [--budget-by active|latency]`: TEMPLATE holds one list,
/// the grid each layer picks from. For each uniform choice (and for B when given), the schedule
/// of most retained mass whose summed per-layer cost (mean |active|, or modelled latency ratio)
/// is at most that budget, printed in the text form the parser accepts.
inline int fit_schedule_command(const arguments& args, const mr::io::trace& trace, const std::string& dir,
                                mr::latency_model model) {
  const std::string text = args.required("fit");  // --budget alone: "missing required option --fit"
  for (const char* other : {"policy", "devices", "json", "csv"}) {
    if (args.has(other)) throw usage_error(std::string("--fit takes no --") + other + " (it prints its own table)");
  }
  const auto lists = schedule_lists_or_usage(text);
  if (lists.size() != 1) {
    throw usage_error(
        "--fit needs exactly one list, the grid each layer picks from, e.g. "
        "'prune(k0=[1,2,3,4]) | refine(k=8)'; got " +
        std::to_string(lists.size()) + " in '" + text + "'");
  }
  const std::string by = args.get("budget-by", "active");
  if (by != "active" && by != "latency") throw usage_error("--budget-by must be active or latency, not '" + by + "'");
  const auto& grid = lists[0].entries;
  layer_figure_cache cache(trace, model);
  std::vector<std::string> uniform_texts;
  for (std::size_t v = 0; v < grid.size(); ++v) {
    uniform_texts.push_back(mr::schedule_layer_text(text, lists, static_cast<int>(v)));
    cache.layers_of(uniform_texts.back());
  }
  const auto cost_of = [&](const replay_figures& f) { return by == "active" ? f.active.mean : f.latency_ratio.mean; };
  const auto gain_of = [](const replay_figures& f) {
    return std::isnan(f.retained_mass.mean) ? 0.0 : f.retained_mass.mean;
  };
  std::vector<std::vector<mr::layer_option>> options(static_cast<std::size_t>(trace.layers));
  for (int l = 0; l < trace.layers; ++l) {
    for (const auto& uniform : uniform_texts) {
      const replay_figures& f = cache.layers_of(uniform)[static_cast<std::size_t>(l)];
      options[static_cast<std::size_t>(l)].push_back({cost_of(f), gain_of(f)});
    }
  }
  const auto schedule_text = [&](const mr::fitted_schedule& fit) {
    std::vector<std::string> values;
    for (const int v : fit.choice) values.push_back(grid[static_cast<std::size_t>(v)]);
    const auto& list = lists[0];
    return text.substr(0, list.begin) + schedule_list_text(values) + text.substr(list.end);
  };
  std::printf("fit of %s over %d layers of %s; cost = sum over layers of %s\n", text.c_str(), trace.layers, dir.c_str(),
              by == "active" ? "mean |active|" : "modelled latency / vanilla");
  std::printf("%-10s %12s %10s %8s | %12s %10s %8s  %s\n", "uniform", "cost", "retained", "recall", "fitted cost",
              "retained", "recall", "fitted schedule");
  std::vector<double> budgets;
  std::vector<std::string> labels;
  for (std::size_t v = 0; v < grid.size(); ++v) {
    double cost = 0;
    for (int l = 0; l < trace.layers; ++l) cost += options[static_cast<std::size_t>(l)][v].cost;
    budgets.push_back(cost);
    labels.push_back(lists[0].parameter + "=" + grid[v]);
  }
  if (args.has("budget")) {
    budgets.push_back(parse_finite(args.required("budget"), "--budget"));
    labels.push_back("budget");
  }
  for (std::size_t b = 0; b < budgets.size(); ++b) {
    // The best uniform schedule within this budget (for a uniform row: itself).
    int best_uniform = -1;
    for (std::size_t v = 0; v < grid.size(); ++v) {
      const replay_figures u = pool_layers(cache.layers_of(uniform_texts[v]));
      if (budgets[v] <= budgets[b] &&
          (best_uniform < 0 ||
           u.retained_mass.mean > pool_layers(cache.layers_of(uniform_texts[static_cast<std::size_t>(best_uniform)]))
                                      .retained_mass.mean)) {
        best_uniform = static_cast<int>(v);
      }
    }
    const mr::fitted_schedule fit = mr::fit_schedule(options, budgets[b]);
    char uniform_part[96] = "(no uniform choice fits)";
    if (best_uniform >= 0) {
      const replay_figures u = pool_layers(cache.layers_of(uniform_texts[static_cast<std::size_t>(best_uniform)]));
      std::snprintf(uniform_part, sizeof uniform_part, "%12.3f %10.4f %8.4f",
                    budgets[static_cast<std::size_t>(best_uniform)], u.retained_mass.mean, u.recall.mean);
    }
    if (!fit.feasible) {
      std::printf("%-10s %s | no schedule within %.3f\n", labels[b].c_str(), uniform_part, budgets[b]);
      continue;
    }
    const policy_replay fitted = replay_schedule(trace, schedule_text(fit), cache);
    std::printf("%-10s %s | %12.3f %10.4f %8.4f  %s\n", labels[b].c_str(), uniform_part, fit.cost,
                fitted.overall.retained_mass.mean, fitted.overall.recall.mean, fitted.policy.c_str());
  }
  return 0;
}

/// `replay --fit ...` from the command line: the options are checked before the trace is read.
inline int fit_schedule_command(const arguments& args, mr::latency_model model) {
  (void)args.required("fit");
  const std::string dir = args.required("trace");
  return fit_schedule_command(args, load_trace_or_fail(dir), dir, model);
}

/// `replay --policy TEXT ...` when some text is a schedule: every text (a plain policy is a
/// schedule of one entry) replayed layer by layer, reported as plain replays are.
inline int replay_schedules_command(const arguments& args, const std::vector<std::string>& texts,
                                    mr::latency_model model) {
  if (args.has("devices")) throw usage_error("--devices takes plain policies, not per-layer schedules");
  const std::string dir = args.required("trace");
  const mr::io::trace trace = load_trace_or_fail(dir);
  layer_figure_cache cache(trace, model);
  std::vector<policy_replay> reports;
  for (const auto& text : texts) reports.push_back(replay_schedule(trace, text, cache));
  print_replays(dir, reports, args.has("json"), args.has("csv"));
  return 0;
}

}  // namespace moe_route

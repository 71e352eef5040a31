// `moe-route sweep`: replay every configuration of one or more policy grids over a trace
// and write a CSV and an SVG Pareto plot of |active| against retained mass.

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <moe_routing/moe_routing.hpp>
#include <range/v3/view/enumerate.hpp>
#include <range/v3/view/zip.hpp>

#include "command_line.hpp"
#include "output_files.hpp"
#include "pareto_svg.hpp"
#include "policy_grid.hpp"
#include "replay_output.hpp"
#include "trace_input.hpp"

namespace moe_route {

namespace {
constexpr const char* sweep_help =
    "usage: moe-route sweep --trace DIR --grid TEXT [--grid TEXT ...] [--csv FILE] [--svg FILE]\n"
    "\n"
    "A grid is a policy text whose values may be ranges A..B (step 1) or A..B:STEP, e.g.\n"
    "  --grid \"oea(k0=1..8,k=8)\" --grid \"skip(beta=0.1..0.9:0.2,k=8)\"\n"
    "Every combination is replayed over the trace (as moe-route replay does); configurations\n"
    "that do not fit the trace (e.g. k0 > k) are skipped with a note. Writes one CSV row per\n"
    "configuration (default sweep.csv) and an SVG plot with one point per configuration,\n"
    "labelled with the values its grid's ranges took (k0=3), and the Pareto frontier of mean\n"
    "|active| against mean retained mass (default sweep.svg). With a placement in the trace,\n"
    "the latency ratio is the busiest device's (see moe-route replay --help).\n";

/// One policy a grid stands for, parsed; `grid` is the index of that grid (its column in
/// the CSV, its colour in the plot).
struct configuration {
  int grid;
  std::string text;
  std::string label;  ///< its ranged parameters ("k0=3"), written beside its point
  mr::runtime_policy policy;
};

/// What the sweep measured, in the same order: the replay of each configuration that fits
/// the trace, and its point in the plot.
struct sweep_results {
  std::vector<policy_replay> reports;
  std::vector<plot_point> points;
};

/// Refuses, before any work, outputs that would land on each other or inside the trace,
/// or that cannot be written.
void check_outputs(const arguments& args, const std::string& csv_path, const std::string& svg_path) {
  refuse_shared_paths({{"csv", csv_path}, {"svg", svg_path}});
  check_destination(csv_path);
  check_destination(svg_path);
  if (args.has("trace")) {
    refuse_outputs_inside({"trace", args.get("trace", "")}, {{"csv", csv_path}, {"svg", svg_path}});
  }
}

/// Every policy the grids stand for, in order, read before the trace is: a text that is
/// not a policy is the caller's error (exit 2); one the library refuses is skipped with a
/// note.
std::vector<configuration> configurations_of(const std::vector<std::string>& grids) {
  std::vector<configuration> configurations;
  for (const auto& [grid_index, grid] : ranges::views::enumerate(grids)) {
    const std::vector<std::string> texts = expand_grid(grid), labels = grid_labels(grid);
    for (const auto& [text, label] : ranges::views::zip(texts, labels)) {
      const mr::parse_result parsed = mr::parse_policy(text);
      if (parsed.outcome.code == mr::errc::syntax_error) {
        const std::string message = mr::describe(parsed, text);
        throw usage_error(message.substr(0, message.find('\n')) + " in '" + text + "'");
      }
      if (!parsed.outcome.ok()) {
        std::fprintf(stderr, "sweep: skipping '%s': %s\n", text.c_str(), mr::to_string(parsed.outcome).c_str());
        continue;
      }
      configurations.push_back({static_cast<int>(grid_index), text, label, parsed.policy});
    }
  }
  return configurations;
}

/// Replays each configuration that fits the trace, with one progress bar for them all;
/// the others (e.g. k0 > k) are skipped with a note.
sweep_results replay_configurations(const mr::io::trace& trace, const std::vector<configuration>& configurations,
                                    const mr::latency_model& model, progress_clock::time_point started) {
  sweep_results results;
  replay_progress bar = stderr_progress("sweep", started);
  const auto count = static_cast<long long>(configurations.size());
  for (const auto& [index, config] : ranges::views::enumerate(configurations)) {
    const mr::status bound = mr::bind_policy(config.policy, {trace.experts, trace.top_k, !trace.placement.empty()});
    if (!bound.ok()) {
      std::fprintf(stderr, "sweep: skipping '%s': %s\n", config.text.c_str(), mr::to_string(bound).c_str());
      continue;
    }
    const auto before = static_cast<long long>(index);
    const replay_progress part = [&bar, before, count](long long done, long long total) {
      bar(before * total + done, count * total);
    };
    const policy_replay& report =
        results.reports.emplace_back(replay_trace(trace, config.policy, config.text, model, part));
    results.points.push_back(
        {config.text, config.label, config.grid, report.overall.active.mean, report.overall.retained_mass.mean});
  }
  bar(1, 1);  // finishes a bar left short by skipped configurations
  return results;
}

/// One row per configuration: its grid, the replay's figures over all layers, and whether
/// it is on the Pareto frontier.
std::string sweep_csv(const std::vector<std::string>& grids, const sweep_results& results) {
  std::ostringstream csv;
  csv << "grid," << csv_header() << ",pareto\n";
  for (const auto& [report, point] : ranges::views::zip(results.reports, results.points)) {
    csv << '"' << grids[static_cast<std::size_t>(point.series)] << "\","
        << csv_row(report.policy, "all", report.overall) << ',' << (point.pareto ? 1 : 0) << '\n';
  }
  return csv.str();
}

}  // namespace

int sweep_command(const std::vector<std::string>& words) {
  const progress_clock::time_point started = progress_clock::now();
  const arguments args(words, {"trace", "grid", "csv", "svg", "t-fetch", "t-token"}, {}, {"grid"});
  if (args.help()) {
    std::fputs(sweep_help, stdout);
    return 0;
  }
  const std::string csv_path = args.get("csv", "sweep.csv"), svg_path = args.get("svg", "sweep.svg");
  check_outputs(args, csv_path, svg_path);
  const std::vector<std::string> grids = args.all("grid");
  if (grids.empty()) throw usage_error("missing required option --grid");
  const mr::latency_model model = read_latency_model(args);
  const std::vector<configuration> configurations = configurations_of(grids);
  const std::string dir = args.required("trace");
  const mr::io::trace trace = load_trace_or_fail(dir);
  sweep_results results = replay_configurations(trace, configurations, model, started);
  if (!results.points.empty() && std::isnan(results.points.front().retained)) {
    throw input_error(dir + ": no step routes a valid token (every token is masked): nothing to plot");
  }
  if (results.points.empty()) throw usage_error("no configuration of the grid fits the trace");
  mark_pareto(results.points);

  const std::string title = "Policy sweep over " + dir + " (E = " + std::to_string(trace.experts) +
                            ", k = " + std::to_string(trace.top_k) + ")";
  output_files outputs;
  outputs.write(csv_path, sweep_csv(grids, results));
  outputs.write(svg_path, pareto_svg(results.points, grids, title));
  outputs.commit();
  std::printf("swept %zu configurations over %s: %s, %s\n", results.points.size(), dir.c_str(), csv_path.c_str(),
              svg_path.c_str());
  return 0;
}

}  // namespace moe_route

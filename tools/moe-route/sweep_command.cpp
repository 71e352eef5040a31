// `moe-route sweep`: replay every configuration of one or more policy grids over a trace
// and write a CSV and an SVG Pareto plot of |active| against retained mass.

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <moe_routing/moe_routing.hpp>

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
    "configuration (default sweep.csv) and an SVG plot with one point per configuration and\n"
    "the Pareto frontier of mean |active| against mean retained mass (default sweep.svg).\n";
}  // namespace

int sweep_command(const std::vector<std::string>& words) {
  const arguments args(words, {"trace", "grid", "csv", "svg", "t-fetch", "t-token"}, {}, {"grid"});
  if (args.help()) {
    std::fputs(sweep_help, stdout);
    return 0;
  }
  const std::string csv_path = args.get("csv", "sweep.csv"), svg_path = args.get("svg", "sweep.svg");
  refuse_shared_paths({{"csv", csv_path}, {"svg", svg_path}});
  check_destination(csv_path);
  check_destination(svg_path);
  if (args.has("trace")) refuse_outputs_inside({"trace", args.get("trace", "")}, {{"csv", csv_path}, {"svg", svg_path}});
  const std::vector<std::string> grids = args.all("grid");
  if (grids.empty()) throw usage_error("missing required option --grid");
  const mr::latency_model model = read_latency_model(args);
  struct configuration {
    int grid;
    std::string text;
    mr::runtime_policy policy;
  };
  std::vector<configuration> configurations;
  for (std::size_t g = 0; g < grids.size(); ++g) {
    for (const std::string& text : expand_grid(grids[g])) {
      const mr::parse_result parsed = mr::parse_policy(text);
      if (parsed.outcome.code == mr::errc::syntax_error) {
        const std::string message = mr::describe(parsed, text);
        throw usage_error(message.substr(0, message.find('\n')) + " in '" + text + "'");
      }
      if (!parsed.outcome.ok()) {
        std::fprintf(stderr, "sweep: skipping '%s': %s\n", text.c_str(), mr::to_string(parsed.outcome).c_str());
        continue;
      }
      configurations.push_back({static_cast<int>(g), text, parsed.policy});
    }
  }
  const std::string dir = args.required("trace");
  const mr::io::trace trace = load_trace_or_fail(dir);
  std::vector<plot_point> points;
  std::vector<mr::cpu::policy_replay> reports;
  for (std::size_t c = 0; c < configurations.size(); ++c) {
    const auto& config = configurations[c];
    const mr::status bound = mr::bind_policy(config.policy, {trace.experts, trace.top_k, !trace.placement.empty()});
    if (!bound.ok()) {
      std::fprintf(stderr, "sweep: skipping '%s': %s\n", config.text.c_str(), mr::to_string(bound).c_str());
      continue;
    }
    reports.push_back(mr::cpu::replay_trace(trace, config.policy, config.text, model,
                                            stderr_progress("sweep " + std::to_string(c + 1) + "/" + std::to_string(configurations.size()))));
    points.push_back({config.text, config.grid, reports.back().overall.active.mean, reports.back().overall.retained_mass.mean});
  }
  if (!points.empty() && std::isnan(points.front().retained)) {
    throw input_error(dir + ": no step routes a valid token (every token is masked): nothing to plot");
  }
  if (points.empty()) throw usage_error("no configuration of the grid fits the trace");
  mark_pareto(points);

  std::ostringstream csv;
  csv << "grid," << csv_header() << ",pareto\n";
  for (std::size_t i = 0; i < reports.size(); ++i) {
    csv << '"' << grids[static_cast<std::size_t>(points[i].series)] << "\"," << csv_row(reports[i].policy, "all", reports[i].overall)
        << ',' << (points[i].pareto ? 1 : 0) << '\n';
  }
  output_files outputs;
  outputs.write(csv_path, csv.str());
  outputs.write(svg_path, pareto_svg(points, grids, "Policy sweep over " + dir + " (E = " + std::to_string(trace.experts) +
                                                        ", k = " + std::to_string(trace.top_k) + ")"));
  outputs.commit();
  std::printf("swept %zu configurations over %s: %s, %s\n", points.size(), dir.c_str(), csv_path.c_str(), svg_path.c_str());
  return 0;
}

}  // namespace moe_route

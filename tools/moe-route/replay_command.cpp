// `moe-route replay`: every policy over every layer and step of a trace.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <moe_routing/moe_routing.hpp>

#include "command_line.hpp"
#include "device_command.hpp"
#include "replay_output.hpp"
#include "schedule_replay.hpp"
#include "trace_input.hpp"

namespace moe_route {

namespace {
constexpr const char* replay_help =
    "usage: moe-route replay --trace DIR --policy TEXT [--policy TEXT ...] [--json | --csv]\n"
    "                        [--t-fetch T] [--t-token T]\n"
    "       moe-route replay --trace DIR --policy TEXT ... --devices G [--replicas R] [--csv]\n"
    "       moe-route replay --trace DIR --fit 'prune(k0=[1,2,3,4]) | refine(k=8)' [--budget B]\n"
    "                        [--budget-by active|latency]\n"
    "\n"
    "Routes every layer and decode step of a trace with each policy and with vanilla top-k,\n"
    "and reports per policy and layer the mean and spread over steps of |active|, |S|,\n"
    "retained gate mass, top-k recall, the busiest device's active experts (max/device,\n"
    "with a placement only: '-' without) and the modelled latency ratio to vanilla:\n"
    "T = N_active * t_fetch + assignments * t_token (defaults 1 and 0), and with a\n"
    "placement the busiest device's T (max over devices of the same sum over its experts).\n";
}  // namespace

int replay_command(const std::vector<std::string>& words) {
  const progress_clock::time_point started = progress_clock::now();
  const arguments args(words,
                       {"trace", "policy", "t-fetch", "t-token", "devices", "replicas", "calibration-steps", "dispatch",
                        "fit", "budget", "budget-by"},
                       {"json", "csv"}, {"policy"});
  if (args.help()) {
    std::fputs(replay_help, stdout);
    std::fputs(device_simulation_help, stdout);
    return 0;
  }
  args.exclusive("json", "csv");
  if (args.has("fit") || args.has("budget") || args.has("budget-by")) {  // schedule_replay.hpp
    return fit_schedule_command(args, read_latency_model(args));
  }
  const std::vector<std::string> texts = args.all("policy");
  if (texts.empty()) throw usage_error("missing required option --policy");
  const mr::latency_model model = read_latency_model(args);
  std::vector<mr::runtime_policy> policies;
  if (std::any_of(texts.begin(), texts.end(), [](const std::string& text) { return mr::is_schedule_text(text); })) {
    return replay_schedules_command(args, texts, model);  // per-layer lists: schedule_replay.hpp
  }
  for (const auto& text : texts) policies.push_back(parse_or_usage(text));
  const std::string dir = args.required("trace");
  const mr::io::trace trace = load_trace_or_fail(dir);
  if (args.has("devices")) return simulate_devices_command(args, texts, policies, trace);
  // Every policy is checked before the first one runs: a mistake in the last one should not
  // cost the others' replay.
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const mr::status bound = mr::bind_policy(policies[p], {trace.experts, trace.top_k, !trace.placement.empty()});
    if (!bound.ok()) throw usage_error(mr::to_string(bound) + " in '" + texts[p] + "'");
  }
  std::vector<policy_replay> reports;
  replay_progress bar = stderr_progress("replay", started);
  const auto count = static_cast<long long>(policies.size());
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const auto before = static_cast<long long>(p);
    const replay_progress part = [&bar, before, count](long long done, long long total) {
      bar(before * total + done, count * total);
    };
    reports.push_back(replay_trace(trace, policies[p], texts[p], model, part));
  }
  print_replays(dir, reports, args.has("json"), args.has("csv"));
  return 0;
}

}  // namespace moe_route

#pragma once
/// \file
/// The `--devices` form of `moe-route replay` (device_simulation.hpp): reads its options,
/// checks every policy against the simulated placement, and prints one row per policy,
/// vanilla first.

#include <string>
#include <vector>

#include <moe_routing/moe_routing.hpp>

#include "command_line.hpp"
#include "device_simulation.hpp"

namespace moe_route {

inline constexpr const char* device_simulation_help =
    "\n"
    "--devices G [--replicas R] [--calibration-steps C] [--dispatch modulo|least-loaded]\n"
    "simulates expert parallelism over G devices instead: each policy's assignments go to\n"
    "physical expert slots, and the table gives per policy the mean |active|, the mean\n"
    "device load (physical slots some token uses), the busiest device's load (mean and\n"
    "worst step) and the straggler factor max/mean. Without --replicas expert e sits on\n"
    "device floor(e G / E); with --replicas R, E + R slots (a multiple of G) are placed\n"
    "EPLB-style from the vanilla load of the first C steps (default: a quarter), which are\n"
    "then left out of every row. Assignments pick a replica by token index modulo its\n"
    "replica count (default) or the replica on the device with the fewest assignments so far.\n";

/// Options of the --devices form, checked against the trace.
inline device_simulation_options read_device_options(const arguments& args, const mr::io::trace& trace) {
  device_simulation_options options;
  options.devices = static_cast<int>(args.integer("devices", 8, 1, trace.experts));
  options.redundant =
      args.has("replicas") ? static_cast<int>(args.integer("replicas", 0, 0, mr::max_experts - trace.experts)) : -1;
  const std::string dispatch = args.get("dispatch", "modulo");
  if (dispatch == "least-loaded") {
    options.choice = mr::replica_choice::least_loaded;
  } else if (dispatch != "modulo") {
    throw usage_error("--dispatch = " + dispatch + ": must be modulo or least-loaded");
  }
  const int physical = trace.experts + std::max(options.redundant, 0);
  if (physical % options.devices != 0) {
    throw usage_error("--devices = " + std::to_string(options.devices) + ": must divide the " +
                      std::to_string(physical) + " physical expert slots (E + --replicas)");
  }
  if (options.redundant >= 0) {
    if (trace.step_count() < 2) {
      throw usage_error("--replicas needs a trace of at least 2 steps (calibration, then evaluation)");
    }
    options.calibration_steps = static_cast<int>(
        args.integer("calibration-steps", std::max(1, trace.step_count() / 4), 1, trace.step_count() - 1));
  } else if (args.has("calibration-steps")) {
    options.calibration_steps = static_cast<int>(args.integer("calibration-steps", 0, 0, trace.step_count() - 1));
  }
  return options;
}

/// Runs the simulation for vanilla and each policy, and prints the table (or CSV).
inline int simulate_devices_command(const arguments& args, const std::vector<std::string>& texts,
                                    const std::vector<mr::runtime_policy>& policies, const mr::io::trace& trace) {
  const device_simulation_options options = read_device_options(args, trace);
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const mr::status bound = mr::bind_policy(policies[p], {trace.experts, trace.top_k, true});
    if (!bound.ok()) throw usage_error(mr::to_string(bound) + " in '" + texts[p] + "'");
  }
  const std::vector<replica_layout> layouts = simulated_layouts(trace, options);
  std::vector<device_figures> rows;
  rows.push_back(simulate_devices(trace, mr::presets::vanilla(trace.top_k), "vanilla", layouts, options));
  for (std::size_t p = 0; p < policies.size(); ++p) {
    rows.push_back(simulate_devices(trace, policies[p], texts[p], layouts, options));
  }
  print_device_table(rows, options, trace, args.has("csv"));
  return 0;
}

}  // namespace moe_route

#pragma once
/// \file
/// `moe-route replay --devices G [--replicas R]`: a simulated expert-parallel deployment.
/// Each policy routes every layer of every evaluation step; its assignments are
/// dispatched to physical expert slots spread over G devices, and the figures are each
/// device's load (the physical slots some token is dispatched to), its mean over devices,
/// the busiest device's load and the straggler factor max / mean (1 is perfectly level).
///
/// Layouts:
/// - without --replicas: no redundant expert, expert e on device floor(e G / E) (the
///   contiguous layout engines use without a balancer);
/// - with --replicas R (R >= 0): P = E + R slots placed EPLB-style from the vanilla load of
///   a calibration part of the trace (its first steps, not evaluated): (1) each of the R
///   extra slots goes, one at a time, to the logical expert with the largest load per
///   replica (ties to the lower id); (2) the P replicas, each weighing its expert's load
///   divided by its replica count, are packed heaviest first (ties: lower expert, then
///   earlier replica) onto the device with the least packed weight among those with a free
///   slot and, where one exists, no replica of the same expert yet (ties to the lower
///   device); (3) slots are numbered device by device. One map per layer.
///
/// Every routing call gets the layout as its replica map (`batch.replicas`, with the
/// placement of each first replica): ep_fill and ep_level count every replica's slot, and
/// the library dispatches each assignment to a slot and counts the device loads
/// (core/replica_map.hpp; docs/new_policies_expert_parallel.md). The contiguous layout is
/// the identity map, where this is plain expert placement.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <moe_routing/core/replica_map.hpp>
#include <moe_routing/cpu/route.hpp>
#include <moe_routing/cpu/workspace.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/plan/routing_plan.hpp>
#include <moe_routing/policies/presets.hpp>

namespace moe_route {

namespace mr = moe_routing;

/// An owned logical-to-physical map (the arrays `mr::replica_map` views).
struct replica_layout {
  int experts = 0, physical = 0, max_replicas = 1, devices = 1;
  std::vector<std::int32_t> physical_to_logical, logical_to_physical, replica_counts;
  std::vector<std::int32_t> primary_device;  ///< [E] the device of each expert's first replica

  mr::replica_map view(mr::replica_choice choice) const {
    return {physical_to_logical.data(),
            logical_to_physical.data(),
            replica_counts.data(),
            experts,
            physical,
            max_replicas,
            devices,
            choice};
  }
  /// Fills logical_to_physical and primary_device from physical_to_logical.
  void index_replicas() {
    replica_counts.assign(static_cast<std::size_t>(experts), 0);
    for (const std::int32_t e : physical_to_logical) ++replica_counts[static_cast<std::size_t>(e)];
    max_replicas = *std::max_element(replica_counts.begin(), replica_counts.end());
    logical_to_physical.assign(static_cast<std::size_t>(experts) * max_replicas, -1);
    std::vector<int> filled(static_cast<std::size_t>(experts), 0);
    for (int p = 0; p < physical; ++p) {
      const int e = physical_to_logical[static_cast<std::size_t>(p)];
      logical_to_physical[static_cast<std::size_t>(e) * max_replicas + filled[static_cast<std::size_t>(e)]++] = p;
    }
    primary_device.resize(static_cast<std::size_t>(experts));
    for (int e = 0; e < experts; ++e) {
      primary_device[static_cast<std::size_t>(e)] =
          logical_to_physical[static_cast<std::size_t>(e) * max_replicas] / (physical / devices);
    }
  }
};

/// Expert e on device floor(e G / E), one slot each (slot e): `gen --placement contiguous`.
inline replica_layout contiguous_layout(int experts, int devices) {
  replica_layout layout;
  layout.experts = layout.physical = experts;
  layout.devices = devices;
  layout.physical_to_logical.resize(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) layout.physical_to_logical[static_cast<std::size_t>(e)] = e;
  layout.index_replicas();
  return layout;
}

/// The EPLB-style layout of the file comment from per-expert `load` (vanilla assignments
/// counted on the calibration steps). `redundant` extra slots; E + redundant must be a
/// multiple of `devices`.
inline replica_layout eplb_layout(const std::vector<double>& load, int devices, int redundant) {
  const int experts = static_cast<int>(load.size());
  const int physical = experts + redundant;
  std::vector<int> count(static_cast<std::size_t>(experts), 1);
  for (int extra = 0; extra < redundant; ++extra) {
    int best = 0;
    for (int e = 1; e < experts; ++e) {
      const auto at = static_cast<std::size_t>(e), top = static_cast<std::size_t>(best);
      if (load[at] * count[top] > load[top] * count[at]) best = e;  // load/count, no division
    }
    ++count[static_cast<std::size_t>(best)];
  }
  struct replica {
    double weight;
    int expert, index;
  };
  std::vector<replica> replicas;
  for (int e = 0; e < experts; ++e) {
    for (int r = 0; r < count[static_cast<std::size_t>(e)]; ++r) {
      replicas.push_back({load[static_cast<std::size_t>(e)] / count[static_cast<std::size_t>(e)], e, r});
    }
  }
  std::sort(replicas.begin(), replicas.end(), [](const replica& a, const replica& b) {
    if (a.weight != b.weight) return a.weight > b.weight;
    return a.expert != b.expert ? a.expert < b.expert : a.index < b.index;
  });
  const int per_device = physical / devices;
  std::vector<double> packed(static_cast<std::size_t>(devices), 0.0);
  std::vector<std::vector<int>> slots(static_cast<std::size_t>(devices));
  for (const replica& r : replicas) {
    int best = -1;
    bool best_holds_it = true;
    for (int g = 0; g < devices; ++g) {
      const auto& held = slots[static_cast<std::size_t>(g)];
      if (static_cast<int>(held.size()) == per_device) continue;
      const bool holds_it = std::find(held.begin(), held.end(), r.expert) != held.end();
      if (best < 0 || (best_holds_it && !holds_it) ||
          (holds_it == best_holds_it && packed[static_cast<std::size_t>(g)] < packed[static_cast<std::size_t>(best)])) {
        best = g;
        best_holds_it = holds_it;
      }
    }
    slots[static_cast<std::size_t>(best)].push_back(r.expert);
    packed[static_cast<std::size_t>(best)] += r.weight;
  }
  replica_layout layout;
  layout.experts = experts;
  layout.physical = physical;
  layout.devices = devices;
  for (const auto& held : slots)
    layout.physical_to_logical.insert(layout.physical_to_logical.end(), held.begin(), held.end());
  layout.index_replicas();
  return layout;
}

/// A policy's figures over every (layer, evaluation step) of a simulated deployment.
struct device_figures {
  std::string policy;
  double active = 0;          ///< mean |active| (logical experts)
  double mean_load = 0;       ///< mean over steps of the mean device load
  double max_load = 0;        ///< mean over steps of the busiest device's load
  double worst_max_load = 0;  ///< the largest busiest-device load of any step
  double straggler = 0;       ///< mean over steps of max / mean (steps with a load)
  /// The same for assignments (tokens x experts) per device, what EPLB balances: the
  /// busiest device's share of the batch's compute rather than of its weight loads.
  double max_tokens = 0, token_straggler = 0;
  int steps = 0;
};

struct device_simulation_options {
  int devices = 8;
  int redundant = -1;  ///< -1: contiguous layout, no balancer
  int calibration_steps = 0;
  mr::replica_choice choice = mr::replica_choice::token_modulo;
};

/// Vanilla assignments per expert of each layer over the first `steps` steps.
inline std::vector<std::vector<double>> calibration_loads(const mr::io::trace& trace, int steps) {
  std::vector<std::vector<double>> load(static_cast<std::size_t>(trace.layers),
                                        std::vector<double>(static_cast<std::size_t>(trace.experts), 0.0));
  int largest = 1;
  for (int s = 0; s < steps; ++s) largest = std::max(largest, trace.step_end(s) - trace.step_begin(s));
  mr::cpu::workspace ws({largest, trace.experts, trace.top_k});
  std::vector<std::int32_t> segments;
  for (int layer = 0; layer < trace.layers; ++layer) {
    for (int s = 0; s < steps; ++s) {
      const int n = trace.step_end(s) - trace.step_begin(s);
      mr::routing_plan plan({.tokens = n, .experts = trace.experts, .top_k = trace.top_k});
      auto run = [&](const auto& batch) {
        mr::throw_if_failed(mr::cpu::route(mr::presets::vanilla(trace.top_k), batch, plan.view(), ws));
      };
      if (trace.half)
        run(trace.batch<mr::float16>(layer, s, segments));
      else
        run(trace.batch<float>(layer, s, segments));
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < plan.count(i); ++j)
          load[static_cast<std::size_t>(layer)][static_cast<std::size_t>(plan.id(i, j))] += 1;
      }
    }
  }
  return load;
}

/// One layout per layer for `options` (the same contiguous one for every layer without
/// replicas).
inline std::vector<replica_layout> simulated_layouts(const mr::io::trace& trace,
                                                     const device_simulation_options& options) {
  std::vector<replica_layout> layouts;
  if (options.redundant < 0) {
    layouts.assign(static_cast<std::size_t>(trace.layers), contiguous_layout(trace.experts, options.devices));
    return layouts;
  }
  const auto load = calibration_loads(trace, options.calibration_steps);
  for (int layer = 0; layer < trace.layers; ++layer) {
    layouts.push_back(eplb_layout(load[static_cast<std::size_t>(layer)], options.devices, options.redundant));
  }
  return layouts;
}

/// Routes every layer of steps [calibration_steps, S) with `policy` and dispatches the plan
/// onto `layouts` (see the file comment).
template <mr::routing_policy Policy>
device_figures simulate_devices(const mr::io::trace& trace, const Policy& policy, const std::string& name,
                                const std::vector<replica_layout>& layouts, const device_simulation_options& options) {
  const int k = trace.top_k, G = options.devices;
  int largest = 1;
  for (int s = 0; s < trace.step_count(); ++s) largest = std::max(largest, trace.step_end(s) - trace.step_begin(s));
  mr::cpu::workspace ws({largest, trace.experts, k});
  std::vector<std::int32_t> segments, device_tokens(static_cast<std::size_t>(G));
  device_figures figures;
  figures.policy = name;
  double active = 0, mean_load = 0, max_load = 0, straggler = 0, max_tokens = 0, token_straggler = 0;
  int loaded_steps = 0;
  for (int layer = 0; layer < trace.layers; ++layer) {
    const replica_layout& layout = layouts[static_cast<std::size_t>(layer)];
    const mr::replica_map map = layout.view(options.choice);
    for (int s = options.calibration_steps; s < trace.step_count(); ++s) {
      const int n = trace.step_end(s) - trace.step_begin(s);
      mr::routing_plan plan({.tokens = n, .experts = trace.experts, .top_k = k, .devices = G});
      auto run = [&](auto batch) {
        batch.placement = layout.primary_device.data();
        batch.device_count = G;
        batch.replicas = map;
        mr::throw_if_failed(mr::cpu::route(policy, batch, plan.view(), ws));
      };
      if (trace.half)
        run(trace.batch<mr::float16>(layer, s, segments));
      else
        run(trace.batch<float>(layer, s, segments));
      const int most = plan.summary().max_device_load;
      std::fill(device_tokens.begin(), device_tokens.end(), 0);
      int assignments = 0;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < plan.count(i); ++j) {
          ++device_tokens[static_cast<std::size_t>(map.device_of_physical(plan.physical_id(i, j)))];
          ++assignments;
        }
      }
      const int busiest = *std::max_element(device_tokens.begin(), device_tokens.end());
      max_tokens += busiest;
      if (assignments > 0) token_straggler += busiest / (static_cast<double>(assignments) / G);
      double total = 0;
      for (const std::int32_t l : plan.device_loads()) total += l;
      const double mean = total / G;
      active += plan.summary().active_count;
      mean_load += mean;
      max_load += most;
      figures.worst_max_load = std::max(figures.worst_max_load, static_cast<double>(most));
      if (mean > 0) {
        straggler += most / mean;
        ++loaded_steps;
      }
      ++figures.steps;
    }
  }
  if (figures.steps > 0) {
    figures.active = active / figures.steps;
    figures.mean_load = mean_load / figures.steps;
    figures.max_load = max_load / figures.steps;
    figures.max_tokens = max_tokens / figures.steps;
  }
  figures.straggler = loaded_steps > 0 ? straggler / loaded_steps : 0;
  figures.token_straggler = loaded_steps > 0 ? token_straggler / loaded_steps : 0;
  return figures;
}

/// The figures as a table (or CSV) on stdout.
inline void print_device_table(const std::vector<device_figures>& rows, const device_simulation_options& options,
                               const mr::io::trace& trace, bool csv) {
  const std::string layout = options.redundant < 0 ? "contiguous" : "eplb+" + std::to_string(options.redundant);
  const char* dispatch = options.choice == mr::replica_choice::token_modulo ? "modulo" : "least-loaded";
  if (csv) {
    std::printf(
        "policy,devices,layout,dispatch,steps,active,mean_load,max_load,worst_max_load,straggler,max_tokens,"
        "token_straggler\n");
    for (const auto& r : rows) {
      std::printf("\"%s\",%d,%s,%s,%d,%.4f,%.4f,%.4f,%.0f,%.4f,%.4f,%.4f\n", r.policy.c_str(), options.devices,
                  layout.c_str(), dispatch, r.steps, r.active, r.mean_load, r.max_load, r.worst_max_load, r.straggler,
                  r.max_tokens, r.token_straggler);
    }
    return;
  }
  std::printf("devices %d, layout %s, dispatch %s, E %d, k %d, %d layers, steps %d..%d evaluated (%d calibration)\n",
              options.devices, layout.c_str(), dispatch, trace.experts, trace.top_k, trace.layers,
              options.calibration_steps, trace.step_count() - 1, options.calibration_steps);
  std::printf("%-48s %9s %10s %9s %10s %10s %11s %11s\n", "policy", "|active|", "mean/dev", "max/dev", "worst max",
              "max/mean", "max tokens", "tok max/mean");
  for (const auto& r : rows) {
    std::printf("%-48s %9.2f %10.2f %9.2f %10.0f %10.3f %11.2f %11.3f\n", r.policy.c_str(), r.active, r.mean_load,
                r.max_load, r.worst_max_load, r.straggler, r.max_tokens, r.token_straggler);
  }
}

}  // namespace moe_route

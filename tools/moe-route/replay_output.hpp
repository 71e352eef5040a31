#pragma once
// Formats replay reports as a human table, JSON or CSV.

#include <cstdio>
#include <string>
#include <vector>

#include <moe_routing/cpu/trace_replay.hpp>

namespace moe_route {

namespace mr = moe_routing;

inline std::string json_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

/// `"mean_active": .., "spread_active": .., ...` for one set of figures.
inline std::string json_figures(const mr::cpu::replay_figures& f) {
  char buffer[768];
  std::snprintf(buffer, sizeof buffer,
                "\"mean_active\": %.6g, \"spread_active\": %.6g, \"mean_selected\": %.6g, \"spread_selected\": %.6g, "
                "\"mean_retained_mass\": %.6g, \"spread_retained_mass\": %.6g, \"mean_recall\": %.6g, \"spread_recall\": %.6g, "
                "\"max_device_load\": %.6g, \"spread_max_device_load\": %.6g, \"modelled_latency_ratio\": %.6g, "
                "\"spread_modelled_latency_ratio\": %.6g, \"steps\": %d",
                f.active.mean, f.active.spread, f.selected.mean, f.selected.spread, f.retained_mass.mean,
                f.retained_mass.spread, f.recall.mean, f.recall.spread, f.max_device_load.mean, f.max_device_load.spread,
                f.latency_ratio.mean, f.latency_ratio.spread, f.steps);
  return buffer;
}

inline void print_json(const std::string& trace_dir, const std::vector<mr::cpu::policy_replay>& reports) {
  std::printf("{\"trace\": \"%s\", \"policies\": [", json_escape(trace_dir).c_str());
  for (std::size_t p = 0; p < reports.size(); ++p) {
    const auto& r = reports[p];
    std::printf("%s\n  {\"policy\": \"%s\", %s, \"layers\": [", p ? "," : "", json_escape(r.policy).c_str(), json_figures(r.overall).c_str());
    for (std::size_t l = 0; l < r.layers.size(); ++l) {
      std::printf("%s\n    {\"layer\": %zu, %s}", l ? "," : "", l, json_figures(r.layers[l]).c_str());
    }
    std::printf("]}");
  }
  std::printf("\n]}\n");
}

inline const char* csv_header() {
  return "policy,layer,mean_active,spread_active,mean_selected,spread_selected,mean_retained_mass,spread_retained_mass,"
         "mean_recall,spread_recall,max_device_load,spread_max_device_load,modelled_latency_ratio,spread_modelled_latency_ratio,steps";
}

inline std::string csv_row(const std::string& policy, const std::string& layer, const mr::cpu::replay_figures& f) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d", f.active.mean,
                f.active.spread, f.selected.mean, f.selected.spread, f.retained_mass.mean, f.retained_mass.spread,
                f.recall.mean, f.recall.spread, f.max_device_load.mean, f.max_device_load.spread, f.latency_ratio.mean,
                f.latency_ratio.spread, f.steps);
  return "\"" + policy + "\"," + layer + "," + buffer;
}

inline void print_csv(const std::vector<mr::cpu::policy_replay>& reports) {
  std::printf("%s\n", csv_header());
  for (const auto& r : reports) {
    std::printf("%s\n", csv_row(r.policy, "all", r.overall).c_str());
    for (std::size_t l = 0; l < r.layers.size(); ++l) std::printf("%s\n", csv_row(r.policy, std::to_string(l), r.layers[l]).c_str());
  }
}

inline void print_table(const std::vector<mr::cpu::policy_replay>& reports) {
  for (const auto& r : reports) {
    std::printf("%s\n", r.policy.c_str());
    std::printf("  %-6s %16s %16s %16s %16s %10s %16s\n", "layer", "|active|", "|S|", "retained mass", "recall",
                "max/device", "latency/vanilla");
    auto row = [](const std::string& label, const mr::cpu::replay_figures& f) {
      std::printf("  %-6s %9.2f ± %-5.2f %9.2f ± %-5.2f %9.3f ± %-5.3f %9.3f ± %-5.3f %10.2f %9.3f ± %-5.3f\n", label.c_str(),
                  f.active.mean, f.active.spread, f.selected.mean, f.selected.spread, f.retained_mass.mean,
                  f.retained_mass.spread, f.recall.mean, f.recall.spread, f.max_device_load.mean, f.latency_ratio.mean,
                  f.latency_ratio.spread);
    };
    for (std::size_t l = 0; l < r.layers.size(); ++l) row(std::to_string(l), r.layers[l]);
    row("all", r.overall);
    std::printf("\n");
  }
}

}  // namespace moe_route

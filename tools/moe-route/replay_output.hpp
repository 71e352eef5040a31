#pragma once
// Formats replay reports as a human table, JSON or CSV.

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <range/v3/view/enumerate.hpp>

#include "trace_replay.hpp"

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

/// A figure as text: `missing` when no step counted it (NaN), else 6 significant digits.
inline std::string figure_text(double value, const char* missing) {
  if (std::isnan(value)) return missing;
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

/// Each figure's mean and spread in report order, with the names the JSON and CSV use.
inline std::vector<std::pair<std::string, double>> named_figures(const replay_figures& f) {
  return {{"mean_active", f.active.mean},
          {"spread_active", f.active.spread},
          {"mean_selected", f.selected.mean},
          {"spread_selected", f.selected.spread},
          {"mean_retained_mass", f.retained_mass.mean},
          {"spread_retained_mass", f.retained_mass.spread},
          {"mean_recall", f.recall.mean},
          {"spread_recall", f.recall.spread},
          {"max_device_load", f.max_device_load.mean},
          {"spread_max_device_load", f.max_device_load.spread},
          {"modelled_latency_ratio", f.latency_ratio.mean},
          {"spread_modelled_latency_ratio", f.latency_ratio.spread}};
}

/// `"mean_active": .., "spread_active": .., ...` for one set of figures (null: no step
/// with a valid token).
inline std::string json_figures(const replay_figures& f) {
  std::string out;
  for (const auto& [name, value] : named_figures(f)) {
    out += '"';
    out += name;
    out += "\": ";
    out += figure_text(value, "null");
    out += ", ";
  }
  return out + "\"steps\": " + std::to_string(f.steps);
}

inline void print_json(const std::string& trace_dir, const std::vector<policy_replay>& reports) {
  std::printf("{\"trace\": \"%s\", \"policies\": [", json_escape(trace_dir).c_str());
  for (const auto& [p, r] : ranges::views::enumerate(reports)) {
    std::printf("%s\n  {\"policy\": \"%s\", %s, \"layers\": [", p ? "," : "", json_escape(r.policy).c_str(),
                json_figures(r.overall).c_str());
    for (const auto& [l, layer] : ranges::views::enumerate(r.layers)) {
      std::printf("%s\n    {\"layer\": %zu, %s}", l ? "," : "", static_cast<std::size_t>(l),
                  json_figures(layer).c_str());
    }
    std::printf("]}");
  }
  std::printf("\n]}\n");
}

inline std::string csv_header() {
  std::string out = "policy,layer";
  for (const auto& [name, value] : named_figures({})) {
    out += ',';
    out += name;
  }
  return out + ",steps";
}

/// One CSV row; a figure no step counted is an empty field.
inline std::string csv_row(const std::string& policy, const std::string& layer, const replay_figures& f) {
  std::string out = "\"" + policy + "\"," + layer;
  for (const auto& [name, value] : named_figures(f)) {
    out += ',';
    out += figure_text(value, "");
  }
  return out + "," + std::to_string(f.steps);
}

inline void print_csv(const std::vector<policy_replay>& reports) {
  std::printf("%s\n", csv_header().c_str());
  for (const auto& r : reports) {
    std::printf("%s\n", csv_row(r.policy, "all", r.overall).c_str());
    for (const auto& [l, layer] : ranges::views::enumerate(r.layers)) {
      std::printf("%s\n", csv_row(r.policy, std::to_string(l), layer).c_str());
    }
  }
}

inline void print_table(const std::vector<policy_replay>& reports) {
  for (const auto& r : reports) {
    std::printf("%s\n", r.policy.c_str());
    std::printf("  %-6s %16s %16s %16s %16s %10s %16s\n", "layer", "|active|", "|S|", "retained mass", "recall",
                "max/device", "latency/vanilla");
    auto row = [](const std::string& label, const replay_figures& f) {
      // Without a placement no device is busiest: "-" rather than a made-up 0.
      char busiest[32] = "-";
      if (!std::isnan(f.max_device_load.mean)) std::snprintf(busiest, sizeof busiest, "%.2f", f.max_device_load.mean);
      std::printf("  %-6s %9.2f ± %-5.2f %9.2f ± %-5.2f %9.3f ± %-5.3f %9.3f ± %-5.3f %10s %9.3f ± %-5.3f\n",
                  label.c_str(), f.active.mean, f.active.spread, f.selected.mean, f.selected.spread,
                  f.retained_mass.mean, f.retained_mass.spread, f.recall.mean, f.recall.spread, busiest,
                  f.latency_ratio.mean, f.latency_ratio.spread);
    };
    for (const auto& [l, layer] : ranges::views::enumerate(r.layers)) row(std::to_string(l), layer);
    row("all", r.overall);
    std::printf("\n");
  }
}

/// The reports in the form the command line asked for: JSON, CSV or the table.
inline void print_replays(const std::string& trace_dir, const std::vector<policy_replay>& reports, bool json,
                          bool csv) {
  if (json)
    print_json(trace_dir, reports);
  else if (csv)
    print_csv(reports);
  else
    print_table(reports);
}

}  // namespace moe_route

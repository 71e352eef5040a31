#pragma once
/// \file
/// Quality and cost of a plan against vanilla top-k on the same batch: |active|, |S|,
/// retained gate mass, top-k recall, the guaranteed-expert check, the largest device
/// load, and the memory-bound latency model of the OEA paper,
/// `T = N_active * t_fetch + total_assignments * t_token`. Off the hot path: it
/// allocates one row of scratch.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/score_row.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing {

/// Per-expert fetch time and per-(token, expert) compute time, in any unit.
struct latency_model {
  double t_fetch = 1.0;
  double t_token = 0.0;

  constexpr double time(int active_experts, long long assignments) const noexcept {
    return active_experts * t_fetch + static_cast<double>(assignments) * t_token;
  }
};

struct plan_metrics {
  int valid_tokens = 0;
  int active = 0;    ///< |active|
  int selected = 0;  ///< |S|
  int vanilla_active = 0;
  std::vector<double> retained_mass;  ///< [n] p(A_i) / p(topk_i) per token; 0 for invalid tokens
  double mean_retained_mass = 1.0;    ///< mean over valid tokens of p(A_i) / p(topk_i)
  double min_retained_mass = 1.0;
  double mean_recall = 1.0;     ///< mean over valid tokens of |A_i ∩ topk_i| / k
  bool guarantees_held = true;  ///< every token's guaranteed ranks are in A_i
  int max_device_load = 0;
  long long assignments = 0;  ///< sum of |A_i|
  double modelled_latency = 0;
  double vanilla_modelled_latency = 0;
  double modelled_latency_ratio = 1.0;  ///< modelled_latency / vanilla's
};

/// Compares `plan` with `vanilla` (the same batch routed by `presets::vanilla`).
template <score_element Element>
plan_metrics measure_plan(const routing_batch<Element>& batch, const routing_plan& plan, const routing_plan& vanilla,
                          latency_model model = {}) {
  plan_metrics m;
  m.retained_mass.assign(static_cast<std::size_t>(batch.tokens()), 0.0);
  const int experts = batch.experts();
  std::vector<float> p(static_cast<std::size_t>(experts)), s(static_cast<std::size_t>(experts));
  std::vector<rank_key> keys(static_cast<std::size_t>(experts));
  double retained_sum = 0, recall_sum = 0;
  long long vanilla_assignments = 0;
  for (int token = 0; token < batch.tokens(); ++token) {
    if (!batch.is_valid(token)) continue;
    ++m.valid_tokens;
    score_row(batch.scores.row(token), experts, batch.mode, batch.bias, batch.groups, p.data(), keys.data(), s.data());
    double mass = 0, vanilla_mass = 0;
    int overlap = 0;
    const int count = plan.count(token), vanilla_count = vanilla.count(token);
    for (int j = 0; j < count; ++j) mass += std::max(0.0f, p[static_cast<std::size_t>(plan.id(token, j))]);
    for (int j = 0; j < vanilla_count; ++j) {
      const int e = vanilla.id(token, j);
      vanilla_mass += std::max(0.0f, p[static_cast<std::size_t>(e)]);
      for (int i = 0; i < count; ++i) overlap += plan.id(token, i) == e ? 1 : 0;
    }
    for (int j = 0; j < plan.guaranteed(token); ++j) {
      bool present = false;
      for (int i = 0; i < count; ++i) present = present || plan.id(token, i) == vanilla.id(token, j);
      m.guarantees_held = m.guarantees_held && present;
    }
    const double retained = vanilla_mass > 0 ? mass / vanilla_mass : 1.0;
    m.retained_mass[static_cast<std::size_t>(token)] = retained;
    retained_sum += retained;
    m.min_retained_mass = std::min(m.min_retained_mass, retained);
    recall_sum += vanilla_count > 0 ? static_cast<double>(overlap) / vanilla_count : 1.0;
    m.assignments += count;
    vanilla_assignments += vanilla_count;
  }
  if (m.valid_tokens > 0) {
    m.mean_retained_mass = retained_sum / m.valid_tokens;
    m.mean_recall = recall_sum / m.valid_tokens;
  }
  m.active = plan.summary().active_count;
  m.selected = plan.summary().selected_count;
  m.vanilla_active = vanilla.summary().active_count;
  m.max_device_load = plan.summary().max_device_load;
  m.modelled_latency = model.time(m.active, m.assignments);
  m.vanilla_modelled_latency = model.time(m.vanilla_active, vanilla_assignments);
  m.modelled_latency_ratio = m.vanilla_modelled_latency > 0 ? m.modelled_latency / m.vanilla_modelled_latency : 1.0;
  return m;
}

}  // namespace moe_routing

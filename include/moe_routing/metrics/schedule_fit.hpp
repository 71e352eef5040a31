#pragma once
/// \file
/// Fitting a per-layer schedule to a budget: each layer l picks one option v from a grid
/// (say k0 in 1..k), which costs cost[l][v] (its mean |active|, or its modelled latency)
/// and keeps gain[l][v] (its mean retained mass); maximise the total gain with the total
/// cost within the budget. A multiple-choice knapsack, solved exactly by dynamic
/// programming over layers on the Pareto frontier of (cost, gain): after each layer only
/// the choices that no other choice beats on both cost and gain survive, so the frontier
/// stays small (at most a few thousand points on the calibrated traces) and no cost is
/// rounded (a Lagrangian relaxation would miss the budget's exact edge; a DP over rounded
/// costs could refuse the very uniform schedule it is compared with). Tool-time code:
/// allocates freely.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe_routing {

struct layer_option {
  double cost = 0;
  double gain = 0;
};

struct fitted_schedule {
  bool feasible = false;    ///< false when even the cheapest choice per layer breaks the budget
  std::vector<int> choice;  ///< per layer, the index of its option
  double cost = 0, gain = 0;
};

/// The schedule of most total gain whose total cost is at most `budget`; among equal gains
/// the cheaper, then the one reached first (lower option indices at earlier layers).
/// `options[l]` lists layer l's choices (non-empty). O(L x G x F log(G F)) for frontier size F.
/// Throws std::invalid_argument, naming the value, for a NaN, infinite or negative cost or
/// budget, or a NaN or infinite gain (they would break the frontier's order and pruning).
inline fitted_schedule fit_schedule(const std::vector<std::vector<layer_option>>& options, double budget) {
  if (!std::isfinite(budget) || budget < 0) {
    throw std::invalid_argument("fit_schedule: the budget must be finite and non-negative, not " +
                                std::to_string(budget));
  }
  for (std::size_t l = 0; l < options.size(); ++l) {
    for (std::size_t v = 0; v < options[l].size(); ++v) {
      const layer_option& o = options[l][v];
      const std::string where = "layer " + std::to_string(l) + " option " + std::to_string(v);
      if (!std::isfinite(o.cost) || o.cost < 0) {
        throw std::invalid_argument("fit_schedule: " + where + ": the cost must be finite and non-negative, not " +
                                    std::to_string(o.cost));
      }
      if (!std::isfinite(o.gain)) {
        throw std::invalid_argument("fit_schedule: " + where + ": the gain must be finite, not " +
                                    std::to_string(o.gain));
      }
    }
  }
  struct point {
    double cost, gain;
    int previous, choice;  ///< index in the previous layer's frontier, option taken here
  };
  std::vector<std::vector<point>> frontiers;
  std::vector<point> frontier{{0.0, 0.0, -1, -1}};
  for (const auto& layer : options) {
    std::vector<point> next;
    next.reserve(frontier.size() * layer.size());
    for (int f = 0; f < static_cast<int>(frontier.size()); ++f) {
      for (int v = 0; v < static_cast<int>(layer.size()); ++v) {
        const double cost = frontier[static_cast<std::size_t>(f)].cost + layer[static_cast<std::size_t>(v)].cost;
        if (cost > budget) continue;  // costs are non-negative: it can only grow
        next.push_back(
            {cost, frontier[static_cast<std::size_t>(f)].gain + layer[static_cast<std::size_t>(v)].gain, f, v});
      }
    }
    // Cheapest first, then most gain, then the earliest reached; keep strict gain records.
    std::stable_sort(next.begin(), next.end(), [](const point& a, const point& b) {
      return a.cost != b.cost ? a.cost < b.cost : a.gain > b.gain;
    });
    std::vector<point> kept;
    for (const point& p : next) {
      if (kept.empty() || p.gain > kept.back().gain) kept.push_back(p);
    }
    frontiers.push_back(frontier);
    frontier = std::move(kept);
    if (frontier.empty()) return {};
  }
  fitted_schedule result;
  result.feasible = true;
  const point& best = frontier.back();  // the most gain within the budget
  result.cost = best.cost;
  result.gain = best.gain;
  result.choice.assign(options.size(), 0);
  point at = best;
  for (int l = static_cast<int>(options.size()) - 1; l >= 0; --l) {
    result.choice[static_cast<std::size_t>(l)] = at.choice;
    if (l > 0) at = frontiers[static_cast<std::size_t>(l)][static_cast<std::size_t>(at.previous)];
  }
  return result;
}

}  // namespace moe_routing

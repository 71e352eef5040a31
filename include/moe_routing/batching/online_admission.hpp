#pragma once
/// \file
/// Online admission for continuous batching: when slots free up in a running batch, which
/// waiting requests join it. Requests that add the fewest new experts to the running
/// batch's union go first, so the union grows slowly; a fairness bound keeps that from
/// starving a request whose experts nobody else wants.

#include <algorithm>
#include <vector>

#include "moe_routing/batching/request_signatures.hpp"
#include "moe_routing/core/error.hpp"

namespace moe_routing::batching {

/// One request of the waiting queue, and how many decode steps it has waited.
struct waiting_request {
  int request = 0;
  int waited_steps = 0;
};

/// Chooses up to `slots` requests of `queue` (in arrival order) to admit into a batch whose
/// union is `running`, and returns their positions in `queue`, in the order chosen:
/// 1. every request that has waited `max_wait` steps or more, oldest first: no request
///    waits longer than that while slots free up;
/// 2. then, one at a time, the request that adds the fewest new experts to the union as it
///    grows with each admission (the earliest in the queue on ties: first-come otherwise).
inline std::vector<int> choose_admissions(batch_union running, const std::vector<waiting_request>& queue, int slots,
                                          int max_wait) {
  if (slots < 0) throw routing_error(fail(errc::invalid_parameter, "slots", slots, "must not be negative"));
  if (max_wait < 0) throw routing_error(fail(errc::invalid_parameter, "max_wait", max_wait, "must not be negative"));
  std::vector<int> chosen;
  std::vector<bool> taken(queue.size(), false);
  auto admit = [&](std::size_t position) {
    chosen.push_back(static_cast<int>(position));
    taken[position] = true;
    running.add(queue[position].request);
  };
  for (std::size_t i = 0; i < queue.size() && static_cast<int>(chosen.size()) < slots; ++i) {
    if (queue[i].waited_steps >= max_wait) admit(i);
  }
  while (static_cast<int>(chosen.size()) < slots) {
    std::size_t best = queue.size();
    int best_cost = 0;
    for (std::size_t i = 0; i < queue.size(); ++i) {
      if (taken[i]) continue;
      const int cost = running.new_experts(queue[i].request);
      if (best == queue.size() || cost < best_cost) best = i, best_cost = cost;
    }
    if (best == queue.size()) break;  // the queue is empty
    admit(best);
  }
  return chosen;
}

}  // namespace moe_routing::batching

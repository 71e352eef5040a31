#pragma once
/// \file
/// Online admission for continuous batching: when slots free up in a running batch, which
/// waiting requests join it. Requests that add the fewest new experts to the running
/// batch's union go first, so the union grows slowly; a fairness bound keeps that from
/// starving a request whose experts nobody else wants.

#include <algorithm>
#include <vector>

#include "moe_routing/batching/form_batches.hpp"
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

namespace detail {

/// How many of the oldest waiting requests must leave now so that every one can still
/// leave within `max_wait` steps of its arrival, `slots` leaving per step: the most, over
/// j = 0..max_wait, of (requests due within j steps) - j * slots. Oldest first is the
/// earliest deadline first, which meets every deadline that can be met.
inline int requests_due_now(const std::vector<waiting_request>& queue, int slots, int max_wait) {
  std::vector<int> due_within(static_cast<std::size_t>(max_wait) + 1, 0);  // due in exactly j steps
  for (const waiting_request& waiting : queue) {
    ++due_within[static_cast<std::size_t>(std::max(0, max_wait - waiting.waited_steps))];
  }
  int due = 0, needed = 0;
  for (int j = 0; j <= max_wait; ++j) {
    due += due_within[static_cast<std::size_t>(j)];
    needed = std::max(needed, due - j * slots);
  }
  return needed;
}

}  // namespace detail

/// Continuous batching of a pool in arrival order, as a simulation of a server with a
/// queue: at step 0 the first `batch_size * (max_wait / 2 + 1)` requests are waiting, then
/// the next `batch_size` arrive every step, and each step one batch of up to `batch_size`
/// leaves (the decode batch of that step), chosen by `choose_admissions` from an empty
/// union. The requests that must leave now for every request to leave within `max_wait`
/// steps of its arrival go first, oldest first (`detail::requests_due_now`); the rest of
/// the batch is the cheapest. The batches are a partition of the pool; with
/// `max_wait = 0` they are first-come.
inline batch_list online_batches(const request_signatures& signatures, int batch_size, int max_wait) {
  detail::check_batch_size(batch_size);
  if (max_wait < 0) throw routing_error(fail(errc::invalid_parameter, "max_wait", max_wait, "must not be negative"));
  batch_list batches;
  std::vector<waiting_request> queue;
  batch_union empty(signatures);
  int arrived = 0;
  const auto arrive = [&](long long count) {
    for (long long i = 0; i < count && arrived < signatures.requests(); ++i) queue.push_back({arrived++, 0});
  };
  arrive(static_cast<long long>(batch_size) * (max_wait / 2));  // the queue the server starts with
  while (arrived < signatures.requests() || !queue.empty()) {
    arrive(batch_size);
    std::vector<waiting_request> marked = queue;  // the requests due now marked overdue
    const int due = detail::requests_due_now(queue, batch_size, max_wait);
    for (int i = 0; i < due && i < static_cast<int>(marked.size()); ++i) {
      marked[static_cast<std::size_t>(i)].waited_steps = max_wait;
    }
    const std::vector<int> chosen = choose_admissions(empty, marked, batch_size, max_wait);
    std::vector<int>& batch = batches.emplace_back();
    std::vector<bool> leaves(queue.size(), false);
    for (const int position : chosen) {
      batch.push_back(queue[static_cast<std::size_t>(position)].request);
      leaves[static_cast<std::size_t>(position)] = true;
    }
    std::vector<waiting_request> staying;
    for (std::size_t i = 0; i < queue.size(); ++i) {
      if (!leaves[i]) staying.push_back({queue[i].request, queue[i].waited_steps + 1});
    }
    queue = std::move(staying);
  }
  return batches;
}

}  // namespace moe_routing::batching

#pragma once
/// \file
/// The executor's last step: each token's output row, the weighted sum of its experts'
/// outputs in rank order, then its shared experts' outputs (weight 1). Parallel over tokens;
/// each output row is written by one work item, so `y` does not depend on the thread count.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <execution>

#include "moe_routing/cpu/executor/executor_workspace.hpp"
#include "moe_routing/cpu/executor/expert_job.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing::cpu {

namespace detail {

/// Token i's output row. A token with no expert (masked) gets zeros and no shared experts.
inline void combine_token(int i, const plan_view& plan, int experts, int shared_experts, const executor_workspace& ws,
                          const pair_buffers& buffers, float* y) noexcept {
  const int d = buffers.hidden, k = plan.top_k;
  auto output_of = [&](int pair) { return buffers.expert_out + static_cast<std::ptrdiff_t>(pair) * d; };
  float* out = y + static_cast<std::ptrdiff_t>(i) * d;
  std::fill(out, out + d, 0.0f);
  const int slots = plan.counts[i];
  for (int j = 0; j < slots; ++j) {
    const std::size_t slot = static_cast<std::size_t>(i) * k + j;
    const float weight = plan.weights[slot];
    const float* e_out = output_of(ws.pair_of[slot]);
    for (int c = 0; c < d; ++c) out[c] += weight * e_out[c];
  }
  if (slots == 0) return;
  const int rank = ws.valid_rank[static_cast<std::size_t>(i)];
  for (int s = 0; s < shared_experts; ++s) {
    const float* e_out = output_of(ws.jobs[static_cast<std::size_t>(experts + s)].first_pair + rank);
    for (int c = 0; c < d; ++c) out[c] += e_out[c];
  }
}

}  // namespace detail

/// Writes y [n x d]: each token's expert outputs in rank order, weighted, then its shared
/// experts. Needs the jobs (`plan_expert_jobs`) and the expert outputs of this call.
template <class ExecutionPolicy>
void combine_outputs(ExecutionPolicy& exec, const plan_view& plan, int n, int experts, int shared_experts,
                     const executor_workspace& ws, const pair_buffers& buffers, float* y) {
  std::for_each(exec, ws.token_index.begin(), ws.token_index.begin() + n,
                [&](std::int32_t i) { detail::combine_token(i, plan, experts, shared_experts, ws, buffers, y); });
}

}  // namespace moe_routing::cpu

#pragma once
/// \file
/// The executor's first step: each group's tokens and their input rows. `plan_expert_jobs`
/// turns the plan's alignment by expert (`align_plan`) into one `expert_job` per group,
/// adding the shared experts' pairs; `gather_inputs` copies each pair's input row next to its
/// group's others, so every later step reads a group's rows as one block.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <execution>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/amx_projection.hpp"
#include "moe_routing/cpu/executor/executor_workspace.hpp"
#include "moe_routing/cpu/executor/expert_job.hpp"
#include "moe_routing/cpu/executor/pair_order.hpp"
#include "moe_routing/executor/expert_weights.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing::cpu {

namespace detail {

/// Lists the valid tokens (those with experts) in order, with each one's rank among them;
/// returns their count.
inline int list_valid_tokens(const plan_view& plan, int n, executor_workspace& ws) noexcept {
  int valid = 0;
  for (int i = 0; i < n; ++i) {
    if (plan.counts[i] > 0) {
      ws.valid_rank[static_cast<std::size_t>(i)] = valid;
      ws.valid_tokens[static_cast<std::size_t>(valid++)] = i;
    }
  }
  return valid;
}

}  // namespace detail

/// Fills `ws.jobs[0 .. E + shared)` from the aligned plan (`ws.offsets`, `ws.pair_token`).
/// Routed expert e's pairs are its aligned pairs; shared expert s's pairs are the valid tokens
/// (those with experts), after the routed pairs. `kernel`: the call's kernel, which sets each
/// group's activation form (`form_for`); groups in a bfloat16 form get room in the packed
/// buffers. O(n + groups).
template <class Weight, class Kernel>
void plan_expert_jobs(const plan_view& plan, int n, const expert_weights<Weight>& w, Kernel kernel,
                      executor_workspace& ws) noexcept {
  // Shared experts: every token with experts (a valid token) is a pair of each of them.
  const int valid = detail::list_valid_tokens(plan, n, ws);
  const int routed_pairs = ws.offsets[static_cast<std::size_t>(w.experts)];
  for (int s = 0; s < w.shared_experts; ++s) {
    std::copy_n(ws.valid_tokens.data(), valid, ws.pair_token.data() + routed_pairs + s * valid);
  }
  int packed_first = 0;
  for (int g = 0; g < w.experts + w.shared_experts; ++g) {
    expert_job job;
    job.width = width_of(w, g);
    if (g < w.experts) {
      job.first_pair = ws.offsets[static_cast<std::size_t>(g)];
      job.pairs = ws.offsets[static_cast<std::size_t>(g) + 1] - job.first_pair;
    } else {
      job.first_pair = routed_pairs + (g - w.experts) * valid;
      job.pairs = valid;
    }
    job.form = form_for(kernel, job.width);
    job.packed_first = packed_first;
    if (job.form == activation_form::bf16_rows || job.form == activation_form::bf16_tiles) {
      packed_first += amx::padded_tokens(job.pairs);
    }
    ws.jobs[static_cast<std::size_t>(g)] = job;
  }
}

namespace detail {

/// One group's input rows in its form: the packed copy for a tile group, bfloat16 rows, or
/// float rows in order or in pair order (holding bfloat16 values when `round_activations`).
inline void gather_group(const float* x, const expert_job& job, const std::int32_t* pair_token,
                         const pair_buffers& buffers, bool round_activations) noexcept {
  const int d = buffers.hidden;
  auto input_of = [&](int p) { return x + static_cast<std::ptrdiff_t>(pair_token[job.first_pair + p]) * d; };
  // Tile groups (whole tiles in both projections) take their inputs as the packed copy only.
  if (job.pairs > 0 && job.form == activation_form::bf16_tiles) {  // zero past the last pair: the tiles multiply it
    amx::pack_rows(input_of, job.pairs, d, buffers.packed_inputs(job));
    return;
  }
  if (job.form == activation_form::bf16_rows) {
    bfloat16* rows = buffers.packed_inputs(job);
    for (int p = 0; p < job.pairs; ++p) {
      const float* in = input_of(p);
      bfloat16* row = rows + static_cast<std::ptrdiff_t>(p) * d;
      for (int c = 0; c < d; ++c) row[c] = to_bfloat16(in[c]);
    }
    return;
  }
  float* rows = buffers.gathered_rows(job);
  for (int p = 0; p < job.pairs; ++p) {
    const float* in = input_of(p);
    float* row = rows + static_cast<std::ptrdiff_t>(p) * d;
    const auto activation = [&](int c) { return round_activations ? to_float(to_bfloat16(in[c])) : in[c]; };
    if (job.form == activation_form::float_pair_rows) {
      write_in_pair_order<pair_group_columns>(row, d, activation);
    } else if (job.form == activation_form::float_wide_pair_rows) {
      write_in_pair_order<wide_pair_group_columns>(row, d, activation);
    } else if (round_activations) {
      for (int c = 0; c < d; ++c) row[c] = to_float(to_bfloat16(in[c]));
    } else {
      std::copy_n(in, d, row);
    }
  }
}

}  // namespace detail

/// Gathers each pair's input row (expert by expert, so an expert's rows are contiguous),
/// in parallel over the first `groups` jobs.
template <class ExecutionPolicy>
void gather_inputs(ExecutionPolicy& exec, const float* x, const executor_workspace& ws, int groups,
                   const pair_buffers& buffers, bool round_activations) {
  const std::int32_t* pair_token = ws.pair_token.data();
  std::for_each(exec, ws.jobs.begin(), ws.jobs.begin() + groups,
                [&](const expert_job& job) { detail::gather_group(x, job, pair_token, buffers, round_activations); });
}

}  // namespace moe_routing::cpu

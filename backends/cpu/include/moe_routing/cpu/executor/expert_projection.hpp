#pragma once
/// \file
/// The executor's second step: every active group's gate and up projections, SwiGLU, and
/// down projection, parallel over (group, block of `rows_per_item` output rows) work items.
/// The kernel is a tag (`kernel_tags.hpp`) picked once per call by `with_projection_kernel`;
/// one overload per tag of `project_gate_up` and `project_down` does a work item's share.
/// On AMX tiles, a group whose h is not a whole number of tiles takes the vector kernel on the
/// same rounded activations.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <execution>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/amx_projection.hpp"
#include "moe_routing/cpu/executor/executor_workspace.hpp"
#include "moe_routing/cpu/executor/expert_job.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/projection_kernel.hpp"
#include "moe_routing/executor/expert_weights.hpp"

namespace moe_routing::cpu {

namespace detail {
inline float silu(float v) { return v / (1.0f + std::exp(-v)); }
}  // namespace detail

/// Whether this call's projections can run on AMX tiles: an AMX build, bfloat16 weights with
/// bfloat16 activations, the OS granting the tile state (asked once per process), and d a
/// whole number of tiles.
inline bool tiles_usable(bool round_activations, int hidden) noexcept {
  return MOE_ROUTING_HAS_AMX && round_activations && amx::available() && hidden % amx::tile_columns == 0;
}

/// Calls `body(kernel)` with the call's kernel tag: `amx_kernel` when `tiles` (bfloat16
/// weights on an AMX build only), else the build's `vector_kernel`.
template <class Weight, class Body>
void with_projection_kernel(bool tiles, Body&& body) {
  if constexpr (MOE_ROUTING_HAS_AMX && std::is_same_v<Weight, bfloat16>) {
    if (tiles) return body(amx_kernel{});
  }
  body(vector_kernel{});
}

/// Gate/up item `block`: rows [32b, 32b + 32) of the group's 2h gate-then-up output rows.
template <row_kernel Kernel, class Weight>
void project_gate_up(Kernel kernel, const expert_matrices<Weight>& m, const expert_job& job, int block,
                     const pair_buffers& buffers) {
  const int begin = block * rows_per_item, end = std::min(begin + rows_per_item, 2 * job.width);
  const int d = buffers.hidden;
  const float* in = buffers.gathered_rows(job);
  float* out = buffers.gate_up_rows(job);
  const std::ptrdiff_t stride = buffers.gate_up_stride;
  if (begin < job.width) {
    project_rows(kernel, m.gate, begin, std::min(end, job.width), d, in, d, job.pairs, out, stride);
  }
  if (end > job.width) {
    const int up_begin = std::max(begin, job.width) - job.width;
    project_rows(kernel, m.up, up_begin, end - job.width, d, in, d, job.pairs, out + job.width, stride);
  }
}

/// SwiGLU over the gate half of gate/up item `block` of a row-kernel group, rounded to
/// bfloat16 when the activations are (the down projection's input).
inline void finish_swiglu(const expert_job& job, int block, const pair_buffers& buffers, bool round_activations) {
  const int begin = block * rows_per_item;
  if (begin >= job.width || job.on_tiles) return;  // gate-half blocks of the vector kernel's groups
  const int end = std::min(begin + rows_per_item, job.width);
  for (int p = 0; p < job.pairs; ++p) {
    float* row = buffers.gate_up_rows(job) + p * buffers.gate_up_stride;
    for (int r = begin; r < end; ++r) row[r] = detail::silu(row[r]) * row[job.width + r];
    if (round_activations) {
      for (int r = begin; r < end; ++r) row[r] = to_float(to_bfloat16(row[r]));
    }
  }
}

/// Down item `block`: output rows [32b, 32b + 32) of the group's d.
template <row_kernel Kernel, class Weight>
void project_down(Kernel kernel, const expert_matrices<Weight>& m, const expert_job& job, int block,
                  const pair_buffers& buffers) {
  const int d = buffers.hidden;
  const int begin = block * rows_per_item, end = std::min(begin + rows_per_item, d);
  project_rows(kernel, m.down, begin, end, job.width, buffers.gate_up_rows(job), buffers.gate_up_stride, job.pairs,
               buffers.output_rows(job), d);
}

#if MOE_ROUTING_HAS_AMX
/// Gate/up item `block` of a tile group: gate and up rows [16b, 16b + 16), SwiGLU in the
/// epilogue, written straight into the down projection's packed copy.
inline void project_gate_up(amx_kernel, const expert_matrices<bfloat16>& m, const expert_job& job, int block,
                            const pair_buffers& buffers) {
  if (!job.on_tiles) return project_gate_up(vector_kernel{}, m, job, block, buffers);
  const int row = block * rows_per_item / 2;
  amx::project_gate_up(m.gate, m.up, row, buffers.hidden, buffers.packed_inputs(job), job.pairs, job.width,
                       buffers.packed_activations(job), [](float g, float u) { return detail::silu(g) * u; });
}

/// Down item `block` of a tile group, from the packed activations.
inline void project_down(amx_kernel, const expert_matrices<bfloat16>& m, const expert_job& job, int block,
                         const pair_buffers& buffers) {
  if (!job.on_tiles) return project_down(vector_kernel{}, m, job, block, buffers);
  const int d = buffers.hidden;
  const int begin = block * rows_per_item, end = std::min(begin + rows_per_item, d);
  amx::project_rows(m.down, d, begin, end, job.width, buffers.packed_activations(job), job.pairs,
                    buffers.output_rows(job), d);
}
#endif

/// Lists the work items of one projection: (group, row block) for every group with pairs,
/// routed experts then shared, `rows_of(job)` output rows each. Returns their count.
template <class RowsOf>
std::size_t list_work_items(executor_workspace& ws, int groups, RowsOf&& rows_of) noexcept {
  std::size_t count = 0;
  for (int g = 0; g < groups; ++g) {
    const expert_job& job = ws.jobs[static_cast<std::size_t>(g)];
    if (job.pairs == 0) continue;
    const int blocks = (rows_of(job) + rows_per_item - 1) / rows_per_item;
    for (int b = 0; b < blocks; ++b) ws.items[count++] = {g, b};
  }
  return count;
}

/// Runs every work item of both projections with `kernel`:
/// 1. gate and up projections, then SwiGLU over the gate half (tile groups apply SwiGLU in
///    the projection's epilogue and write the down projection's packed copy themselves);
/// 2. down projection of each pair's activation.
template <class Kernel, class Weight, class ExecutionPolicy>
void project_experts(Kernel kernel, ExecutionPolicy& exec, const expert_weights<Weight>& w, executor_workspace& ws,
                     int groups, const pair_buffers& buffers, bool round_activations) {
  const auto run_items = [&](std::size_t count, auto&& step) {
    std::for_each(exec, ws.items.begin(), ws.items.begin() + static_cast<std::ptrdiff_t>(count), [&](work_item item) {
      step(matrices_of(w, item.group), ws.jobs[static_cast<std::size_t>(item.group)], item.block);
    });
  };
  const std::size_t gate_up_items = list_work_items(ws, groups, [](const expert_job& job) { return 2 * job.width; });
  run_items(gate_up_items, [&](const expert_matrices<Weight>& m, const expert_job& job, int block) {
    project_gate_up(kernel, m, job, block, buffers);
  });
  // The SwiGLU pass only when some active group took a row kernel: tile groups finished theirs.
  const bool vector_groups = std::any_of(ws.jobs.begin(), ws.jobs.begin() + groups,
                                         [](const expert_job& job) { return job.pairs > 0 && !job.on_tiles; });
  if (vector_groups) {
    run_items(gate_up_items, [&](const expert_matrices<Weight>&, const expert_job& job, int block) {
      finish_swiglu(job, block, buffers, round_activations);
    });
  }
  const std::size_t down_items = list_work_items(ws, groups, [&](const expert_job&) { return w.hidden; });
  run_items(down_items, [&](const expert_matrices<Weight>& m, const expert_job& job, int block) {
    project_down(kernel, m, job, block, buffers);
  });
}

}  // namespace moe_routing::cpu

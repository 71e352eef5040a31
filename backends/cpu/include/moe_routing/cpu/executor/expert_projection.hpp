#pragma once
/// \file
/// The executor's second step: every active group's gate and up projections with SwiGLU,
/// then its down projection, parallel over (group, block of `rows_per_item` output rows)
/// work items. The kernel is a tag (`kernel_tags.hpp`) picked once per call
/// (`kernel_choice.hpp`); one overload per kind of tag of `project_gate_up` and
/// `project_down` does a work item's share. A gate/up item is 16 rows of gate and the same
/// 16 of up, so each SwiGLU value is finished in the item that computed both of its sums.
/// On AMX tiles, a group whose h is not a whole number of tiles takes the AVX512_BF16 row
/// kernel on the same bfloat16 activations.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <execution>
#include <numeric>
#include <type_traits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/amx_projection.hpp"
#include "moe_routing/cpu/executor/executor_workspace.hpp"
#include "moe_routing/cpu/executor/expert_job.hpp"
#include "moe_routing/cpu/executor/kernel_choice.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/executor/row_sweep.hpp"
#include "moe_routing/cpu/executor/swiglu.hpp"
#include "moe_routing/executor/expert_weights.hpp"

namespace moe_routing::cpu {

/// Gate/up item `block` of a row-kernel group: gate and up rows [16b, 16b + 16), written as
/// SwiGLU activations in the form the kernel takes (`kernel_tags.hpp`): bfloat16 rows, or
/// float rows, in pair order for the kernels that take it (holding bfloat16 values when
/// `round_activations`).
template <row_kernel Kernel, class Weight>
void project_gate_up(Kernel kernel, const expert_matrices<Weight>& m, const expert_job& job, int block,
                     const pair_buffers& buffers, bool round_activations) {
  const int begin = block * rows_per_item / 2, end = std::min(begin + rows_per_item / 2, job.width);
  const int d = buffers.hidden;
  if constexpr (takes_bf16_activations<Kernel>) {
    sweep_gate_up(kernel, m.gate, m.up, begin, end, d, buffers.packed_inputs(job), d, job.pairs,
                  buffers.packed_activations(job), buffers.activation_stride, job.width, swiglu,
                  [](float v) MOE_ROUTING_INLINE_LAMBDA { return to_bfloat16(v); });
  } else {
    const auto sweep = [&](auto store) {
      sweep_gate_up(kernel, m.gate, m.up, begin, end, d, buffers.gathered_rows(job), d, job.pairs,
                    buffers.activation_rows(job), buffers.activation_stride, job.width, swiglu, store);
    };
    // One sweep for each setting, not one store that tests `round_activations` per value: with
    // the test inside, GCC 12 left the SwiGLU epilogue (`sweep_gate_up`'s loop over the tile's
    // lanes) scalar; on Ice Lake 9.7% of a profile of the compute at n = 64 was `sweep_gate_up`'s
    // own code, 5.5% once split, and the compute alone at n = 16 and 64 took 0.92 of the time
    // (docs/benchmarks/executor_icelake.md). Only bfloat16 weights round their activations.
    if constexpr (std::is_same_v<Weight, bfloat16>) {
      if (round_activations) return sweep([](float v) MOE_ROUTING_INLINE_LAMBDA { return to_float(to_bfloat16(v)); });
    }
    sweep([](float v) MOE_ROUTING_INLINE_LAMBDA { return v; });
  }
}

/// Down item `block` of a row-kernel group: output rows [32b, 32b + 32) of its d.
template <row_kernel Kernel, class Weight>
void project_down(Kernel kernel, const expert_matrices<Weight>& m, const expert_job& job, int block,
                  const pair_buffers& buffers) {
  const int d = buffers.hidden;
  const int begin = block * rows_per_item, end = std::min(begin + rows_per_item, d);
  if constexpr (takes_bf16_activations<Kernel>) {
    sweep_rows(kernel, m.down, begin, end, job.width, buffers.packed_activations(job), buffers.activation_stride,
               job.pairs, buffers.output_rows(job), d);
  } else {
    sweep_rows(kernel, m.down, begin, end, job.width, buffers.activation_rows(job), buffers.activation_stride,
               job.pairs, buffers.output_rows(job), d);
  }
}

#if MOE_ROUTING_HAS_AMX
/// Gate/up item `block` of a tile group: gate and up rows [16b, 16b + 16), SwiGLU in the
/// epilogue, written straight into the down projection's packed copy.
inline void project_gate_up(amx_kernel, const expert_matrices<bfloat16>& m, const expert_job& job, int block,
                            const pair_buffers& buffers, bool round_activations) {
  if (job.form != activation_form::bf16_tiles) {
    return project_gate_up(avx512_bf16_kernel{}, m, job, block, buffers, round_activations);
  }
  const int row = block * rows_per_item / 2;
  amx::project_gate_up(m.gate, m.up, row, buffers.hidden, buffers.packed_inputs(job), job.pairs, job.width,
                       buffers.packed_activations(job), swiglu);
}

/// Down item `block` of a tile group, from the packed activations.
inline void project_down(amx_kernel, const expert_matrices<bfloat16>& m, const expert_job& job, int block,
                         const pair_buffers& buffers) {
  if (job.form != activation_form::bf16_tiles) return project_down(avx512_bf16_kernel{}, m, job, block, buffers);
  const int d = buffers.hidden;
  const int begin = block * rows_per_item, end = std::min(begin + rows_per_item, d);
  amx::project_rows(m.down, d, begin, end, job.width, buffers.packed_activations(job), job.pairs,
                    buffers.output_rows(job), d);
}
#endif

/// Puts the groups in `ws.group_order` busiest first: most pairs, then lowest index. The
/// parallel loop splits the item list into ranges that each core works through in order (and
/// steals from), so every range now ends with its cheapest items, and the cores finish closer
/// together (our reading). Measured on Zen 5 (vanilla plans, docs/benchmarks/executor_zen5.md):
/// 0.88-0.95 of the time at n = 4 and 0.88-1.04 at n = 16 over several runs, none at n = 64.
inline void order_groups_busiest_first(executor_workspace& ws, int groups) noexcept {
  const auto order = ws.group_order.begin();
  std::iota(order, order + groups, 0);
  std::sort(order, order + groups, [&](std::int32_t a, std::int32_t b) {
    const int pairs_a = ws.jobs[static_cast<std::size_t>(a)].pairs,
              pairs_b = ws.jobs[static_cast<std::size_t>(b)].pairs;
    return pairs_a != pairs_b ? pairs_a > pairs_b : a < b;
  });
}

/// Lists the work items of one projection: (group, row block) for every group with pairs,
/// in `ws.group_order` (`order_groups_busiest_first`), `rows_of(job)` output rows each.
/// Returns their count.
template <class RowsOf>
std::size_t list_work_items(executor_workspace& ws, int groups, RowsOf&& rows_of) noexcept {
  std::size_t count = 0;
  for (int i = 0; i < groups; ++i) {
    const int g = ws.group_order[static_cast<std::size_t>(i)];
    const expert_job& job = ws.jobs[static_cast<std::size_t>(g)];
    if (job.pairs == 0) continue;
    const int blocks = (rows_of(job) + rows_per_item - 1) / rows_per_item;
    for (int b = 0; b < blocks; ++b) ws.items[count++] = {g, b};
  }
  return count;
}

/// Runs every work item of both projections with `kernel`: gate and up with SwiGLU, then
/// the down projection of each pair's activation.
template <class Kernel, class Weight, class ExecutionPolicy>
void project_experts(Kernel kernel, ExecutionPolicy& exec, const expert_weights<Weight>& w, executor_workspace& ws,
                     int groups, const pair_buffers& buffers, bool round_activations) {
  const auto run_items = [&](std::size_t count, auto&& step) {
    std::for_each(exec, ws.items.begin(), ws.items.begin() + static_cast<std::ptrdiff_t>(count), [&](work_item item) {
      step(matrices_of(w, item.group), ws.jobs[static_cast<std::size_t>(item.group)], item.block);
    });
  };
  order_groups_busiest_first(ws, groups);
  const std::size_t gate_up_items = list_work_items(ws, groups, [](const expert_job& job) { return 2 * job.width; });
  run_items(gate_up_items, [&](const expert_matrices<Weight>& m, const expert_job& job, int block) {
    project_gate_up(kernel, m, job, block, buffers, round_activations);
  });
  const std::size_t down_items = list_work_items(ws, groups, [&](const expert_job&) { return w.hidden; });
  run_items(down_items, [&](const expert_matrices<Weight>& m, const expert_job& job, int block) {
    project_down(kernel, m, job, block, buffers);
  });
}

}  // namespace moe_routing::cpu

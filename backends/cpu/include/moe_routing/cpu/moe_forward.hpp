#pragma once
/// \file
/// The reference grouped MoE executor on the CPU:
///   y_i = sum over e in A_i of w_ie * down_e(silu(gate_e x_i) * up_e x_i)  (+ shared experts)
/// in three reusable steps: `align_plan` groups the plan's (token, expert) pairs by expert;
/// each active expert then runs once over all of its tokens (its weights streamed from
/// memory exactly once, whatever its token count; inactive experts' weights are never
/// touched); the combine sums each token's expert outputs in rank order with its weights.
/// Parallel over (expert, block of output rows) with a standard execution policy; every
/// output element is computed by one work item, so results do not depend on threads.
/// Activations are float32 `[n x d]`; weights float32, bfloat16 or float16. With bfloat16
/// weights the activations are rounded to bfloat16 before each projection by default (the
/// products the engines' bf16 GEMMs form; `executor_shape::bf16_activations`), which lets
/// AMX builds run the projections on tiles (`amx_projection.hpp`); other builds compute the
/// same products with the vector kernel.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <execution>
#include <vector>

#include "moe_routing/core/error.hpp"
#include "moe_routing/core/status.hpp"
#include "moe_routing/cpu/amx_projection.hpp"
#include "moe_routing/cpu/projection_kernel.hpp"
#include "moe_routing/executor/executor_shape.hpp"
#include "moe_routing/executor/expert_alignment.hpp"
#include "moe_routing/executor/expert_weights.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing::cpu {

/// Tuning data: output rows per parallel work item.
inline constexpr int rows_per_item = 32;
static_assert(rows_per_item == 2 * amx::tile_rows, "an AMX gate/up item is a 16-row block of gate and of up");

using moe_routing::executor_shape;

class executor_workspace {
 public:
  executor_workspace() = default;
  explicit executor_workspace(executor_shape shape) { reserve(shape); }

  /// Throws routing_error naming the size when one is out of range, before allocating.
  void reserve(executor_shape shape) {
    throw_if_failed(validate_executor_shape(shape));
    shape_ = shape;
    const auto n = static_cast<std::size_t>(std::max(shape.max_tokens, 1));
    const int widest = std::max(shape.intermediate, shape.shared_intermediate);
    const std::size_t pairs = n * static_cast<std::size_t>(shape.top_k) + n * static_cast<std::size_t>(shape.shared_experts);
    offsets.assign(static_cast<std::size_t>(shape.experts) + 1, 0);
    pair_token.assign(pairs, 0);
    pair_slot.assign(n * static_cast<std::size_t>(shape.top_k), 0);
    pair_of.assign(n * static_cast<std::size_t>(shape.top_k), 0);
    gathered.assign(pairs * static_cast<std::size_t>(shape.hidden), 0.0f);
    gate_up.assign(pairs * 2 * static_cast<std::size_t>(widest), 0.0f);
    expert_out.assign(pairs * static_cast<std::size_t>(shape.hidden), 0.0f);
    const std::size_t groups = static_cast<std::size_t>(shape.experts + shape.shared_experts);
    const std::size_t blocks = static_cast<std::size_t>((std::max(2 * widest, shape.hidden) + rows_per_item - 1) / rows_per_item);
    items.assign(groups * blocks, 0);
    valid_rank.assign(n, 0);
    valid_tokens.assign(n, 0);
    token_index.resize(n);
    for (std::size_t i = 0; i < n; ++i) token_index[i] = static_cast<std::int32_t>(i);
    group_index.resize(groups);
    for (std::size_t g = 0; g < groups; ++g) group_index[g] = static_cast<std::int32_t>(g);
    padded_first.assign(groups + 1, 0);
    if (MOE_ROUTING_HAS_AMX && shape.bf16_activations) {  // tile copies, padded to 16 tokens per group
      const std::size_t padded_pairs = pairs + groups * amx::tile_tokens;
      packed_in.assign(padded_pairs * static_cast<std::size_t>(shape.hidden), bfloat16{0});
      packed_act.assign(padded_pairs * static_cast<std::size_t>(widest), bfloat16{0});
    }
  }
  const executor_shape& shape() const noexcept { return shape_; }

  std::vector<std::int32_t> offsets, pair_token, pair_slot, pair_of;
  std::vector<float> gathered;    ///< [pairs x d] each pair's input row
  std::vector<float> gate_up;     ///< [pairs x 2h'] gate and up outputs; SwiGLU written over the gate half
  std::vector<float> expert_out;  ///< [pairs x d] each pair's expert output
  std::vector<std::int64_t> items;       ///< (group << 32 | row block) work items
  std::vector<std::int32_t> valid_rank;    ///< [n] a token's index among the valid tokens
  std::vector<std::int32_t> valid_tokens;  ///< [n] the tokens with experts, in order
  std::vector<std::int32_t> token_index;   ///< 0..n-1, what the parallel combine walks
  std::vector<std::int32_t> group_index;   ///< 0..groups-1, what parallel loops over groups walk
  std::vector<std::int32_t> padded_first;  ///< [groups + 1] a group's first row in the packed copies
  std::vector<bfloat16> packed_in;         ///< tile-packed bf16 inputs per group (AMX builds)
  std::vector<bfloat16> packed_act;        ///< tile-packed bf16 SwiGLU activations per group

 private:
  executor_shape shape_{};
};

namespace detail {

/// One expert as the kernels see it: its matrices and its pairs' rows.
template <class Weight>
struct expert_job {
  const Weight* gate;  ///< [h x d]; for the fused layout, the gate_up matrix
  const Weight* up;    ///< [h x d]; null for the fused layout
  const Weight* down;  ///< [d x h]
  int width;           ///< h
  int first_pair, pairs;
};

/// Group g < E is routed expert g; E + s is shared expert s, whose pairs are the `valid`
/// tokens, after the routed pairs.
template <class Weight>
expert_job<Weight> job_of(const expert_weights<Weight>& w, int group, const executor_workspace& ws, int valid) {
  const int routed = w.experts;
  const bool fused = w.layout == projection_layout::fused_gate_up;
  if (group < routed) {
    return {fused ? w.gate_up[group] : w.gate[group], fused ? nullptr : w.up[group], w.down[group], w.intermediate,
            ws.offsets[static_cast<std::size_t>(group)], ws.offsets[static_cast<std::size_t>(group) + 1] - ws.offsets[static_cast<std::size_t>(group)]};
  }
  const int s = group - routed;
  const int width = w.shared_intermediate > 0 ? w.shared_intermediate : w.intermediate;
  return {fused ? w.shared_gate_up[s] : w.shared_gate[s], fused ? nullptr : w.shared_up[s], w.shared_down[s], width,
          ws.offsets[static_cast<std::size_t>(routed)] + s * valid, valid};
}

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace detail

/// Computes y [n x d] from x [n x d] and a plan. Returns a status for bad input; never
/// throws, never allocates (the workspace is sized beforehand).
template <score_element Weight, class ExecutionPolicy = std::execution::sequenced_policy>
[[nodiscard]] status moe_forward(const float* x, int n, const plan_view& plan, const expert_weights<Weight>& w, float* y,
                                 executor_workspace& ws, ExecutionPolicy&& exec = {}) {
  MOE_ROUTING_TRY(check_executor_call(x, n, plan, w, y, ws.shape()));
  const int d = w.hidden, k = plan.top_k;
  expert_alignment alignment{ws.offsets.data(), ws.pair_token.data(), ws.pair_slot.data(), ws.pair_of.data(), 0};
  MOE_ROUTING_TRY(align_plan(plan, w.experts, alignment));

  // Shared experts: every token with experts (a valid token) is a pair of each of them.
  int valid = 0;
  for (int i = 0; i < n; ++i) {
    if (plan.counts[i] > 0) {
      ws.valid_rank[static_cast<std::size_t>(i)] = valid;
      ws.valid_tokens[static_cast<std::size_t>(valid++)] = i;
    }
  }
  for (int s = 0; s < w.shared_experts; ++s) {
    std::copy_n(ws.valid_tokens.data(), valid, ws.pair_token.data() + alignment.pairs + s * valid);
  }
  const int total_pairs = alignment.pairs + w.shared_experts * valid;

  // Gather each pair's input row (expert by expert, so an expert's rows are contiguous).
  const bool round_activations = std::is_same_v<Weight, bfloat16> && ws.shape().bf16_activations;
  const int groups = w.experts + w.shared_experts;
  const auto widest_h = static_cast<std::ptrdiff_t>(std::max(w.intermediate, w.shared_intermediate));
  // Groups whose projections run on AMX tiles (whole tiles in both projections) take their
  // inputs as the packed bf16 copy only; the others as float rows (rounded or not).
  const bool tiles = MOE_ROUTING_HAS_AMX && round_activations && amx::available() && d % amx::tile_columns == 0;
  auto on_tiles = [&](const detail::expert_job<Weight>& job) { return tiles && job.width % amx::tile_columns == 0; };
  if (tiles) {
    for (int g = 0; g < groups; ++g) {
      ws.padded_first[static_cast<std::size_t>(g) + 1] =
          ws.padded_first[static_cast<std::size_t>(g)] + amx::padded_tokens(detail::job_of(w, g, ws, valid).pairs);
    }
  }
  std::for_each(exec, ws.group_index.begin(), ws.group_index.begin() + groups, [&](std::int32_t g) {
    const auto job = detail::job_of(w, g, ws, valid);
    auto input_of = [&](int p) { return x + static_cast<std::ptrdiff_t>(ws.pair_token[static_cast<std::size_t>(job.first_pair + p)]) * d; };
    if (job.pairs > 0 && on_tiles(job)) {  // zero past the last pair: the tiles multiply the padding too
      amx::pack_rows(input_of, job.pairs, d, ws.packed_in.data() + static_cast<std::ptrdiff_t>(ws.padded_first[static_cast<std::size_t>(g)]) * d);
      return;
    }
    for (int p = 0; p < job.pairs; ++p) {
      const float* in = input_of(p);
      float* row = ws.gathered.data() + static_cast<std::ptrdiff_t>(job.first_pair + p) * d;
      if (round_activations) {
        for (int c = 0; c < d; ++c) row[c] = to_float(to_bfloat16(in[c]));
      } else {
        std::copy_n(in, d, row);
      }
    }
  });

  // Work items: (group, row block) for every group with pairs; groups = experts, then shared.
  auto plan_items = [&](auto rows_of) {
    std::size_t count = 0;
    for (int g = 0; g < groups; ++g) {
      if (detail::job_of(w, g, ws, valid).pairs == 0) continue;
      const int blocks = (rows_of(g) + rows_per_item - 1) / rows_per_item;
      for (int b = 0; b < blocks; ++b) ws.items[count++] = (static_cast<std::int64_t>(g) << 32) | b;
    }
    return count;
  };
  const auto widest = static_cast<std::ptrdiff_t>(2 * std::max(w.intermediate, w.shared_intermediate));

  // 1. gate and up projections, then SwiGLU over the gate half (tile groups apply SwiGLU in
  //    the projection's epilogue and write the down projection's packed copy themselves).
  std::size_t count = plan_items([&](int g) { return 2 * detail::job_of(w, g, ws, valid).width; });
  std::for_each(exec, ws.items.begin(), ws.items.begin() + static_cast<std::ptrdiff_t>(count), [&](std::int64_t item) {
    const auto job = detail::job_of(w, static_cast<int>(item >> 32), ws, valid);
    const int begin = static_cast<int>(item & 0xffffffff) * rows_per_item, end = std::min(begin + rows_per_item, 2 * job.width);
    const float* in = ws.gathered.data() + static_cast<std::ptrdiff_t>(job.first_pair) * d;
    float* out = ws.gate_up.data() + job.first_pair * widest;
#if MOE_ROUTING_HAS_AMX
    if constexpr (std::is_same_v<Weight, bfloat16>) {
      if (on_tiles(job)) {  // block b: gate and up rows [16b, 16b + 16), SwiGLU in the epilogue
        const auto first = ws.padded_first[static_cast<std::size_t>(item >> 32)];
        const int row = begin / 2;
        const Weight* up = job.up != nullptr ? job.up : job.gate + static_cast<std::ptrdiff_t>(job.width) * d;
        amx::project_gate_up(job.gate, up, row, d,
                             ws.packed_in.data() + static_cast<std::ptrdiff_t>(first) * d, job.pairs, job.width,
                             ws.packed_act.data() + first * widest_h, [](float g, float u) { return detail::silu(g) * u; });
        return;
      }
    }
#endif
    if (job.up == nullptr) {  // fused: rows 0..2h-1 of one matrix
      project_rows(job.gate, begin, end, d, in, d, job.pairs, out, widest);
    } else {
      if (begin < job.width) project_rows(job.gate, begin, std::min(end, job.width), d, in, d, job.pairs, out, widest);
      if (end > job.width) {
        project_rows(job.up, std::max(begin, job.width) - job.width, end - job.width, d, in, d, job.pairs, out + job.width, widest);
      }
    }
  });
  const bool vector_groups = std::any_of(ws.group_index.begin(), ws.group_index.begin() + groups, [&](std::int32_t g) {
    const auto job = detail::job_of(w, g, ws, valid);
    return job.pairs > 0 && !on_tiles(job);
  });
  if (vector_groups) {
    std::for_each(exec, ws.items.begin(), ws.items.begin() + static_cast<std::ptrdiff_t>(count), [&](std::int64_t item) {
      const auto job = detail::job_of(w, static_cast<int>(item >> 32), ws, valid);
      const int begin = static_cast<int>(item & 0xffffffff) * rows_per_item;
      if (begin >= job.width || on_tiles(job)) return;  // gate-half blocks of the vector kernel's groups
      const int end = std::min(begin + rows_per_item, job.width);
      for (int p = 0; p < job.pairs; ++p) {
        float* row = ws.gate_up.data() + (job.first_pair + p) * widest;
        for (int r = begin; r < end; ++r) row[r] = detail::silu(row[r]) * row[job.width + r];
        if (round_activations) {
          for (int r = begin; r < end; ++r) row[r] = to_float(to_bfloat16(row[r]));
        }
      }
    });
  }

  // 2. down projection of each pair's activation.
  count = plan_items([&](int) { return d; });
  std::for_each(exec, ws.items.begin(), ws.items.begin() + static_cast<std::ptrdiff_t>(count), [&](std::int64_t item) {
    const auto job = detail::job_of(w, static_cast<int>(item >> 32), ws, valid);
    const int begin = static_cast<int>(item & 0xffffffff) * rows_per_item, end = std::min(begin + rows_per_item, d);
#if MOE_ROUTING_HAS_AMX
    if constexpr (std::is_same_v<Weight, bfloat16>) {
      if (on_tiles(job)) {
        const bfloat16* packed = ws.packed_act.data() + ws.padded_first[static_cast<std::size_t>(item >> 32)] * widest_h;
        amx::project_rows(job.down, d, begin, end, job.width, packed, job.pairs,
                          ws.expert_out.data() + static_cast<std::ptrdiff_t>(job.first_pair) * d, d);
        return;
      }
    }
#endif
    project_rows(job.down, begin, end, job.width, ws.gate_up.data() + job.first_pair * widest, widest, job.pairs,
                 ws.expert_out.data() + static_cast<std::ptrdiff_t>(job.first_pair) * d, d);
  });

  // 3. combine: each token's expert outputs in rank order, weighted, then its shared experts.
  std::for_each(exec, ws.token_index.begin(), ws.token_index.begin() + n, [&](std::int32_t i) {
    float* out = y + static_cast<std::ptrdiff_t>(i) * d;
    std::fill(out, out + d, 0.0f);
    const int slots = plan.counts[i];
    for (int j = 0; j < slots; ++j) {
      const float weight = plan.weights[static_cast<std::size_t>(i) * k + j];
      const float* e_out = ws.expert_out.data() + static_cast<std::ptrdiff_t>(ws.pair_of[static_cast<std::size_t>(i) * k + j]) * d;
      for (int c = 0; c < d; ++c) out[c] += weight * e_out[c];
    }
    if (slots == 0) return;
    for (int s = 0; s < w.shared_experts; ++s) {
      const float* e_out = ws.expert_out.data() + static_cast<std::ptrdiff_t>(alignment.pairs + s * valid + ws.valid_rank[static_cast<std::size_t>(i)]) * d;
      for (int c = 0; c < d; ++c) out[c] += e_out[c];
    }
  });
  return {};
}

}  // namespace moe_routing::cpu

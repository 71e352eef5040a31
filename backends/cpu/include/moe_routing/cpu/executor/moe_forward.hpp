#pragma once
/// \file
/// The reference grouped MoE executor on the CPU, its public entry point:
///   y_i = sum over e in A_i of w_ie * down_e(silu(gate_e x_i) * up_e x_i)  (+ shared experts)
/// in reusable steps: `align_plan` groups the plan's (token, expert) pairs by expert; then
///   1. gather (`gather.hpp`): each group's job (`expert_job.hpp`: its pairs' rows, its width,
///      whether it runs on tiles), worked out once per call, and its pairs' input rows;
///   2. projection (`expert_projection.hpp`): each active expert runs once over all of its
///      tokens (its weights streamed from memory exactly once, whatever its token count;
///      inactive experts' weights are never touched), with the kernel the call picked;
///   3. combine (`combine.hpp`): each token's expert outputs summed in rank order with its
///      weights.
/// Parallel over (expert, block of output rows) with a standard execution policy; every
/// output element is computed by one work item, so results do not depend on threads.
/// Activations are float32 `[n x d]`; weights float32, bfloat16 or float16. With bfloat16
/// weights the activations are rounded to bfloat16 before each projection by default (the
/// products the engines' bf16 GEMMs form; `executor_shape::bf16_activations`), which lets
/// CPUs with AMX run the projections on tiles (`amx_projection.hpp`) and CPUs with
/// AVX512_BF16 on vdpbf16ps (`avx512_bf16_projection.hpp`); the kernel is chosen per call at
/// run time (`kernel_choice.hpp`), whatever the build targets.

#include <execution>
#include <type_traits>

#include "moe_routing/core/half.hpp"
#include "moe_routing/core/status.hpp"
#include "moe_routing/cpu/executor/combine.hpp"
#include "moe_routing/cpu/executor/executor_workspace.hpp"
#include "moe_routing/cpu/executor/expert_projection.hpp"
#include "moe_routing/cpu/executor/gather.hpp"
#include "moe_routing/executor/executor_shape.hpp"
#include "moe_routing/executor/expert_alignment.hpp"
#include "moe_routing/executor/expert_weights.hpp"
#include "moe_routing/plan/routing_plan.hpp"

namespace moe_routing::cpu {

/// Computes y [n x d] from x [n x d] and a plan. Returns a status for bad input; never
/// throws, never allocates (the workspace is sized beforehand).
template <score_element Weight, class ExecutionPolicy = std::execution::sequenced_policy>
[[nodiscard]] status moe_forward(const float* x, int n, const plan_view& plan, const expert_weights<Weight>& w,
                                 float* y, executor_workspace& ws, ExecutionPolicy&& exec = {}) {
  MOE_ROUTING_TRY(check_executor_call(x, n, plan, w, y, ws.shape()));
  expert_alignment alignment{ws.offsets.data(), ws.pair_token.data(), ws.pair_slot.data(), ws.pair_of.data(), 0};
  MOE_ROUTING_TRY(align_plan(plan, w.experts, alignment));

  const bool round_activations = std::is_same_v<Weight, bfloat16> && ws.shape().bf16_activations;
  isa_level level = projection_level(ws.kernel_ceiling(), round_activations);
  if (level == isa_level::amx && w.hidden % amx::tile_columns != 0) level = isa_level::avx512_bf16;  // d in whole tiles
  const int groups = w.experts + w.shared_experts;  // routed experts, then shared ones
  const pair_buffers buffers = ws.buffers_for(w);
  with_projection_kernel<Weight>(level, [&](auto kernel) {
    ws.record_kernel(kernel);  // the kernel dispatched, which the tests compare with `level`
    plan_expert_jobs(plan, n, w, kernel, ws);
    gather_inputs(exec, x, ws, groups, buffers, round_activations);
    project_experts(kernel, exec, w, ws, groups, buffers, round_activations);
  });
  combine_outputs(exec, plan, n, w.experts, w.shared_experts, ws, buffers, y);
  return {};
}

}  // namespace moe_routing::cpu

#pragma once
/// \file
/// The CPU executor's scratch, sized once for an `executor_shape` so that `moe_forward`
/// never allocates: the plan's alignment by expert, each group's job, the per-pair rows
/// (`pair_buffers`), the work items, and the bfloat16 copies the bfloat16 kernels take.
/// It also holds the call's kernel choice: the level it may use at most (`force_kernel`, for
/// tests and comparisons) and the kernel the last call ran (`last_kernel`, `last_kernel_name`).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "moe_routing/core/error.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/cpu/executor/amx_projection.hpp"
#include "moe_routing/cpu/executor/expert_job.hpp"
#include "moe_routing/cpu/executor/kernel_choice.hpp"
#include "moe_routing/executor/executor_shape.hpp"
#include "moe_routing/executor/expert_weights.hpp"

namespace moe_routing::cpu {

/// Tuning data: output rows per parallel work item.
inline constexpr int rows_per_item = 32;
static_assert(rows_per_item == 2 * amx::tile_rows, "an AMX gate/up item is a 16-row block of gate and of up");

using moe_routing::executor_shape;

class executor_workspace {
 public:
  executor_workspace() = default;
  explicit executor_workspace(executor_shape shape) { reserve(shape); }

  /// Throws routing_error naming the size when one is out of range, before allocating. Should
  /// an allocation throw (std::bad_alloc), the workspace is left sized for nothing: a later
  /// call is refused as `workspace_too_small` until a `reserve` succeeds.
  void reserve(executor_shape shape) {
    throw_if_failed(validate_executor_shape(shape));
    shape_ = executor_shape{};  // claims no room until every buffer below has its new size
    const auto n = static_cast<std::size_t>(std::max(shape.max_tokens, 1));
    const auto k = static_cast<std::size_t>(shape.top_k);
    const auto d = static_cast<std::size_t>(shape.hidden);
    const int widest = std::max(shape.intermediate, shape.shared_intermediate);
    const std::size_t pairs = n * k + n * static_cast<std::size_t>(shape.shared_experts);
    offsets.assign(static_cast<std::size_t>(shape.experts) + 1, 0);
    pair_token.assign(pairs, 0);
    pair_slot.assign(n * k, 0);
    pair_of.assign(n * k, 0);
    gathered.assign(pairs * d, 0.0f);
    activations.assign(pairs * static_cast<std::size_t>(widest), 0.0f);
    expert_out.assign(pairs * d, 0.0f);
    const std::size_t groups = static_cast<std::size_t>(shape.experts + shape.shared_experts);
    const int longest = std::max(2 * widest, shape.hidden);  // a group's most output rows: gate/up or down
    items.assign(groups * static_cast<std::size_t>((longest + rows_per_item - 1) / rows_per_item), work_item{});
    jobs.assign(groups, expert_job{});
    group_order.assign(groups, 0);
    valid_rank.assign(n, 0);
    valid_tokens.assign(n, 0);
    token_index.resize(n);
    for (std::size_t i = 0; i < n; ++i) token_index[i] = static_cast<std::int32_t>(i);
    if (shape.bf16_activations) {  // bfloat16 rows or tiles, padded to 16 tokens per group
      const std::size_t padded_pairs = pairs + groups * amx::tile_tokens;
      packed_in.assign(padded_pairs * d, bfloat16{0});
      packed_act.assign(padded_pairs * static_cast<std::size_t>(widest), bfloat16{0});
    }
    shape_ = shape;
  }
  const executor_shape& shape() const noexcept { return shape_; }

  /// The per-pair rows laid out for weights `w` (rows as wide as its widest group).
  template <class Weight>
  pair_buffers buffers_for(const expert_weights<Weight>& w) noexcept {
    const auto widest = static_cast<std::ptrdiff_t>(widest_intermediate(w));
    return {gathered.data(), activations.data(), expert_out.data(), packed_in.data(), packed_act.data(), w.hidden,
            widest};
  }

  std::vector<std::int32_t> offsets, pair_token, pair_slot, pair_of;
  std::vector<float> gathered;             ///< [pairs x d] each pair's input row
  std::vector<float> activations;          ///< [pairs x h'] SwiGLU activations (the float kernels)
  std::vector<float> expert_out;           ///< [pairs x d] each pair's expert output
  std::vector<work_item> items;            ///< the (group, row block) work items of one projection
  std::vector<expert_job> jobs;            ///< [groups] each group's job in this call
  std::vector<std::int32_t> group_order;   ///< [groups] the order their work items are listed in
  std::vector<std::int32_t> valid_rank;    ///< [n] a token's index among the valid tokens
  std::vector<std::int32_t> valid_tokens;  ///< [n] the tokens with experts, in order
  std::vector<std::int32_t> token_index;   ///< 0..n-1, what the parallel combine walks
  std::vector<bfloat16> packed_in;         ///< bf16 inputs per group, as rows or tiles (`activation_form`)
  std::vector<bfloat16> packed_act;        ///< bf16 SwiGLU activations per group, as rows or tiles

  /// Lets calls use kernels up to `level` only (default: the best the CPU runs). Throws
  /// routing_error naming the level when the CPU does not run it.
  void force_kernel(isa_level level) {
    check_runnable(level);
    kernel_ceiling_ = level;
  }
  isa_level kernel_ceiling() const noexcept { return kernel_ceiling_; }
  /// The kernel the last `moe_forward` with this workspace ran (`portable` before any).
  isa_level last_kernel() const noexcept { return last_kernel_; }
  /// The last call's kernel by name (`kernel_tags.hpp`): at one level, the weight type may pick
  /// another kernel (`avx2_bf16` or `avx512_pairs` for bfloat16 weights, `avx2` or `avx512` for the
  /// others).
  const char* last_kernel_name() const noexcept { return last_kernel_name_; }
  template <class Kernel>
  void record_kernel(Kernel) noexcept {
    last_kernel_ = Kernel::level;
    last_kernel_name_ = Kernel::name;
  }

 private:
  executor_shape shape_{};
  isa_level kernel_ceiling_ = isa_level::amx;
  isa_level last_kernel_ = isa_level::portable;
  const char* last_kernel_name_ = portable_kernel::name;
};

}  // namespace moe_routing::cpu

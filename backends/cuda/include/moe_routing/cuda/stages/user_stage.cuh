#pragma once
/// \file
/// A set stage written outside the library on the CUDA backend. It declares that its
/// `apply(auto& context) const` is device code (`static constexpr bool runs_on_device =
/// true`, with `apply` marked `MOE_ROUTING_HOST_DEVICE`); one thread of the block then runs
/// it on a `serial_stage_context`, which satisfies `set_stage_context` like the CPU's
/// context, over local copies of S and the guaranteed set. S is a `selected_set`, as on the
/// CPU: the stage cannot remove a guaranteed expert. Serial, so meant for the light
/// stages users write (see examples/resident_experts.hpp); built-in stages run on the
/// whole block.

#include <cstdint>
#include <span>

#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/core/selected_set.hpp"
#include "moe_routing/core/stage_context.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cuda/backend.cuh"
#include "moe_routing/cuda/stages/block_context.cuh"
#include "moe_routing/policies/builtin_stages.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

/// Whether a user stage says its `apply` may run on the GPU.
template <class Stage>
constexpr bool runs_on_device() noexcept {
  if constexpr (requires {
                  { Stage::runs_on_device } -> std::convertible_to<bool>;
                }) {
    return Stage::runs_on_device;
  } else {
    return false;
  }
}

namespace cuda::detail {

/// The stage context of the one thread that runs a user stage.
template <score_element Element>
class serial_stage_context {
 public:
  __device__ explicit serial_stage_context(const block_stage_context<Element>& block) : block_(block) {
    expert_set loaded;
    for (int w = 0; w < expert_set::word_count; ++w) {
      loaded.set_word(w, set_word64(block.shared().selected, w));
      guaranteed_experts_.set_word(w, set_word64(block.shared().guaranteed, w));
    }
    selected = loaded;
  }
  // `selected` points at this context's guaranteed set.
  serial_stage_context(const serial_stage_context&) = delete;
  serial_stage_context& operator=(const serial_stage_context&) = delete;
  /// Writes S and the guaranteed set back to the block's shared memory.
  __device__ void store() const {
    for (int w = 0; w < expert_set::word_count; ++w) {
      store_word64(block_.shared().selected, w, selected.word(w));
      store_word64(block_.shared().guaranteed, w, guaranteed_experts_.word(w));
    }
  }

  __device__ int tokens() const { return block_.tokens(); }
  __device__ int experts() const { return block_.experts(); }
  __device__ int top_k() const { return block_.top_k(); }
  __device__ bool is_valid(int token) const { return block_.is_valid(token); }
  __device__ std::span<const std::int32_t> top_experts(int token) const { return block_.top_experts(token); }
  __device__ std::span<const float> top_probabilities(int token) const { return block_.top_probabilities(token); }
  __device__ std::span<const float> top_gates(int token) const { return block_.top_gates(token); }
  __device__ const row_stats& stats(int token) const { return block_.stats(token); }
  __device__ void guarantee(int token, int ranks) {
    block_.guarantee(token, ranks);  // the token's depth
    for (int j = 0; j < ranks; ++j) {
      guaranteed_experts_.insert(block_.top_experts(token)[j]);
      selected.insert(block_.top_experts(token)[j]);
    }
  }
  __device__ std::span<const std::int64_t> mass(column_mass gate) const { return block_.mass(gate); }
  __device__ std::span<const std::int32_t> votes() const { return block_.votes(); }
  __device__ int requests() const { return block_.requests(); }
  __device__ int request_begin(int r) const { return block_.request_begin(r); }
  __device__ int request_end(int r) const { return block_.request_end(r); }
  __device__ int devices() const { return block_.devices(); }
  __device__ int device_of(int expert) const { return block_.device_of(expert); }
  __device__ std::int32_t* scratch_experts() const { return block_.scratch_experts(); }
  __device__ std::int32_t* scratch_counts() const { return block_.scratch_counts(); }

  selected_set selected{guaranteed_experts_};  ///< S; it keeps every guaranteed expert
  /// Union of every token's guaranteed experts; grows only through `guarantee`.
  const expert_set& guaranteed = guaranteed_experts_;

 private:
  expert_set guaranteed_experts_;
  const block_stage_context<Element>& block_;
};

}  // namespace cuda::detail

/// Any other set stage: its own `apply(context)` on one thread of the block.
template <set_stage Stage>
struct stage_executor<cuda_backend, Stage> {
  static_assert(!builtin_set_stage<Stage>,
                "A built-in set stage needs its own stage_executor<cuda_backend, Stage> in "
                "backends/cuda/include/moe_routing/cuda/stages/ (docs/design.md, \"Adding a built-in stage\").");
  static_assert(runs_on_device<Stage>(),
                "A set stage that is not built in runs on the CUDA backend only when it declares "
                "static constexpr bool runs_on_device = true; and its apply(auto& context) const is "
                "MOE_ROUTING_HOST_DEVICE code that uses only what set_stage_context provides "
                "(docs/policies.md, \"Writing a stage\").");

  template <class Context>
  __device__ static void apply(const Stage& stage, Context& context) {
    __syncthreads();
    if (threadIdx.x == 0) {
      cuda::detail::serial_stage_context serial(context);
      static_assert(set_stage_context<decltype(serial)>);
      stage.apply(serial);
      serial.store();
    }
    __syncthreads();
  }
};

}  // namespace moe_routing

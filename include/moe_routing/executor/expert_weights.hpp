#pragma once
/// \file
/// A non-owning view of E SwiGLU experts' weights, per expert one pointer per projection:
/// gate and up `[h x d]` and down `[d x h]` (the Hugging Face layout, row-major, output
/// features first), or a fused `gate_up [2h x d]` (rows 0..h-1 gate, h..2h-1 up; vLLM's w13).
/// Element type float32, bfloat16 or float16; arithmetic is float32. Optional shared
/// experts, used by every token with weight 1, have the same layout.

#include <cstdint>
#include <type_traits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/core/status.hpp"

namespace moe_routing {

enum class projection_layout : std::uint8_t {
  separate,       ///< gate [h x d] and up [h x d]
  fused_gate_up,  ///< gate_up [2h x d]
};

template <score_element Weight>
struct expert_weights {
  using weight_type = Weight;

  int experts = 0;       ///< E routed experts
  int hidden = 0;        ///< d, the model width
  int intermediate = 0;  ///< h, each expert's width
  projection_layout layout = projection_layout::separate;
  const Weight* const* gate = nullptr;     ///< [E] -> [h x d] (separate layout)
  const Weight* const* up = nullptr;       ///< [E] -> [h x d] (separate layout)
  const Weight* const* gate_up = nullptr;  ///< [E] -> [2h x d] (fused layout)
  const Weight* const* down = nullptr;     ///< [E] -> [d x h]
  int shared_experts = 0;                  ///< experts every token uses, weight 1
  int shared_intermediate = 0;             ///< their width (0 = h)
  const Weight* const* shared_gate = nullptr;
  const Weight* const* shared_up = nullptr;
  const Weight* const* shared_gate_up = nullptr;
  const Weight* const* shared_down = nullptr;
};

static_assert(std::is_trivially_copyable_v<expert_weights<bfloat16>>);

/// The widest expert a call runs: h, or the shared experts' width when it is wider. A shared
/// width left set in a view without shared experts (a model config copied whole) counts for
/// nothing.
template <score_element Weight>
constexpr int widest_intermediate(const expert_weights<Weight>& w) noexcept {
  return w.shared_experts > 0 && w.shared_intermediate > w.intermediate ? w.shared_intermediate : w.intermediate;
}

/// Checks the view's shape and pointers (not the pointed-to memory). O(E).
template <score_element Weight>
status validate_weights(const expert_weights<Weight>& w) noexcept {
  if (w.experts < 1 || w.experts > max_experts) {
    return fail(errc::shape_mismatch, "weights.experts", w.experts, "must be in [1, max_experts]", "max_experts",
                max_experts);
  }
  if (w.hidden < 1) return fail(errc::shape_mismatch, "weights.hidden", w.hidden, "must be positive");
  if (w.intermediate < 1) return fail(errc::shape_mismatch, "weights.intermediate", w.intermediate, "must be positive");
  if (w.shared_experts < 0)
    return fail(errc::shape_mismatch, "weights.shared_experts", w.shared_experts, "must not be negative");
  const bool fused = w.layout == projection_layout::fused_gate_up;
  auto check = [](const Weight* const* table, int count, const char* name) -> status {
    if (count == 0) return {};
    if (table == nullptr) return fail(errc::null_pointer, name, 0, "must not be null");
    for (int e = 0; e < count; ++e) {
      if (table[e] == nullptr) return fail(errc::null_pointer, name, e, "has a null entry at this expert index");
    }
    return {};
  };
  MOE_ROUTING_TRY(check(fused ? w.gate_up : w.gate, w.experts, fused ? "weights.gate_up" : "weights.gate"));
  if (!fused) MOE_ROUTING_TRY(check(w.up, w.experts, "weights.up"));
  MOE_ROUTING_TRY(check(w.down, w.experts, "weights.down"));
  if (w.shared_experts > 0) {
    MOE_ROUTING_TRY(check(fused ? w.shared_gate_up : w.shared_gate, w.shared_experts,
                          fused ? "weights.shared_gate_up" : "weights.shared_gate"));
    if (!fused) MOE_ROUTING_TRY(check(w.shared_up, w.shared_experts, "weights.shared_up"));
    MOE_ROUTING_TRY(check(w.shared_down, w.shared_experts, "weights.shared_down"));
    if (w.shared_intermediate < 0) {
      return fail(errc::shape_mismatch, "weights.shared_intermediate", w.shared_intermediate, "must not be negative");
    }
  }
  return {};
}

}  // namespace moe_routing

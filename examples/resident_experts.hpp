#pragma once
// A set stage written outside the library: experts that are already resident (cached
// in fast memory, or pinned hot experts) cost no load, so any resident expert that some
// token has in its top-k joins S for free. Compose it with built-in stages:
//
//   auto policy = mr::prune{.k0 = 2} | examples::resident_experts{resident} | mr::refine{.k = 8};

#include <moe_routing/moe_routing.hpp>

namespace examples {

struct resident_experts {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
  static constexpr const char* name = "resident_experts";
  /// `apply` is host and device code that uses only what `set_stage_context` provides, so
  /// the CUDA backend may run it too (on one thread of its block).
  static constexpr bool runs_on_device = true;
  moe_routing::expert_set resident;

  /// Called by either backend with its stage context (see docs/policies.md).
  MOE_ROUTING_HOST_DEVICE_TEMPLATE void apply(moe_routing::set_stage_context auto& context) const {
    for (int token = 0; token < context.tokens(); ++token) {
      if (!context.is_valid(token)) continue;
      for (const int expert : context.top_experts(token)) {
        if (resident.contains(expert)) context.selected.insert(expert);
      }
    }
  }
  /// On an empty S it may add nothing (no resident expert voted), so it cannot open a policy.
  constexpr bool seeds_selection() const noexcept { return false; }
};

static_assert(moe_routing::set_stage<resident_experts>);

}  // namespace examples

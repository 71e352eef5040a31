#pragma once
/// \file
/// A set stage written outside the library runs on the CPU through its own
/// `apply(context)`, with the CPU's `stage_context` (which satisfies `set_stage_context`).

#include "moe_routing/core/stage_context.hpp"
#include "moe_routing/core/stage_executor.hpp"
#include "moe_routing/cpu/backend.hpp"
#include "moe_routing/policies/builtin_stages.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

/// Any other set stage runs its own `apply(context)`: the extension point for stages
/// written outside the library (see examples/custom_stage.cpp).
template <set_stage Stage>
struct stage_executor<cpu_backend, Stage> {
  template <class Context>
  static void apply(const Stage& stage, Context& context) {
    static_assert(!builtin_set_stage<Stage>,
                  "A built-in set stage needs its own stage_executor<cpu_backend, Stage> in "
                  "backends/cpu/include/moe_routing/cpu/stages/ (docs/design.md, \"Adding a built-in stage\").");
    static_assert(
        requires { stage.apply(context); },
        "A set stage that is not built in must have a member function "
        "`void apply(auto& context) const` for the CPU backend to run it.");
    stage.apply(context);
  }
};

}  // namespace moe_routing

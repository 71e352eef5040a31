#pragma once
// The CPU grouped MoE executor behind the runner interface (the `executor` member of
// tests/backends/cpu_backend_runner.hpp).

#include <vector>

#include <moe_routing/cpu/executor/moe_forward.hpp>

#include "backends/cpu_backend_runner.hpp"
#include "naive_executor.hpp"

namespace test {

/// The grouped MoE executor over one bank of routed experts and optional shared ones.
template <class Weight>
class cpu_backend_runner::executor {
 public:
  executor(const expert_bank<Weight>& routed, const expert_bank<Weight>* shared, const mr::executor_shape& shape)
      : routed_(routed), shared_(shared), ws_(shape) {
    ws_.force_kernel(kernel_ceiling);
  }

  /// The most the executors built from now on may use (tests of each kernel lower it).
  static inline mr::cpu::isa_level kernel_ceiling = mr::cpu::best_projection_level();

  /// y = the layer's output for x [n x d] under `plan`; the separate or the fused
  /// gate_up layout; the shared experts added when `with_shared`.
  mr::status forward(const std::vector<float>& x, mr::routing_plan& plan, bool with_shared, bool fused_layout,
                     std::vector<float>& y) {
    const auto weights = view_of(routed_, fused_layout, with_shared ? shared_ : nullptr);
    return mr::cpu::moe_forward(x.data(), plan.tokens(), plan.view(), weights, y.data(), ws_);
  }

  /// The same with the output written over the input: `xy` is x before the call, y after.
  mr::status forward_in_place(std::vector<float>& xy, mr::routing_plan& plan, bool with_shared, bool fused_layout) {
    const auto weights = view_of(routed_, fused_layout, with_shared ? shared_ : nullptr);
    return mr::cpu::moe_forward(xy.data(), plan.tokens(), plan.view(), weights, xy.data(), ws_);
  }

 private:
  const expert_bank<Weight>& routed_;
  const expert_bank<Weight>* shared_;
  mr::cpu::executor_workspace ws_;
};

}  // namespace test

#pragma once
// The CUDA grouped MoE executor behind the runner interface (the `executor` member of
// tests/backends/cuda_backend_runner.cuh). Include it in one test file only: the CUDA
// executor's header defines kernels that are not templates.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <moe_routing/cuda/executor/moe_forward.cuh>
#include <moe_routing/moe_routing.hpp>

#include "backends/cuda_backend_runner.cuh"
#include "backends/device_array.cuh"
#include "naive_executor.hpp"

namespace test {

/// One bank's matrices on the device, with host tables of their device pointers (what
/// `expert_weights` holds for the CUDA executor).
template <class Weight>
struct device_bank {
  std::vector<device_array<Weight>> owned;
  std::vector<const Weight*> gate, up, down, gate_up;

  explicit device_bank(const expert_bank<Weight>& bank) {
    owned.reserve(static_cast<std::size_t>(bank.experts) * 4);
    for (int e = 0; e < bank.experts; ++e) {
      for (auto [table, source] : {std::pair{&gate, &bank.gate[e]}, std::pair{&up, &bank.up[e]},
                                   std::pair{&down, &bank.down[e]}, std::pair{&gate_up, &bank.gate_up[e]}}) {
        owned.emplace_back(*source);
        table->push_back(owned.back().get());
      }
    }
  }
};

/// The grouped MoE executor; the banks are copied to the device once, each call copies
/// x and the plan's ids, weights and counts, and brings y back.
template <class Weight>
class cuda_backend_runner::executor {
 public:
  executor(const expert_bank<Weight>& routed, const expert_bank<Weight>* shared, const mr::executor_shape& shape)
      : routed_(routed), shared_(shared), routed_on_device_(routed), ws_(shape) {
    if (shared != nullptr) shared_on_device_.emplace(*shared);
  }

  mr::status forward(const std::vector<float>& x, mr::routing_plan& plan, bool with_shared, bool fused_layout,
                     std::vector<float>& y) {
    const device_array<float> x_device(x);
    device_array<float> y_device(y);  // y's values are kept wherever the executor writes nothing
    return run(x_device.get(), plan, with_shared, fused_layout, y_device, y);
  }

  /// The same with the output written over the input: `xy` is x before the call, y after.
  mr::status forward_in_place(std::vector<float>& xy, mr::routing_plan& plan, bool with_shared, bool fused_layout) {
    device_array<float> xy_device(xy);
    return run(xy_device.get(), plan, with_shared, fused_layout, xy_device, xy);
  }

 private:
  mr::status run(const float* x_device, mr::routing_plan& plan, bool with_shared, bool fused_layout,
                 device_array<float>& y_device, std::vector<float>& y) {
    const device_array<std::int32_t> ids(plan.ids()), counts(plan.counts());
    const device_array<float> weights(plan.weights());
    const mr::plan_view device_plan{ids.get(), weights.get(), counts.get(), nullptr, plan.tokens(), plan.top_k()};
    const expert_bank<Weight>* shared = with_shared ? shared_ : nullptr;
    mr::expert_weights<Weight> w = view_of(routed_, fused_layout, shared);
    w.gate = routed_on_device_.gate.data(), w.up = routed_on_device_.up.data();
    w.down = routed_on_device_.down.data(), w.gate_up = routed_on_device_.gate_up.data();
    if (shared != nullptr) {
      w.shared_gate = shared_on_device_->gate.data(), w.shared_up = shared_on_device_->up.data();
      w.shared_down = shared_on_device_->down.data(), w.shared_gate_up = shared_on_device_->gate_up.data();
    }
    const mr::status s = mr::cuda::moe_forward(x_device, plan.tokens(), device_plan, w, y_device.get(), ws_);
    if (!s.ok()) return s;
    y_device.copy_to(y.data());
    return {};
  }

  const expert_bank<Weight>& routed_;
  const expert_bank<Weight>* shared_;
  device_bank<Weight> routed_on_device_;
  std::optional<device_bank<Weight>> shared_on_device_;
  mr::cuda::executor_workspace<Weight> ws_;
};

}  // namespace test

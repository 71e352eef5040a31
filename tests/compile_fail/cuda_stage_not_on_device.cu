// Must not compile: a user set stage the CUDA backend cannot run (it does not declare
// `runs_on_device`, so its apply is not known to be device code). The CUDA backend's
// sentence (backends/cuda/include/moe_routing/cuda/stages/user_stage.cuh):
// expected error: A set stage that is not built in runs on the CUDA backend only when it declares static constexpr bool runs_on_device = true
#include <moe_routing/cuda.cuh>
#include <moe_routing/moe_routing.hpp>
struct host_only_stage {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
  void apply(auto& context) const { context.selected.insert(0); }
};
int main() {
  float* scores = nullptr;  // never launched: compilation is the test
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cuda::workspace ws;
  moe_routing::plan_view plan{};
  (void)moe_routing::cuda::route(moe_routing::prune{.k0 = 1} | host_only_stage{} | moe_routing::refine{.k = 2}, batch,
                                 plan, ws);
}

// Must not compile: a stage written outside the library that declares the assignment role
// (only refine assigns). Once blamed on the refine that follows it; now `|` says so where it
// meets the stage (include/moe_routing/policies/stage_diagnostics.hpp):
// expected error: (static assertion failed: |static_assert failed.*")Only the library's refine can be a policy's assignment stage
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
struct keep_expert_zero {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::assignment;
  void apply(auto& context) const { context.selected.insert(0); }
};
int main() {
  float scores[16] = {};
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cpu::workspace ws({2, 8, 2});
  moe_routing::routing_plan plan({.tokens = 2, .experts = 8, .top_k = 2});
  (void)moe_routing::cpu::route(moe_routing::prune{.k0 = 1} | keep_expert_zero{} | moe_routing::refine{.k = 2}, batch,
                                plan.view(), ws);
}

// Must not compile: a user set stage the CPU backend cannot run (no apply member).
// The CPU backend's sentence for a user set stage without apply
// (backends/cpu/include/moe_routing/cpu/stages/user_stage.hpp):
// expected error: (static assertion failed: |static_assert failed.*")A set stage that is not built in must have a member function .void apply\(auto& context\) const. for the CPU backend to run it\.
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
struct silent_stage {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
};
int main() {
  float scores[16] = {};
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cpu::workspace ws({2, 8, 2});
  moe_routing::routing_plan plan({.tokens = 2, .experts = 8, .top_k = 2});
  (void)moe_routing::cpu::route(moe_routing::prune{.k0 = 1} | silent_stage{} | moe_routing::refine{.k = 2}, batch,
                                plan.view(), ws);
}

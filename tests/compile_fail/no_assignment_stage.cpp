// Must not compile: a pipeline without an assignment stage cannot be routed.
// route's `routing_policy` constraint refuses this pipeline (include/moe_routing/policies/policy_checks.hpp):
// expected error: (satisfaction of [^ ]*routing_policy<Policy>[^ ]* \[with Policy = moe_routing::pipeline<moe_routing::prune, moe_routing::greedy_mass>\]|[^ ]*moe_routing::pipeline<moe_routing::prune, moe_routing::greedy_mass>[^ ]* does not satisfy [^ ]*routing_policy[^ ]*)
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
int main() {
  float scores[16] = {};
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cpu::workspace ws({2, 8, 2});
  moe_routing::routing_plan plan(2, 2, 8);
  (void)moe_routing::cpu::route(moe_routing::prune{.k0 = 1} | moe_routing::greedy_mass{.add = 1}, batch, plan.view(),
                                ws);
}

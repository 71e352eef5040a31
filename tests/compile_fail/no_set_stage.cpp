// Must not compile: a policy of only an assignment stage selects nothing.
// route's overload for what `routing_policy` refuses says why (include/moe_routing/policies/policy_checks.hpp):
// expected error: (static assertion failed: |static_assert failed.*")A policy needs a set stage before refine to build the selected set S
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
int main() {
  float scores[16] = {};
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cpu::workspace ws({2, 8, 2});
  moe_routing::routing_plan plan({.tokens = 2, .experts = 8, .top_k = 2});
  (void)moe_routing::cpu::route(moe_routing::pipeline<moe_routing::refine>{}, batch, plan.view(), ws);
}

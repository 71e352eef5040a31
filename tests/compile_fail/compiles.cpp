// Control for the compile-fail tests: the same includes and flags do compile.
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
int main() {
  float scores[16] = {};
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cpu::workspace ws({2, 8, 2});
  moe_routing::routing_plan plan({.tokens = 2, .experts = 8, .top_k = 2});
  return moe_routing::cpu::route(moe_routing::prune{.k0 = 1} | moe_routing::refine{.k = 2}, batch, plan.view(), ws).ok()
             ? 0
             : 1;
}

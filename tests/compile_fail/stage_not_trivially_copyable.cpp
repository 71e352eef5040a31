// Must not compile: a stage that holds a std::vector is not trivially copyable (stages are
// passed by value, also as kernel parameters). `|` says so in one sentence
// (include/moe_routing/policies/stage_diagnostics.hpp):
// expected error: (static assertion failed: |static_assert failed.*")A stage must be trivially copyable
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>
struct resident_list {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
  std::vector<int> resident;
  void apply(auto& context) const {
    for (const int e : resident) context.selected.insert(e);
  }
};
int main() {
  float scores[16] = {};
  moe_routing::routing_batch<float> batch{moe_routing::make_score_view(scores, 2, 8)};
  moe_routing::cpu::workspace ws({2, 8, 2});
  moe_routing::routing_plan plan({.tokens = 2, .experts = 8, .top_k = 2});
  (void)moe_routing::cpu::route(moe_routing::prune{.k0 = 1} | resident_list{{1, 2}} | moe_routing::refine{.k = 2},
                                batch, plan.view(), ws);
}

// A decode batch shaped like Qwen3-30B-A3B (E = 128, k = 8, n = 16) routed with every
// preset: how many experts each loads and how much of vanilla routing it keeps.

#include <cstdio>
#include <execution>
#include <string>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "synthetic_batch.hpp"

int main() {
  namespace mr = moe_routing;
  constexpr int n = 16, experts = 128, k = 8, devices = 4;
  const std::vector<float> logits = examples::synthetic_logits(n, experts, 2024);
  std::vector<std::int32_t> segments = {0, 4, 8, 12, 16};  // 4 requests x 4 draft tokens
  std::vector<std::int32_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e / (experts / devices);

  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
  batch.segments = segments.data();
  batch.request_count = 4;
  batch.placement = placement.data();
  batch.device_count = devices;

  const char* presets[] = {"topk(k=8)",
                           "oea(k0=4,k=8)",
                           "oea(k0=3,top_p=0.9,max_rank=16,k=8)",
                           "pruned(k0=4,k=8)",
                           "xshare(k0=1,m=16,k=8)",
                           "xshare_spec(k0=1,m=0,m_r=4,k=8)",
                           "xshare_ep(k0=1,m_g=5,k=8)",
                           "lynx_lat(d=32,k=8)",
                           "lynx_acc(conf=0.5,budget=24,k=8)",
                           "skip(beta=0.3,k=8)"};

  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan vanilla({.tokens = n, .experts = experts, .top_k = k, .devices = devices});
  mr::throw_if_failed(mr::cpu::route(mr::presets::vanilla(k), batch, vanilla.view(), ws));

  std::printf("Qwen3-30B-A3B-shaped decode batch: n = %d tokens, E = %d experts, k = %d\n\n", n, experts, k);
  std::printf("%-38s %8s %5s %9s %7s %9s %8s\n", "policy", "|active|", "|S|", "retained", "recall", "max/dev",
              "latency");
  for (const char* text : presets) {
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k, .devices = devices});
    mr::throw_if_failed(mr::cpu::route(policy, batch, plan.view(), ws, std::execution::par));
    const mr::plan_metrics m = mr::measure_plan(batch, plan, vanilla);
    std::printf("%-38s %8d %5d %9.3f %7.3f %9d %8.2f\n", text, m.active, m.selected, m.mean_retained_mass,
                m.mean_recall, m.max_device_load, m.modelled_latency_ratio);
  }
  std::printf(
      "\nretained: mean share of vanilla's gate mass kept per token; recall: share of\n"
      "vanilla's top-k kept; latency: modelled memory-bound ratio to vanilla (|active|).\n");
  return 0;
}

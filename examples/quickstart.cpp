// The README's code example, compiled so that it stays true.
#include <cstdio>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

int main() {
  namespace mr = moe_routing;
  const int n = 16, experts = 128, k = 8;
  std::vector<float> logits(n * experts);
  for (int i = 0; i < n * experts; ++i) logits[i] = static_cast<float>((i * 7919) % 1000) / 100.0f;

  // OEA: keep each token's top-4, then piggyback on experts other tokens load anyway.
  auto policy = mr::prune{.k0 = 4} | mr::refine{.k = k};
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
  mr::cpu::workspace ws({.max_tokens = n, .experts = experts, .top_k = k});
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
  mr::throw_if_failed(mr::cpu::route(policy, batch, plan.view(), ws));  // ids, weights [n, k]

  std::printf("|active| = %d experts; token 0 -> expert %d (w = %.3f)\n", plan.summary().active_count, plan.id(0, 0),
              plan.weight(0, 0));
  return 0;
}

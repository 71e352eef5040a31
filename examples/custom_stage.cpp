// Composing a user-written stage with built-in ones (see resident_experts.hpp).
#include <cstdio>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "resident_experts.hpp"
#include "synthetic_batch.hpp"

int main() {
  namespace mr = moe_routing;
  constexpr int n = 16, experts = 128, k = 8;
  const auto logits = examples::synthetic_logits(n, experts, 7);
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};

  examples::resident_experts cache;
  for (int e = 0; e < 32; ++e) cache.resident.insert(e);  // experts 0..31 stay in memory

  const auto oea = mr::prune{.k0 = 2} | mr::refine{.k = k};
  const auto oea_with_cache = mr::prune{.k0 = 2} | cache | mr::refine{.k = k};
  mr::throw_if_failed(mr::validate_policy(oea_with_cache));

  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan plain({.tokens = n, .experts = experts, .top_k = k}),
      cached({.tokens = n, .experts = experts, .top_k = k});
  mr::throw_if_failed(mr::cpu::route(oea, batch, plain.view(), ws));
  mr::throw_if_failed(mr::cpu::route(oea_with_cache, batch, cached.view(), ws));
  int loads_plain = 0, loads_cached = 0;
  plain.summary().active.for_each([&](int e) { loads_plain += e >= 32; });
  cached.summary().active.for_each([&](int e) { loads_cached += e >= 32; });
  std::printf("OEA(k0=2):                 |active| = %d, non-resident loads = %d\n", plain.summary().active_count,
              loads_plain);
  std::printf("OEA(k0=2) + resident:      |active| = %d, non-resident loads = %d\n", cached.summary().active_count,
              loads_cached);
  return 0;
}

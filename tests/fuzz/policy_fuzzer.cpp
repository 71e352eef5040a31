// Fuzzes the policy parser with arbitrary text: every input is either refused with a
// status (and a message that formats) or parsed into a policy that validates, binds and
// routes a fixed batch within the invariants.

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  namespace mr = moe_routing;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const mr::parse_result result = mr::parse_policy(text);
  if (!result.outcome.ok()) {
    if (mr::describe(result, text).empty()) std::abort();
    if (result.outcome.code == mr::errc::syntax_error &&
        (result.column < 1 || static_cast<std::size_t>(result.column) > size + 1)) {
      std::fprintf(stderr, "policy_fuzzer: syntax error column %d outside the text\n", result.column);
      std::abort();
    }
    return 0;
  }
  if (!mr::validate_policy(result.policy).ok()) std::abort();
  const int experts = 16, n = 6;
  const int k = std::max(1, std::min(mr::preferred_top_k(result.policy), experts));
  static std::vector<float> scores = [] {
    std::vector<float> s(6 * 16);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>((i * 37) % 23) / 7.0f;
    return s;
  }();
  std::vector<std::int32_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e % 3;
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
  batch.placement = placement.data();
  batch.device_count = 3;
  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k, .devices = 3});
  if (!mr::cpu::route(result.policy, batch, plan.view(), ws).ok()) return 0;  // e.g. k above top_k
  for (int i = 0; i < n; ++i) {
    if (plan.count(i) < 1 || plan.count(i) > k) std::abort();
    for (int j = 0; j < k; ++j) {
      if (!std::isfinite(plan.weight(i, j)) || plan.weight(i, j) < 0.0f) std::abort();
    }
  }
  return 0;
}

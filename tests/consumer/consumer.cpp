#include <execution>
#include <string_view>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#ifdef MOE_ROUTING_PACKAGE_VERSION
static_assert(std::string_view(MOE_ROUTING_PACKAGE_VERSION) == MOE_ROUTING_VERSION_STRING,
              "find_package(moe_routing) and moe_routing/version.hpp must report the same version");
#endif

int main() {
  namespace mr = moe_routing;
  std::vector<float> logits(8 * 64);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 37) % 101);
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), 8, 64)};
  mr::cpu::workspace ws({8, 64, 4});
  mr::routing_plan plan({.tokens = 8, .experts = 64, .top_k = 4});
  const auto status = mr::cpu::route(mr::presets::oea(2, 4), batch, plan.view(), ws, std::execution::par);
  return status.ok() && plan.summary().active_count > 0 ? 0 : 1;
}

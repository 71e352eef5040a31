// Measuring a stage of your own on a router trace exactly as `moe-route replay` measures
// the built-ins: |active|, retained gate mass, recall and the modelled latency against
// vanilla top-k, then a small sweep of its pipeline's parameter. The trace here is generated
// in memory from the calibrated Qwen3-30B-A3B preset; `moe_routing::io::load_trace(dir)`
// reads one dumped from an engine instead (docs/traces.md).
#include <cstdio>

#include <moe_routing/cpu.hpp>
#include <moe_routing/cpu/trace_replay.hpp>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "resident_experts.hpp"

namespace {

void print_row(const char* name, const moe_routing::trace_replay_report& report) {
  const moe_routing::replay_figures& f = report.overall;
  std::printf("%-34s %8.2f %9.3f %7.3f %9.3f\n", name, f.active.mean, f.retained_mass.mean, f.recall.mean,
              f.latency_ratio.mean);
}

}  // namespace

int main() {
  namespace mr = moe_routing;
  mr::synthetic::generator_config config = mr::synthetic::find_preset("qwen3-30b-a3b")->config;  // E = 128, k = 8
  config.layers = 4;
  config.tokens_per_step = 16;  // decode batches of 16 requests
  config.steps = 64;
  const mr::io::trace trace = mr::synthetic::generate_trace(config);

  examples::resident_experts cache;
  for (int e = 0; e < 32; ++e) cache.resident.insert(e);  // experts 0..31 stay in memory

  // T/vanilla counts every active expert as a load; resident ones cost none, so with the
  // cache the real saving is larger than T says. What the replay adds is the quality side:
  // how much gate mass the resident experts give back at each k0.
  std::printf("%-34s %8s %9s %7s %9s\n", "policy", "|active|", "retained", "recall", "T/vanilla");
  print_row("vanilla top-8", mr::cpu::replay_trace(trace, mr::presets::vanilla(8)));
  // The same call takes a built-in pipeline and one holding the custom stage.
  for (int k0 = 1; k0 <= 4; ++k0) {
    char name[64];
    std::snprintf(name, sizeof name, "oea(k0=%d)", k0);
    print_row(name, mr::cpu::replay_trace(trace, mr::prune{.k0 = k0} | mr::refine{.k = 8}));
    std::snprintf(name, sizeof name, "oea(k0=%d) + resident_experts", k0);
    print_row(name, mr::cpu::replay_trace(trace, mr::prune{.k0 = k0} | cache | mr::refine{.k = 8}));
  }
  return 0;
}

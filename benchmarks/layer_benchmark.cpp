// End-to-end MoE layer time (routing + executor) of every preset against vanilla top-k,
// in one run, for each synthetic trace preset at decode batch sizes 1, 4, 16 and 64 and at
// a speculative batch of 4 requests x 4 tokens.
// Names: layer/<trace>/<batch>/<policy>, batch = n:N or spec:4x4. Counters: mean |active|,
// mean assignments, mean routing time (route_us); the report divides each time by its
// vanilla's and sets it next to the ratio of |active| (benchmarks/layer_report.py).
// Experts are Qwen3-30B-A3B-sized (d = 2048, h = 768, bf16) for every trace; deepseek-r1
// keeps its E = 256 and k = 8 but not DeepSeek's 7168 x 2048 experts (22 GiB per layer
// would not fit this machine), and has no shared expert. Three layers of 256 experts
// (6.75 GiB) are allocated; each iteration takes the next layer and the next decode step.

#include <chrono>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "layer_fixture.hpp"

namespace {
namespace mr = moe_routing;
using bench::top_k;

const bench::weight_pool& pool() {
  static const bench::weight_pool p(3, 256);
  return p;
}

struct batch_shape {
  std::string name;
  int tokens, requests;  // requests = 0: one per token
};

const mr::io::trace& trace_of(const std::string& preset, const batch_shape& shape) {
  static std::vector<std::pair<std::string, mr::io::trace>> cache;
  const std::string key = preset + "/" + shape.name;
  for (auto& [name, t] : cache) {
    if (name == key) return t;
  }
  auto config = mr::synthetic::find_preset(preset)->config;
  config.tokens_per_step = shape.tokens;
  config.requests = shape.requests;
  config.steps = 64;
  config.seed = 2026;
  cache.emplace_back(key, mr::synthetic::generate_trace(config));
  return cache.back().second;
}

void layer(benchmark::State& state, const std::string& preset, const batch_shape& shape,
           const std::string& policy_text) {
  const mr::io::trace& trace = trace_of(preset, shape);
  const int n = shape.tokens, experts = trace.experts;
  const mr::runtime_policy policy = mr::parse_policy_or_throw(policy_text);
  mr::cpu::workspace route_ws({n, experts, top_k});
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = top_k});
  std::vector<std::int32_t> segments;
  double route_seconds = 0;
  bench::run_layers(state, pool(), n, experts, [&](std::size_t call) -> mr::routing_plan& {
    const auto batch =
        trace.batch<float>(0, static_cast<int>(call % static_cast<std::size_t>(trace.step_count())), segments);
    const auto start = std::chrono::steady_clock::now();
    mr::throw_if_failed(mr::cpu::route(policy, batch, plan.view(), route_ws));
    route_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return plan;
  });
  state.counters["route_us"] =
      route_seconds * 1e6 / static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
}

const char* policies[][2] = {{"vanilla", "topk(k=8)"},
                             {"oea", "oea(k0=4,k=8)"},
                             {"pruned", "pruned(k0=4,k=8)"},
                             {"xshare", "xshare(k0=1,m=16,k=8)"},
                             {"xshare_spec", "xshare_spec(k0=1,m=0,m_r=4,k=8)"},
                             {"lynx_lat", "lynx_lat(d=16,k=8)"},
                             {"lynx_acc", "lynx_acc(conf=0.5,budget=24,k=8)"},
                             {"skip", "skip(beta=0.3,k=8)"}};

const bool registered = [] {
  const batch_shape shapes[] = {{"n:1", 1, 0}, {"n:4", 4, 0}, {"n:16", 16, 0}, {"n:64", 64, 0}, {"spec:4x4", 16, 4}};
  for (const std::string preset : {"qwen3-30b-a3b", "deepseek-r1", "uniform"}) {
    for (const auto& shape : shapes) {
      for (const auto& policy : policies) {
        const std::string text = policy[1];
        benchmark::RegisterBenchmark(("layer/" + preset + "/" + shape.name + "/" + policy[0]).c_str(),
                                     [preset, shape, text](benchmark::State& s) { layer(s, preset, shape, text); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

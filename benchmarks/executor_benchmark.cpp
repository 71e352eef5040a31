// The executor against the machine's memory bandwidth, in one binary:
//  - bandwidth/read: a STREAM-like read of a 2 GiB buffer (far beyond the last-level cache);
//  - executor/qwen3: one MoE layer shaped like Qwen3-30B-A3B (E = 128, d = 2048, h = 768,
//    k = 8, bfloat16 weights) at decode batch sizes, its effective weight bandwidth
//    (active experts x bytes per expert / time) and that as a fraction of bandwidth/read;
//  - executor/active: latency against the number of active experts at n = 16.
// The weights of three layers (3.4 GiB) are allocated and each iteration takes the next
// layer and a fresh plan, so no expert is still cached from the previous iteration.
// End-to-end layer time per policy is benchmarks/layer_benchmark.cpp.

#include <algorithm>
#include <execution>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "layer_fixture.hpp"

namespace {
namespace mr = moe_routing;
using bench::top_k;

constexpr int experts = 128, layers = 3;

const bench::weight_pool& pool() {
  static const bench::weight_pool p(layers, experts);
  return p;
}

void bandwidth_read(benchmark::State& state) {
  static std::vector<double> buffer(std::size_t{1} << 28, 1.0);  // 2 GiB
  const std::size_t chunks = 64, per_chunk = buffer.size() / chunks;
  std::vector<std::size_t> index(chunks);
  std::iota(index.begin(), index.end(), 0);
  std::vector<double> partial(chunks);
  for (auto _ : state) {
    std::for_each(std::execution::par, index.begin(), index.end(), [&](std::size_t c) {
      const double* p = buffer.data() + c * per_chunk;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
      for (std::size_t i = 0; i < per_chunk; i += 8) {
        s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3], s4 += p[i + 4], s5 += p[i + 5], s6 += p[i + 6], s7 += p[i + 7];
      }
      partial[c] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    });
    benchmark::DoNotOptimize(partial.data());
  }
  const double bytes = static_cast<double>(buffer.size() * sizeof(double));
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["working_set_MiB"] = bytes / (1 << 20);
}

/// Vanilla plans for 64 consecutive steps of a Qwen3-shaped synthetic trace (48.8 active
/// experts at n = 16).
std::vector<mr::routing_plan> trace_plans(int n) {
  auto config = mr::synthetic::find_preset("qwen3-30b-a3b")->config;
  config.tokens_per_step = n;
  config.steps = 64;
  config.seed = 77;
  const mr::io::trace trace = mr::synthetic::generate_trace(config);
  std::vector<mr::routing_plan> plans;
  std::vector<std::int32_t> segments;
  for (int s = 0; s < trace.step_count(); ++s) {
    plans.emplace_back(n, top_k, experts);
    mr::throw_if_failed(mr::cpu::route(mr::presets::vanilla(top_k), trace.batch<float>(0, s, segments), plans.back().view()));
  }
  return plans;
}

/// Plans of n = 16 tokens over exactly `active` experts, a fresh random subset each.
std::vector<mr::routing_plan> plans_with_active(int active) {
  std::mt19937 rng(static_cast<unsigned>(active));
  const int n = 16;
  std::vector<mr::routing_plan> plans;
  for (int p = 0; p < 16; ++p) {
    std::vector<int> subset(experts);
    std::iota(subset.begin(), subset.end(), 0);
    std::shuffle(subset.begin(), subset.end(), rng);
    subset.resize(static_cast<std::size_t>(active));
    // n*k slots, every expert of the subset used at least once (active <= n*k = 128).
    std::vector<float> logits(static_cast<std::size_t>(n) * experts, -30.0f);
    int next = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < top_k; ++j) {
        const int e = subset[static_cast<std::size_t>((next++) % active)];
        logits[static_cast<std::size_t>(i) * experts + e] = 10.0f - static_cast<float>(j);
      }
    }
    mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
    plans.emplace_back(n, top_k, experts);
    mr::throw_if_failed(mr::cpu::route(mr::presets::vanilla(top_k), batch, plans.back().view()));
  }
  return plans;
}

void run_plans(benchmark::State& state, int n, std::vector<mr::routing_plan> plans) {
  bench::run_layers(state, pool(), n, experts, [&](std::size_t call) -> mr::routing_plan& { return plans[call % plans.size()]; });
}

const bool registered = [] {
  benchmark::RegisterBenchmark("bandwidth/read", bandwidth_read)->UseRealTime()->Unit(benchmark::kMillisecond);
  for (const int n : {1, 4, 16, 64}) {
    benchmark::RegisterBenchmark(("executor/qwen3/n:" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) { run_plans(s, n, trace_plans(n)); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  for (int active = 8; active <= 128; active += 12) {
    benchmark::RegisterBenchmark(("executor/active:" + std::to_string(active)).c_str(),
                                 [active](benchmark::State& s) { run_plans(s, 16, plans_with_active(active)); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

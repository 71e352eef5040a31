// The executor against the machine's memory bandwidth, in one binary:
//  - bandwidth/read: a STREAM-like read of a 2 GiB buffer (far beyond the last-level cache);
//  - executor/qwen3: one MoE layer shaped like Qwen3-30B-A3B (E = 128, d = 2048, h = 768,
//    k = 8, bfloat16 weights) at decode batch sizes, its effective weight bandwidth
//    (active experts x bytes per expert / time) and that as a fraction of bandwidth/read;
//  - executor/active: latency against the number of active experts at n = 16;
//  - layer/<preset>: routing + executor for every preset at n = 16 (ratios to vanilla).
// The weights of three layers (3.6 GB) are allocated and each iteration takes the next
// layer and a fresh plan, so no expert is still cached from the previous iteration.

#include <algorithm>
#include <cstring>
#include <execution>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/cpu.hpp>
#include <moe_routing/cpu/moe_forward.hpp>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

namespace {
namespace mr = moe_routing;

constexpr int experts = 128, hidden = 2048, width = 768, top_k = 8, layers = 3;
constexpr double expert_bytes = 3.0 * width * hidden * sizeof(mr::bfloat16);

/// Three layers of bf16 experts, small deterministic values (their magnitude does not
/// matter to the memory traffic).
struct model_weights {
  std::vector<mr::bfloat16> storage;
  std::vector<std::vector<const mr::bfloat16*>> gate, up, down;
  std::vector<mr::expert_weights<mr::bfloat16>> views;

  model_weights() {
    const std::size_t matrix = static_cast<std::size_t>(width) * hidden;
    storage.resize(static_cast<std::size_t>(layers) * experts * 3 * matrix);
    for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = mr::bfloat16{static_cast<std::uint16_t>(0x3c00 + (i * 2654435761u >> 24) % 64)};
    gate.resize(layers), up.resize(layers), down.resize(layers);
    for (int l = 0; l < layers; ++l) {
      for (int e = 0; e < experts; ++e) {
        const mr::bfloat16* base = storage.data() + (static_cast<std::size_t>(l) * experts + e) * 3 * matrix;
        gate[l].push_back(base), up[l].push_back(base + matrix), down[l].push_back(base + 2 * matrix);
      }
      mr::expert_weights<mr::bfloat16> w;
      w.experts = experts, w.hidden = hidden, w.intermediate = width;
      w.gate = gate[l].data(), w.up = up[l].data(), w.down = down[l].data();
      views.push_back(w);
    }
  }
};

model_weights& weights() {
  static model_weights w;
  return w;
}

/// Router logits of a Qwen3-shaped synthetic trace (48.8 active experts at n = 16).
const mr::io::trace& router_trace(int n) {
  static std::vector<std::pair<int, mr::io::trace>> cache;
  for (auto& [size, t] : cache) if (size == n) return t;
  auto config = mr::synthetic::find_preset("qwen3-30b-a3b")->config;
  config.tokens_per_step = n;
  config.steps = 64;
  config.layers = 1;
  config.seed = 77;
  cache.emplace_back(n, mr::synthetic::generate_trace(config));
  return cache.back().second;
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

/// Runs `plans` round-robin over the layers; reports effective weight bandwidth.
void run_executor(benchmark::State& state, int n, const std::vector<mr::routing_plan>& plans, bool route_too,
                  const mr::runtime_policy* policy = nullptr) {
  auto& w = weights();
  std::vector<float> x(static_cast<std::size_t>(n) * hidden, 0.01f), y(x.size());
  mr::cpu::executor_workspace ws({n, top_k, experts, hidden, width});
  mr::cpu::workspace route_ws({n, experts, top_k});
  mr::routing_plan scratch(n, top_k, experts);
  const mr::io::trace& trace = router_trace(n);
  std::vector<std::int32_t> segments;
  std::size_t call = 0;
  double active_total = 0, assignments_total = 0;
  for (auto _ : state) {
    const int layer = static_cast<int>(call % layers);
    const mr::routing_plan* plan = &plans[call % plans.size()];
    if (route_too) {
      const auto batch = trace.batch<float>(0, static_cast<int>(call % static_cast<std::size_t>(trace.step_count())), segments);
      const auto s = mr::cpu::route(*policy, batch, scratch.view(), route_ws);
      benchmark::DoNotOptimize(s);
      plan = &scratch;
    }
    const auto s = mr::cpu::moe_forward(x.data(), n, const_cast<mr::routing_plan*>(plan)->view(), w.views[static_cast<std::size_t>(layer)], y.data(), ws,
                                        std::execution::par);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(y.data());
    active_total += plan->summary().active_count;
    for (int i = 0; i < n; ++i) assignments_total += plan->count(i);
    ++call;
  }
  const double mean_active = active_total / static_cast<double>(std::max<std::size_t>(call, 1));
  state.counters["active"] = mean_active;
  state.counters["assignments"] = assignments_total / static_cast<double>(std::max<std::size_t>(call, 1));
  state.counters["weight_bytes_per_second"] = benchmark::Counter(mean_active * expert_bytes, benchmark::Counter::kIsIterationInvariantRate);
}

/// Vanilla plans for consecutive steps of the Qwen3-shaped trace.
std::vector<mr::routing_plan> trace_plans(int n, const mr::runtime_policy& policy) {
  const auto& trace = router_trace(n);
  std::vector<mr::routing_plan> plans;
  std::vector<std::int32_t> segments;
  for (int s = 0; s < trace.step_count(); ++s) {
    plans.emplace_back(n, top_k, experts);
    mr::throw_if_failed(mr::cpu::route(policy, trace.batch<float>(0, s, segments), plans.back().view()));
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

const char* presets[][2] = {{"vanilla", "topk(k=8)"},
                            {"oea", "oea(k0=4,k=8)"},
                            {"pruned", "pruned(k0=4,k=8)"},
                            {"xshare", "xshare(k0=1,m=16,k=8)"},
                            {"xshare_spec", "xshare_spec(k0=1,m=0,m_r=4,k=8)"},
                            {"lynx_lat", "lynx_lat(d=16,k=8)"},
                            {"lynx_acc", "lynx_acc(conf=0.5,budget=24,k=8)"},
                            {"skip", "skip(beta=0.3,k=8)"}};

const bool registered = [] {
  benchmark::RegisterBenchmark("bandwidth/read", bandwidth_read)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
  for (const int n : {1, 4, 16, 64}) {
    benchmark::RegisterBenchmark(("executor/qwen3/n:" + std::to_string(n)).c_str(), [n](benchmark::State& s) {
      static const auto vanilla = mr::parse_policy_or_throw("topk(k=8)");
      run_executor(s, n, trace_plans(n, vanilla), false);
    })->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
  }
  for (int active = 8; active <= 128; active += 12) {
    benchmark::RegisterBenchmark(("executor/active:" + std::to_string(active)).c_str(), [active](benchmark::State& s) {
      run_executor(s, 16, plans_with_active(active), false);
    })->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
  }
  for (const auto& preset : presets) {
    const std::string name = preset[0], text = preset[1];
    benchmark::RegisterBenchmark(("layer/" + name + "/n:16").c_str(), [text](benchmark::State& s) {
      const auto policy = mr::parse_policy_or_throw(text);
      run_executor(s, 16, trace_plans(16, policy), true, &policy);
    })->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

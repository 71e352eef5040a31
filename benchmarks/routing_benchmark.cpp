// Routing cost per call on the CPU backend: every preset next to plain top-k and a
// per-row std::partial_sort baseline (what a user would otherwise write), in one run.
// Arguments: n, E, k. Counters: ns per token, |active|, |S|.

#include <algorithm>
#include <execution>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

namespace {
namespace mr = moe_routing;

/// Softmax-like logits with a popularity skew (the examples' generator's idea).
std::vector<float> make_logits(int n, int experts, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> prior(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) prior[static_cast<std::size_t>(e)] = -0.7f * std::log1p(static_cast<float>((e * 7919) % experts));
  std::vector<float> logits(static_cast<std::size_t>(n) * static_cast<std::size_t>(experts));
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = prior[i % static_cast<std::size_t>(experts)] + noise(rng);
  return logits;
}

std::string preset_text(const std::string& name, int k) {
  const std::string K = std::to_string(k), k0 = std::to_string(std::max(1, k / 2));
  if (name == "topk") return "topk(k=" + K + ")";
  if (name == "oea") return "oea(k0=" + k0 + ",k=" + K + ")";
  if (name == "xshare") return "xshare(k0=1,m=16,k=" + K + ")";
  if (name == "xshare_spec") return "xshare_spec(k0=1,m=0,m_r=4,k=" + K + ")";
  if (name == "lynx_lat") return "lynx_lat(d=16,k=" + K + ")";
  if (name == "lynx_acc") return "lynx_acc(conf=0.5,budget=24,k=" + K + ")";
  return "skip(beta=0.3,k=" + K + ")";
}

template <class Exec>
void route_preset(benchmark::State& state, const std::string& name, Exec exec) {
  const int n = static_cast<int>(state.range(0)), experts = static_cast<int>(state.range(1)), k = static_cast<int>(state.range(2));
  const std::vector<float> logits = make_logits(n, experts, 1);
  std::vector<std::int32_t> segments;
  for (int o = 0; o <= n; o += 4) segments.push_back(o);
  if (segments.back() != n) segments.push_back(n);
  mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
  batch.segments = segments.data();
  batch.request_count = static_cast<int>(segments.size()) - 1;
  const mr::runtime_policy policy = mr::parse_policy_or_throw(preset_text(name, k));
  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan plan(n, k, experts);
  for (auto _ : state) {
    const mr::status s = mr::cpu::route(policy, batch, plan.view(), ws, exec);
    benchmark::DoNotOptimize(s);
    benchmark::ClobberMemory();
  }
  state.counters["ns_per_token"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["active"] = plan.summary().active_count;
  state.counters["selected"] = plan.summary().selected_count;
}

/// The baseline a user would write: per row, sort (score, index) pairs partially.
void partial_sort_topk(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), experts = static_cast<int>(state.range(1)), k = static_cast<int>(state.range(2));
  const std::vector<float> logits = make_logits(n, experts, 1);
  std::vector<std::pair<float, int>> row(static_cast<std::size_t>(experts));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n) * k);
  std::vector<float> weights(static_cast<std::size_t>(n) * k);
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) {
      const float* x = logits.data() + static_cast<std::size_t>(i) * experts;
      float m = x[0];
      for (int e = 1; e < experts; ++e) m = std::max(m, x[e]);
      for (int e = 0; e < experts; ++e) row[static_cast<std::size_t>(e)] = {x[e], e};
      std::partial_sort(row.begin(), row.begin() + k, row.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      float sum = 0;
      for (int j = 0; j < k; ++j) sum += std::exp(row[static_cast<std::size_t>(j)].first - m);
      for (int j = 0; j < k; ++j) {
        ids[static_cast<std::size_t>(i) * k + j] = row[static_cast<std::size_t>(j)].second;
        weights[static_cast<std::size_t>(i) * k + j] = std::exp(row[static_cast<std::size_t>(j)].first - m) / sum;
      }
    }
    benchmark::DoNotOptimize(ids.data());
    benchmark::DoNotOptimize(weights.data());
    benchmark::ClobberMemory();
  }
  state.counters["ns_per_token"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const int n : {1, 16, 64, 256, 1024, 16384}) {
    for (const int experts : {128, 256}) b->Args({n, experts, 8});
  }
  b->ArgNames({"n", "E", "k"});
}

const bool registered = [] {
  for (const std::string name : {"topk", "oea", "xshare", "xshare_spec", "lynx_lat", "lynx_acc", "skip"}) {
    benchmark::RegisterBenchmark(("route/seq/" + name).c_str(), [name](benchmark::State& s) { route_preset(s, name, std::execution::seq); })->Apply(shapes);
    benchmark::RegisterBenchmark(("route/par/" + name).c_str(), [name](benchmark::State& s) { route_preset(s, name, std::execution::par); })->Apply(shapes);
  }
  benchmark::RegisterBenchmark("baseline/partial_sort", partial_sort_topk)->Apply(shapes);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

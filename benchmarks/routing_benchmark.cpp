// Routing cost per call on the CPU backend: every preset next to plain top-k and a
// per-row std::partial_sort baseline (what a user would otherwise write), in one run.
// Names: route/<seq|par>/<preset>/<f32|bf16>/n:N/E:E/k:K and
// baseline/partial_sort/<f32|bf16>/n:N/E:E/k:K. Counters: ns per token, |active|, |S|.
// The grid is n {1, 4, 16, 64, 256, 1024, 16384} x E {64, 128, 256, 512} x k {2, 4, 8};
// select parts of it with --benchmark_filter (benchmarks/run_benchmarks.sh does). Outside the
// grid, scoring/deepseek_v3/seq/<preset>/f32/n:N/E:256/k:8 scores rows as DeepSeek-V3 does.
//
// Each iteration routes the next batch of a pool of distinct batches (at least
// `pool_rows` rows in all), as a decode loop sees fresh logits every step. Routing one
// batch over and over lets the branch predictor learn that batch's insertions, which
// flatters branchy code (the library's former insertion scan and std::partial_sort alike)
// and skews the ratios, since a policy's extra passes disturb that learning: with the
// insertion scan, top-k at n = 64, E = 256, k = 8 (bfloat16) took 29 us on one repeated
// batch and 71 us on a pool, and OEA 2.1x and 1.45x top-k.

#include <algorithm>
#include <cmath>
#include <execution>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "routing_inputs.hpp"

namespace {
namespace mr = moe_routing;
using bench::make_logits;
using bench::preset_text;

struct shape {
  int n, experts, k;
};

shape shape_of(const benchmark::State& state) {
  return {static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), static_cast<int>(state.range(2))};
}

void per_token_counter(benchmark::State& state, int n) {
  state.counters["ns_per_token"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// Tuning data: rows in the pool of distinct batches an iteration takes its batch from.
constexpr int pool_rows = 1024;

int batches_in_pool(int n) { return std::max(1, pool_rows / n); }

/// The logits of batch `b` of the shape's pool.
template <class Score>
const Score* pool_batch(const std::vector<Score>& logits, int b, int n, int experts) {
  return logits.data() + static_cast<std::size_t>(b) * n * experts;
}

/// How a benchmark's rows are scored: the grid's softmax logits, or as DeepSeek-V3 routes
/// (sigmoid p, a per-expert score-correction bias added for ranking, and 8 expert groups of
/// which the 4 best by the sum of their top-2 scores stay candidates).
enum class row_scoring { softmax, deepseek_v3 };

/// A small bias per expert, as `e_score_correction_bias` looks after load balancing: a few
/// hundredths either way, fixed for the run.
const std::vector<float>& correction_bias(int experts) {
  static std::map<int, std::vector<float>> cache;
  auto [it, fresh] = cache.try_emplace(experts);
  if (fresh) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> spread(-0.05f, 0.05f);
    for (int e = 0; e < experts; ++e) it->second.push_back(spread(rng));
  }
  return it->second;
}

template <class Score, class Exec>
void route_preset(benchmark::State& state, const std::string& name, Exec exec,
                  row_scoring scoring = row_scoring::softmax) {
  const auto [n, experts, k] = shape_of(state);
  const int pool = batches_in_pool(n);
  const std::vector<Score>& logits = make_logits<Score>(n * pool, experts, 1);
  std::vector<std::int32_t> segments;  // 4-token requests, for xshare_spec
  for (int o = 0; o <= n; o += 4) segments.push_back(o);
  if (segments.back() != n) segments.push_back(n);
  std::vector<mr::routing_batch<Score>> batches;
  for (int b = 0; b < pool; ++b) {
    mr::routing_batch<Score> batch{mr::make_score_view(pool_batch(logits, b, n, experts), n, experts)};
    batch.segments = segments.data();
    batch.request_count = static_cast<int>(segments.size()) - 1;
    if (scoring == row_scoring::deepseek_v3) {
      batch.mode = mr::scoring::sigmoid;
      batch.bias = correction_bias(experts).data();
      batch.groups = {.n_group = 8, .topk_group = 4, .score = mr::group_score::top2_sum};
    }
    batches.push_back(batch);
  }
  const mr::runtime_policy policy = mr::parse_policy_or_throw(preset_text(name, k));
  mr::cpu::workspace ws({n, experts, k});
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
  int next = 0;
  for (auto _ : state) {
    const mr::status s = mr::cpu::route(policy, batches[static_cast<std::size_t>(next)], plan.view(), ws, exec);
    if (!s.ok()) {  // a benchmark of an error path would time nothing a user runs
      state.SkipWithError(mr::to_string(s).c_str());
      break;
    }
    benchmark::ClobberMemory();
    next = next + 1 == pool ? 0 : next + 1;
  }
  per_token_counter(state, n);
  state.counters["active"] = plan.summary().active_count;
  state.counters["selected"] = plan.summary().selected_count;
}

/// The baseline a user would write: per row, sort (score, index) pairs partially, then a
/// softmax over the k winners.
template <class Score>
void partial_sort_topk(benchmark::State& state) {
  const auto [n, experts, k] = shape_of(state);
  const int pool = batches_in_pool(n);
  const std::vector<Score>& logits = make_logits<Score>(n * pool, experts, 1);
  std::vector<std::pair<float, int>> row(static_cast<std::size_t>(experts));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n) * k);
  std::vector<float> weights(static_cast<std::size_t>(n) * k);
  int next = 0;
  for (auto _ : state) {
    const Score* batch = pool_batch(logits, next, n, experts);
    next = next + 1 == pool ? 0 : next + 1;
    for (int i = 0; i < n; ++i) {
      const Score* x = batch + static_cast<std::size_t>(i) * experts;
      for (int e = 0; e < experts; ++e) row[static_cast<std::size_t>(e)] = {mr::to_float(x[e]), e};
      std::partial_sort(row.begin(), row.begin() + k, row.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      const float top = row[0].first;
      float sum = 0;
      for (int j = 0; j < k; ++j) sum += std::exp(row[static_cast<std::size_t>(j)].first - top);
      for (int j = 0; j < k; ++j) {
        ids[static_cast<std::size_t>(i) * k + j] = row[static_cast<std::size_t>(j)].second;
        weights[static_cast<std::size_t>(i) * k + j] = std::exp(row[static_cast<std::size_t>(j)].first - top) / sum;
      }
    }
    benchmark::DoNotOptimize(ids.data());
    benchmark::DoNotOptimize(weights.data());
    benchmark::ClobberMemory();
  }
  per_token_counter(state, n);
}

/// Registers every benchmark of one shape together, so that the policies and the baseline
/// a ratio compares run seconds apart, not minutes, under the same machine load.
template <class Score>
void register_shape(const std::string& dtype, int n, int experts, int k) {
  const std::string shape = "/" + dtype;  // Google Benchmark appends /n:N/E:E/k:K
  for (const std::string name : {"topk", "oea", "xshare", "xshare_spec", "lynx_lat", "lynx_acc", "skip"}) {
    benchmark::RegisterBenchmark(("route/seq/" + name + shape).c_str(),
                                 [name](benchmark::State& s) { route_preset<Score>(s, name, std::execution::seq); })
        ->Args({n, experts, k})
        ->ArgNames({"n", "E", "k"});
    benchmark::RegisterBenchmark(("route/par/" + name + shape).c_str(),
                                 [name](benchmark::State& s) { route_preset<Score>(s, name, std::execution::par); })
        ->Args({n, experts, k})
        ->ArgNames({"n", "E", "k"});
  }
  benchmark::RegisterBenchmark(("baseline/partial_sort" + shape).c_str(), partial_sort_topk<Score>)
      ->Args({n, experts, k})
      ->ArgNames({"n", "E", "k"});
}

const bool registered = [] {
  // Warm-up (not reported), first when the benchmarks run in order: the first shapes of a run
  // otherwise pay the CPU's clock ramp, first-touch page faults and TBB's thread start; n = 1,
  // E = 64 measured up to 1.7x slower as the first shape than when it ran later in the same
  // binary. run_benchmarks.sh interleaves repetitions in random order, where a slow first
  // repetition is one of five and the median drops it.
  for (const char* exec : {"seq", "par"}) {
    benchmark::RegisterBenchmark((std::string("warmup/") + exec).c_str(),
                                 [exec](benchmark::State& s) {
                                   if (std::string(exec) == "seq")
                                     route_preset<float>(s, "xshare", std::execution::seq);
                                   else
                                     route_preset<float>(s, "xshare", std::execution::par);
                                 })
        ->Args({64, 256, 8})
        ->MinTime(1.0);
  }
  // DeepSeek-V3's scoring (`row_scoring::deepseek_v3`) at its E = 256, k = 8, outside the grid
  // (its own name, which routing_report.py leaves alone): every row takes the full-row path
  // (p of every expert, the group limit, then the best k of the row's rank keys).
  for (const int n : {1, 4, 16, 64, 256}) {
    for (const std::string name : {"topk", "xshare", "lynx_acc"}) {
      benchmark::RegisterBenchmark(
          ("scoring/deepseek_v3/seq/" + name + "/f32").c_str(),
          [name](benchmark::State& s) { route_preset<float>(s, name, std::execution::seq, row_scoring::deepseek_v3); })
          ->Args({n, 256, 8})
          ->ArgNames({"n", "E", "k"});
    }
  }
  for (const int n : {1, 4, 16, 64, 256, 1024, 16384}) {
    for (const int experts : {64, 128, 256, 512}) {
      for (const int k : {2, 4, 8}) {
        register_shape<float>("f32", n, experts, k);
        register_shape<mr::bfloat16>("bf16", n, experts, k);
      }
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

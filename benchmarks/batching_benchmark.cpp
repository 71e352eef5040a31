// Batch forming: the time each method takes for a pool of N requests in batches of 64,
// and the expert loads its batches cause against random batches of the same pool
// (counter `saving_vs_random` = 1 - loads / random loads; `share_of_oracle` = the method's
// saving over the greedy oracle's, where the oracle runs, N <= 2000).
//
// The pools are synthetic and NOT calibrated to the co-activation study: 40 layers of 256
// experts; each request belongs to one of 16 topics and draws 24 experts per layer, 80%
// of them from its topic's 32 preferred experts of that layer. They show the methods'
// cost and how they rank, not the savings a model's traces would give.

#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>

#include <moe_routing/batching/form_batches.hpp>
#include <moe_routing/batching/spectral_batches.hpp>

namespace {

namespace mb = moe_routing::batching;

constexpr int layers = 40, experts = 256, per_layer = 24, topics = 16, preferred = 32, batch_size = 64;

std::unique_ptr<mb::request_signatures> make_pool(int requests) {
  moe_routing::synthetic::random_bits rng(2026);
  std::vector<int> preference(static_cast<std::size_t>(topics) * layers * preferred);
  for (auto& e : preference) e = static_cast<int>(rng.below(experts));
  auto pool = std::make_unique<mb::request_signatures>(requests, layers, experts);
  for (int r = 0; r < requests; ++r) {
    const auto topic = rng.below(topics);
    for (int l = 0; l < layers; ++l) {
      for (int j = 0; j < per_layer; ++j) {
        const bool own = rng.below(10) < 8;
        const std::size_t at = (topic * layers + static_cast<std::size_t>(l)) * preferred + rng.below(preferred);
        pool->add(r, l, own ? preference[at] : static_cast<int>(rng.below(experts)));
      }
    }
  }
  return pool;
}

/// Pools are built once per size and shared by every method.
const mb::request_signatures& pool_of(int requests) {
  static std::map<int, std::unique_ptr<mb::request_signatures>> pools;
  auto& pool = pools[requests];
  if (!pool) pool = make_pool(requests);
  return *pool;
}

template <class Form>
void form(benchmark::State& state, Form method) {
  const int requests = static_cast<int>(state.range(0));
  const mb::request_signatures& pool = pool_of(requests);
  mb::batch_list batches;
  for (auto _ : state) {
    batches = method(pool);
    benchmark::DoNotOptimize(batches.data());
  }
  const double random = static_cast<double>(mb::expert_loads(pool, mb::random_batches(requests, batch_size, 1)));
  const double loads = static_cast<double>(mb::expert_loads(pool, batches));
  state.counters["saving_vs_random"] = 1.0 - loads / random;
  if (requests <= 2000) {
    const double oracle = static_cast<double>(mb::expert_loads(pool, mb::greedy_batches(pool, batch_size)));
    state.counters["share_of_oracle"] = (random - loads) / (random - oracle);
  }
}

void register_method(const std::string& name, auto method, std::initializer_list<int> sizes) {
  for (const int n : sizes) {
    benchmark::RegisterBenchmark(("batching/" + name).c_str(), [method](benchmark::State& s) { form(s, method); })
        ->Arg(n)
        ->ArgName("requests")
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_method("fifo", [](const mb::request_signatures& p) { return mb::fifo_batches(p.requests(), batch_size); },
                  {1000, 10000, 100000});
  register_method("random",
                  [](const mb::request_signatures& p) { return mb::random_batches(p.requests(), batch_size, 1); },
                  {1000, 10000, 100000});
  register_method("minhash", [](const mb::request_signatures& p) { return mb::minhash_batches(p, batch_size); },
                  {1000, 10000, 100000});
  register_method("spectral", [](const mb::request_signatures& p) { return mb::spectral_batches(p, batch_size); },
                  {1000, 10000, 100000});
  register_method("greedy_oracle", [](const mb::request_signatures& p) { return mb::greedy_batches(p, batch_size); },
                  {1000, 2000});
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}

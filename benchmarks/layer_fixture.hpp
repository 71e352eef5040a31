#pragma once
// What the executor and layer benchmarks share: a pool of bf16 SwiGLU experts shaped like
// Qwen3-30B-A3B's (d = 2048, h = 768) over several layers, and a loop that runs one MoE
// layer per iteration on the next layer's weights, so no expert is still cached from the
// previous iteration (the pool is far larger than the last-level cache); or, to time the
// compute alone, on one layer whose experts all use one expert's weights. The weights live in
// the system's default pages or in huge pages (`weight_storage.hpp`).

#include <algorithm>
#include <chrono>
#include <execution>
#include <functional>
#include <numeric>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/cpu.hpp>
#include <moe_routing/cpu/executor/moe_forward.hpp>

#include "weight_storage.hpp"

namespace bench {
namespace mr = moe_routing;

inline constexpr int hidden = 2048, width = 768, top_k = 8;
inline constexpr double expert_bytes = 3.0 * width * hidden * sizeof(mr::bfloat16);

/// `layers` x `experts` experts of bf16 weights with small deterministic values (their
/// magnitude does not matter to the memory traffic), in `pages`.
class weight_pool {
 public:
  weight_pool(int layers, int experts, page_size pages = page_size::system_default)
      : experts_(experts),
        storage_(static_cast<std::size_t>(layers) * experts * 3 * std::size_t{width} * hidden, pages) {
    const std::size_t matrix = static_cast<std::size_t>(width) * hidden;
    std::vector<std::size_t> chunks(static_cast<std::size_t>(layers) * experts * 3);
    std::iota(chunks.begin(), chunks.end(), std::size_t{0});
    std::for_each(std::execution::par, chunks.begin(), chunks.end(), [&](std::size_t c) {
      for (std::size_t i = c * matrix; i < (c + 1) * matrix; ++i)
        storage_[i] = mr::bfloat16{static_cast<std::uint16_t>(0x3c00 + (i * 2654435761u >> 24) % 64)};
    });
    gate_.resize(static_cast<std::size_t>(layers)), up_.resize(gate_.size()), down_.resize(gate_.size());
    for (int l = 0; l < layers; ++l) {
      for (int e = 0; e < experts; ++e) {
        const mr::bfloat16* base = storage_.data() + (static_cast<std::size_t>(l) * experts + e) * 3 * matrix;
        gate_[l].push_back(base), up_[l].push_back(base + matrix), down_[l].push_back(base + 2 * matrix);
      }
    }
    one_gate_.assign(static_cast<std::size_t>(experts), gate_[0][0]);
    one_up_.assign(static_cast<std::size_t>(experts), up_[0][0]);
    one_down_.assign(static_cast<std::size_t>(experts), down_[0][0]);
  }
  int layers() const { return static_cast<int>(gate_.size()); }
  int experts() const { return experts_; }
  double huge_page_fraction() const { return storage_.huge_page_fraction(); }

  /// Layer `l`'s first `experts` experts.
  mr::expert_weights<mr::bfloat16> layer(int l, int experts) const {
    const auto at = static_cast<std::size_t>(l);
    return weights_of(experts, gate_[at], up_[at], down_[at]);
  }

  /// A layer whose `experts` experts all use the first expert's weights (9 MiB, which stay in
  /// the caches from call to call, L3 beyond L2): the executor's compute without memory
  /// traffic. Its time next to a real layer's and to the paired read says how much of the two
  /// overlap.
  mr::expert_weights<mr::bfloat16> one_expert_layer(int experts) const {
    return weights_of(experts, one_gate_, one_up_, one_down_);
  }

 private:
  using matrix_list = std::vector<const mr::bfloat16*>;  // one matrix per expert

  static mr::expert_weights<mr::bfloat16> weights_of(int experts, const matrix_list& gate, const matrix_list& up,
                                                     const matrix_list& down) {
    mr::expert_weights<mr::bfloat16> w;
    w.experts = experts, w.hidden = hidden, w.intermediate = width;
    w.gate = gate.data(), w.up = up.data(), w.down = down.data();
    return w;
  }

  int experts_;
  weight_storage storage_;
  std::vector<std::vector<const mr::bfloat16*>> gate_, up_, down_;
  std::vector<const mr::bfloat16*> one_gate_, one_up_, one_down_;  // each entry: layer 0's first expert
};

/// Where `run_layers` takes each call's weights from.
enum class weight_source { rotating_layers, one_expert_for_all };

/// Runs one MoE layer per iteration on layer `call % layers` (or, with
/// `weight_source::one_expert_for_all`, always on `one_expert_layer`), with the plan `plan_for(call)`
/// returns (which may route first: that time is part of the layer). Counters: mean
/// |active|, mean assignments, effective weight bandwidth (|active| x bytes per expert / time).
/// With `paired_read` (which reads that many bytes of cold memory and returns the seconds it
/// took), each layer is followed, outside the timed region, by a plain read of as many bytes
/// as its active experts hold; `fraction_of_read` is then the layer's bandwidth over that
/// read's, both measured within milliseconds of each other. This machine's bandwidth drifts by
/// 20% and more from one second to the next (other tenants), so a fraction against a reference
/// measured at another time moves by as much; paired, the drift cancels.
inline void run_layers(benchmark::State& state, const weight_pool& pool, int n, int experts,
                       const std::function<mr::routing_plan&(std::size_t call)>& plan_for,
                       const std::function<double(double bytes)>& paired_read = {},
                       mr::cpu::isa_level kernel = mr::cpu::best_projection_level(),
                       weight_source source = weight_source::rotating_layers) {
  std::vector<float> x(static_cast<std::size_t>(n) * hidden, 0.01f), y(x.size());
  mr::cpu::executor_workspace ws({n, top_k, experts, hidden, width});
  ws.force_kernel(kernel);
  std::vector<mr::expert_weights<mr::bfloat16>> views;
  if (source == weight_source::one_expert_for_all) {
    views.push_back(pool.one_expert_layer(experts));
  } else {
    for (int l = 0; l < pool.layers(); ++l) views.push_back(pool.layer(l, experts));
  }
  std::size_t call = 0;
  double active_total = 0, assignments_total = 0, layer_seconds = 0, read_seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    mr::routing_plan& plan = plan_for(call);
    const auto s =
        mr::cpu::moe_forward(x.data(), n, plan.view(), views[call % views.size()], y.data(), ws, std::execution::par);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(y.data());
    if (paired_read) {
      state.PauseTiming();
      layer_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      read_seconds += paired_read(plan.summary().active_count * expert_bytes);
      state.ResumeTiming();
    }
    active_total += plan.summary().active_count;
    for (int i = 0; i < n; ++i) assignments_total += plan.count(i);
    ++call;
  }
  state.SetLabel(std::string("kernel:") + ws.last_kernel_name());
  if (paired_read && layer_seconds > 0)
    state.counters["fraction_of_read"] = read_seconds / layer_seconds;  // equal bytes
  const double calls = static_cast<double>(std::max<std::size_t>(call, 1));
  state.counters["active"] = active_total / calls;
  state.counters["assignments"] = assignments_total / calls;
  state.counters["huge_page_fraction"] = pool.huge_page_fraction();
  const bool one_expert = source == weight_source::one_expert_for_all;
  const double experts_held = one_expert ? 1.0 : static_cast<double>(pool.layers()) * experts;
  state.counters["working_set_GiB"] = experts_held * expert_bytes / (1 << 30);
  if (one_expert) return;  // no weight bandwidth: the weights are not read from memory
  state.counters["weight_bytes_per_second"] =
      benchmark::Counter(active_total / calls * expert_bytes, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace bench

// CUDA routing overhead: every preset against a plain softmax-top-k kernel written here
// (the in-run baseline an engine would otherwise use), at decode shapes (n <= 256,
// E <= 256, k = 8) and the prefill shape n = 16384, E = 256. Each iteration launches
// the call and waits for it, so real time includes the launch (what a decode step
// pays); the counter gpu_us is the kernels' own time from CUDA events.
// Names: cuda/route/<preset>/<f32|bf16>/n:N/E:E/k:K, cuda/baseline/softmax_topk/..., and
// cuda/path/<fused|multi_kernel|segmented_sort>/oea/... (every path from n = 64, for the crossovers).
// Without a usable GPU the binary prints why and exits 0.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <moe_routing/cuda.cuh>
#include <moe_routing/moe_routing.hpp>

#include "routing_inputs.hpp"

namespace {
namespace mr = moe_routing;

void check(cudaError_t code, const char* call) {
  if (code != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", call, cudaGetErrorString(code));
    std::exit(1);
  }
}

/// The baseline: one warp per row, k rounds of a warp arg-max over (logit, index), then a
/// softmax over the k winners. Independent of the library on purpose.
template <class Score>
__global__ void softmax_topk_kernel(const Score* logits, int n, int experts, int k, int* ids, float* weights) {
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= n) return;
  const Score* x = logits + static_cast<long long>(row) * experts;
  float values[32];
  int count = 0;
  for (int e = lane; e < experts; e += 32) values[count++] = mr::to_float(x[e]);
  float top[32];
  int top_ids[32];
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY;
    int best_e = 0x7fffffff;
    for (int i = 0; i < count; ++i) {
      const int e = lane + 32 * i;
      if (values[i] > best || (values[i] == best && e < best_e)) {
        best = values[i];
        best_e = e;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_e = __shfl_xor_sync(0xffffffffu, best_e, offset);
      if (other > best || (other == best && other_e < best_e)) {
        best = other;
        best_e = other_e;
      }
    }
    top[j] = best;
    top_ids[j] = best_e;
    if (best_e % 32 == lane) values[best_e / 32] = -INFINITY;
  }
  if (lane == 0) {
    float sum = 0;
    for (int j = 0; j < k; ++j) sum += expf(top[j] - top[0]);
    for (int j = 0; j < k; ++j) {
      ids[row * k + j] = top_ids[j];
      weights[row * k + j] = expf(top[j] - top[0]) / sum;
    }
  }
}

/// Device copies of one shape's logits and a plan, and a workspace.
template <class Score>
struct device_call {
  Score* logits = nullptr;
  int* ids = nullptr;
  float* weights = nullptr;
  int* counts = nullptr;
  mr::plan_summary* summary = nullptr;
  void* buffer = nullptr;
  void* sort_buffer = nullptr;
  mr::cuda::workspace ws;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;

  device_call(int n, int experts, int k) {
    const std::vector<Score>& host = bench::make_logits<Score>(n, experts, 1);
    check(cudaMalloc(&logits, host.size() * sizeof(Score)), "cudaMalloc");
    check(cudaMemcpy(logits, host.data(), host.size() * sizeof(Score), cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMalloc(&ids, static_cast<std::size_t>(n) * k * sizeof(int)), "cudaMalloc");
    check(cudaMalloc(&weights, static_cast<std::size_t>(n) * k * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&counts, static_cast<std::size_t>(n) * sizeof(int)), "cudaMalloc");
    check(cudaMalloc(&summary, sizeof(mr::plan_summary)), "cudaMalloc");
    const mr::workspace_shape shape{n, experts, k};
    check(cudaMalloc(&buffer, mr::cuda::workspace_bytes(shape)), "cudaMalloc");
    ws = mr::cuda::workspace(buffer, mr::cuda::workspace_bytes(shape), shape);
    std::size_t sort_bytes = 0;
    if (mr::cuda::segmented_sort_bytes(shape, sort_bytes).ok()) {
      check(cudaMalloc(&sort_buffer, sort_bytes), "cudaMalloc");
      ws.set_sort_buffer(sort_buffer, sort_bytes);
    }
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~device_call() {
    cudaFree(logits);
    cudaFree(ids);
    cudaFree(weights);
    cudaFree(counts);
    cudaFree(summary);
    cudaFree(buffer);
    cudaFree(sort_buffer);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  }

  /// Times `launch` per iteration: real time includes launch and wait; gpu_us from events.
  template <class Launch>
  void run(benchmark::State& state, Launch launch) {
    launch();  // warm-up (module load, first launch)
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    double gpu_ms = 0;
    for (auto _ : state) {
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      launch();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      gpu_ms += ms;
    }
    state.counters["gpu_us"] = benchmark::Counter(gpu_ms * 1000.0 / static_cast<double>(state.iterations()));
  }
};

template <class Score>
void route_preset(benchmark::State& state, const std::string& name, mr::cuda::route_path path) {
  const int n = static_cast<int>(state.range(0)), experts = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  device_call<Score> call(n, experts, k);
  const mr::runtime_policy policy = mr::parse_policy_or_throw(bench::preset_text(name, k));
  std::vector<std::int32_t> segments;  // 4-token requests, for xshare_spec
  for (int o = 0; o <= n; o += 4) segments.push_back(o);
  if (segments.back() != n) segments.push_back(n);
  std::int32_t* device_segments = nullptr;
  check(cudaMalloc(&device_segments, segments.size() * sizeof(std::int32_t)), "cudaMalloc");
  check(cudaMemcpy(device_segments, segments.data(), segments.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  mr::routing_batch<Score> batch{mr::make_score_view(call.logits, n, experts)};
  batch.segments = device_segments;
  batch.request_count = static_cast<int>(segments.size()) - 1;
  const mr::plan_view plan{call.ids, call.weights, call.counts, call.summary, n, k};
  call.run(state, [&] {
    const mr::status s = mr::cuda::route(policy, batch, plan, call.ws, call.stream, path);
    if (!s.ok()) state.SkipWithError(mr::to_string(s).c_str());
  });
  cudaFree(device_segments);
}

template <class Score>
void softmax_topk(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), experts = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  device_call<Score> call(n, experts, k);
  const int warps_per_block = 8;
  call.run(state, [&] {
    softmax_topk_kernel<Score><<<(n + warps_per_block - 1) / warps_per_block, 32 * warps_per_block, 0, call.stream>>>(
        call.logits, n, experts, k, call.ids, call.weights);
  });
}

template <class Score>
void register_shape(const std::string& dtype, int n, int experts, int k) {
  const std::string shape = "/" + dtype;  // ArgNames add /n:N/E:E/k:K
  benchmark::RegisterBenchmark(("cuda/baseline/softmax_topk" + shape).c_str(), softmax_topk<Score>)
      ->Args({n, experts, k})
      ->ArgNames({"n", "E", "k"})
      ->UseRealTime();
  for (const char* name : {"topk", "oea", "xshare", "xshare_spec", "lynx_lat", "lynx_acc", "skip"}) {
    benchmark::RegisterBenchmark(
        ("cuda/route/" + std::string(name) + shape).c_str(),
        [name](benchmark::State& s) { route_preset<Score>(s, name, mr::cuda::route_path::automatic); })
        ->Args({n, experts, k})
        ->ArgNames({"n", "E", "k"})
        ->UseRealTime();
  }
  // Every path of the same call from n = 64 up: the fused/multi-kernel crossover
  // (fused_max_tokens), and warp top-k against cub::DeviceSegmentedSort at prefill sizes.
  if (n >= 64 && dtype == "f32") {
    for (const auto& [label, path] : {std::pair{"fused", mr::cuda::route_path::fused},
                                      std::pair{"multi_kernel", mr::cuda::route_path::multi_kernel},
                                      std::pair{"segmented_sort", mr::cuda::route_path::segmented_sort}}) {
      if (n > 1024 && path == mr::cuda::route_path::fused) continue;
      benchmark::RegisterBenchmark(("cuda/path/" + std::string(label) + "/oea" + shape).c_str(),
                                   [path](benchmark::State& s) { route_preset<Score>(s, "oea", path); })
          ->Args({n, experts, k})
          ->ArgNames({"n", "E", "k"})
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const mr::cuda::device_probe probe = mr::cuda::probe_device();
  if (!probe.available) {
    std::printf("CUDA benchmarks skipped: no usable GPU (%s)\n", probe.reason);
    return 0;
  }
  for (const int n : {1, 4, 16, 64, 256, 1024, 16384}) {
    for (const int experts : {64, 128, 256}) {
      if (n > 256 && experts != 256) continue;
      register_shape<float>("f32", n, experts, 8);
      register_shape<mr::bfloat16>("bf16", n, experts, 8);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

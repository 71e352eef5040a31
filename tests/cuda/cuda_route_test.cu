// The CUDA backend against the naive router (tests/naive_router.hpp, written from SPEC.md
// alone) and against the CPU backend, on the random problems and policies the CPU suite
// uses, plus capture in a CUDA graph and the host-side error messages. Without a usable
// GPU every case prints that it was skipped, and why, and passes.

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdio>
#include <execution>
#include <random>
#include <string>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/cuda.cuh>
#include <moe_routing/moe_routing.hpp>

#include "naive_router.hpp"
#include "plan_checks.hpp"
#include "test_support.hpp"

namespace {

namespace mr = moe_routing;

/// Whether kernels can run here; printed once when they cannot.
const mr::cuda::device_probe& device() {
  static const mr::cuda::device_probe probe = [] {
    const mr::cuda::device_probe found = mr::cuda::probe_device();
    if (!found.available) std::printf("CUDA tests skipped: no usable GPU (%s)\n", found.reason);
    return found;
  }();
  return probe;
}

#define SKIP_WITHOUT_GPU()                                        \
  do {                                                            \
    if (!device().available) {                                    \
      MESSAGE("skipped: no usable GPU (" << std::string(device().reason) << ")"); \
      return;                                                     \
    }                                                             \
  } while (false)

void require_cuda(cudaError_t code, const char* call) {
  REQUIRE_MESSAGE(code == cudaSuccess, call << ": " << cudaGetErrorString(code));
}

/// A device copy of a host vector (or an uninitialised buffer of `count` elements).
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t count) : count_(count) {
    require_cuda(cudaMalloc(&data_, (count > 0 ? count : 1) * sizeof(T)), "cudaMalloc");
  }
  explicit device_array(const std::vector<T>& host) : device_array(host.size()) {
    if (!host.empty()) require_cuda(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() { cudaFree(data_); }
  T* get() const { return data_; }
  void copy_to(T* host) const {
    if (count_ > 0) require_cuda(cudaMemcpy(host, data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

/// Device buffers for one problem and its plan; `route` fills the host plan from them.
struct device_problem {
  const test::problem& p;
  device_array<float> f32;
  device_array<mr::float16> f16;
  device_array<mr::bfloat16> bf16;
  device_array<float> bias;
  device_array<std::uint8_t> mask;
  device_array<std::int32_t> segments, placement;
  device_array<std::int32_t> ids, counts, expert_tokens, device_loads, guaranteed;
  device_array<float> weights;
  device_array<mr::plan_summary> summary{1};
  device_array<unsigned char> buffer;
  mr::cuda::workspace ws;
  unsigned char* sort_buffer = nullptr;

  explicit device_problem(const test::problem& problem)
      : p(problem), f32(problem.f32), f16(problem.f16), bf16(problem.bf16), bias(problem.ref.bias),
        mask(problem.ref.mask), segments(problem.segments), placement(problem.placement),
        ids(static_cast<std::size_t>(problem.ref.n) * problem.top_k), counts(problem.ref.n),
        expert_tokens(problem.ref.E), device_loads(problem.ref.G), guaranteed(problem.ref.n),
        weights(static_cast<std::size_t>(problem.ref.n) * problem.top_k),
        buffer(mr::cuda::workspace_bytes({problem.ref.n, problem.ref.E, problem.top_k})),
        ws(buffer.get(), mr::cuda::workspace_bytes({problem.ref.n, problem.ref.E, problem.top_k}),
           {problem.ref.n, problem.ref.E, problem.top_k}) {
    std::size_t sort_bytes = 0;
    const mr::status sized = mr::cuda::segmented_sort_bytes({problem.ref.n, problem.ref.E, problem.top_k}, sort_bytes);
    REQUIRE_MESSAGE(sized.ok(), mr::to_string(sized));
    require_cuda(cudaMalloc(&sort_buffer, sort_bytes), "cudaMalloc");
    ws.set_sort_buffer(sort_buffer, sort_bytes);
  }
  ~device_problem() { cudaFree(sort_buffer); }

  template <class T>
  mr::routing_batch<T> batch() const {
    mr::routing_batch<T> b = p.batch<T>();
    if constexpr (std::is_same_v<T, float>) b.scores.data = f32.get();
    if constexpr (std::is_same_v<T, mr::float16>) b.scores.data = f16.get();
    if constexpr (std::is_same_v<T, mr::bfloat16>) b.scores.data = bf16.get();
    if (b.bias != nullptr) b.bias = bias.get();
    if (b.token_mask != nullptr) b.token_mask = mask.get();
    if (b.segments != nullptr) b.segments = segments.get();
    if (b.placement != nullptr) b.placement = placement.get();
    return b;
  }

  mr::plan_view plan_view(mr::padding pad) const {
    return {ids.get(), weights.get(), counts.get(), summary.get(), p.ref.n, p.top_k, pad,
            expert_tokens.get(), p.ref.G > 0 ? device_loads.get() : nullptr, guaranteed.get(), p.ref.E, p.ref.G};
  }

  template <class Policy>
  mr::status enqueue(const Policy& policy, mr::padding pad, cudaStream_t stream,
                     mr::cuda::route_path path = mr::cuda::route_path::automatic) const {
    switch (p.type) {
      case test::element::f32: return mr::cuda::route(policy, batch<float>(), plan_view(pad), ws, stream, path);
      case test::element::f16: return mr::cuda::route(policy, batch<mr::float16>(), plan_view(pad), ws, stream, path);
      case test::element::bf16: return mr::cuda::route(policy, batch<mr::bfloat16>(), plan_view(pad), ws, stream, path);
    }
    return {};
  }

  /// Copies the device plan into a host plan of the same shape.
  mr::routing_plan fetch(mr::padding pad) const {
    require_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    mr::routing_plan plan(p.ref.n, p.top_k, p.ref.E, p.ref.G, pad);
    const mr::plan_view host = plan.view();
    ids.copy_to(host.ids);
    weights.copy_to(host.weights);
    counts.copy_to(host.counts);
    expert_tokens.copy_to(host.expert_tokens);
    if (host.device_loads != nullptr) device_loads.copy_to(host.device_loads);
    guaranteed.copy_to(host.guaranteed);
    summary.copy_to(host.summary);
    return plan;
  }
};

mr::routing_plan route_on_gpu(const test::problem& p, const mr::runtime_policy& policy, mr::padding pad = {},
                              mr::cuda::route_path path = mr::cuda::route_path::automatic) {
  const device_problem on_device(p);
  const mr::status s = on_device.enqueue(policy, pad, nullptr, path);
  REQUIRE_MESSAGE(s.ok(), mr::to_string(s));
  const mr::status input = mr::cuda::input_status(on_device.ws);
  REQUIRE_MESSAGE(input.ok(), mr::to_string(input));
  return on_device.fetch(pad);
}

/// ids and counts equal, weights within 1e-6 relative, same summary and counters.
void check_same_plan(const mr::routing_plan& gpu, const mr::routing_plan& cpu) {
  REQUIRE(gpu.ids() == cpu.ids());
  REQUIRE(gpu.counts() == cpu.counts());
  for (std::size_t i = 0; i < cpu.weights().size(); ++i) {
    REQUIRE_MESSAGE(test::close(gpu.weights()[i], cpu.weights()[i]), gpu.weights()[i] << " vs " << cpu.weights()[i]);
  }
  CHECK(gpu.summary().active == cpu.summary().active);
  CHECK(gpu.summary().selected == cpu.summary().selected);
  CHECK(gpu.summary().active_count == cpu.summary().active_count);
  CHECK(gpu.summary().max_device_load == cpu.summary().max_device_load);
  CHECK(gpu.expert_tokens() == cpu.expert_tokens());
  CHECK(gpu.device_loads() == cpu.device_loads());
}

/// The shared test body: random problems and policies on both backends and the naive router.
void compare_backends(unsigned seed, int cases, const test::problem_options& options) {
  std::mt19937 rng(seed);
  for (int c = 0; c < cases; ++c) {
    const test::problem p = test::random_problem(rng, options);
    const std::string text = test::random_policy_text(rng, p);
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    const mr::padding pad = c % 3 == 0 ? mr::padding{mr::padding_kind::repeat, -1} : mr::padding{mr::padding_kind::sentinel, p.ref.E};
    INFO("case " << c << ": " << text << ", n=" << p.ref.n << " E=" << p.ref.E << " k=" << p.top_k);
    const mr::routing_plan gpu = route_on_gpu(p, policy, pad);
    const mr::routing_plan cpu = test::route_problem(p, policy, pad);
    check_same_plan(gpu, cpu);
    // The other kernel paths give the same plan (the path changes speed only).
    const auto other = p.ref.n <= mr::cuda::fused_max_tokens ? mr::cuda::route_path::multi_kernel : mr::cuda::route_path::fused;
    check_same_plan(route_on_gpu(p, policy, pad, other), cpu);
    check_same_plan(route_on_gpu(p, policy, pad, mr::cuda::route_path::segmented_sort), cpu);
    if (pad.kind == mr::padding_kind::sentinel) {
      test::check_against_naive(gpu, naive::route(p.ref, test::to_naive(policy), p.top_k), text);
    }
  }
}

}  // namespace

TEST_CASE("CUDA plans equal the CPU backend's and the naive router's: decode batches (fused kernel)") {
  SKIP_WITHOUT_GPU();
  compare_backends(11, 400, {.max_tokens = 40, .max_experts = 1024});
}

TEST_CASE("CUDA plans equal the CPU backend's and the naive router's: large batches (four kernels)") {
  SKIP_WITHOUT_GPU();
  compare_backends(12, 30, {.max_tokens = 3000, .max_experts = 1024});
}

TEST_CASE("CUDA plans at n = 16384, E = 256 equal the CPU backend's") {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (const char* text : {"topk(k=8)", "oea(k0=4,k=8)", "xshare(k0=1,m=16,k=8)", "lynx_acc(conf=0.5,budget=24,k=8)"}) {
    test::problem p;
    do {
      p = test::random_problem(rng, {.max_tokens = 16384, .max_experts = 256, .allow_non_finite = false});
    } while (p.ref.E != 256 || p.top_k < 8);
    p.top_k = 8;
    INFO(text);
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    const mr::routing_plan cpu = test::route_problem(p, policy);
    check_same_plan(route_on_gpu(p, policy), cpu);
    check_same_plan(route_on_gpu(p, policy, {}, mr::cuda::route_path::segmented_sort), cpu);
  }
}

TEST_CASE("a CUDA routing call is captured in a graph and replays on new scores") {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  test::problem p;
  do {
    p = test::random_problem(rng, {.max_tokens = 64, .max_experts = 256, .allow_non_finite = false});
  } while (p.ref.n < 8 || p.type != test::element::f32);
  const mr::runtime_policy policy = mr::parse_policy_or_throw("xshare(k0=1,m=4,k=" + std::to_string(p.top_k) + ")");
  device_problem on_device(p);
  cudaStream_t stream;
  require_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph;
  require_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  const mr::status captured = on_device.enqueue(policy, {}, stream);
  require_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  REQUIRE_MESSAGE(captured.ok(), mr::to_string(captured));
  cudaGraphExec_t exec;
  require_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int replay = 0; replay < 3; ++replay) {
    // New scores in the same device buffer, then one replay of the captured call.
    std::vector<float> values(static_cast<std::size_t>(p.ref.n) * p.ref.E);
    for (auto& v : values) v = std::normal_distribution<float>(0.0f, 1.5f)(rng);
    test::store_scores(p, values);
    require_cuda(cudaMemcpy(on_device.f32.get(), p.f32.data(), p.f32.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    require_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    require_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    check_same_plan(on_device.fetch({}), test::route_problem(p, policy));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_CASE("bad shapes and parameters fail on the host before any launch, with the CPU backend's messages") {
  // Runs without a GPU too: nothing here reaches the device.
  std::mt19937 rng(15);
  test::problem p;
  do {
    p = test::random_problem(rng, {.max_tokens = 16, .max_experts = 64});
  } while (p.ref.n < 2 || p.top_k < 2);
  const mr::runtime_policy policy = mr::parse_policy_or_throw("oea(k0=1,k=" + std::to_string(p.top_k) + ")");
  mr::routing_plan cpu_plan(p.ref.n, p.top_k, p.ref.E);
  mr::cpu::workspace cpu_ws({p.ref.n, p.ref.E, p.top_k});
  const mr::workspace_shape shape{p.ref.n, p.ref.E, p.top_k};
  std::vector<unsigned char> fake(mr::cuda::workspace_bytes(shape));  // never dereferenced: checks fail first
  const mr::cuda::workspace ws(fake.data(), fake.size(), shape);
  mr::routing_batch<float> batch = p.batch<float>();
  batch.scores.data = p.f32.data();

  mr::plan_view bad_plan = cpu_plan.view();
  bad_plan.top_k = 0;
  CHECK(mr::to_string(mr::cuda::route(policy, batch, bad_plan, ws)) ==
        mr::to_string(mr::cpu::route(policy, batch, bad_plan, cpu_ws)));

  mr::routing_batch<float> wide = batch;
  wide.scores.row_stride = p.ref.E - 1;
  CHECK(mr::to_string(mr::cuda::route(policy, wide, cpu_plan.view(), ws)) ==
        mr::to_string(mr::cpu::route(policy, wide, cpu_plan.view(), cpu_ws)));

  const mr::runtime_policy too_deep = mr::parse_policy_or_throw("oea(k0=" + std::to_string(p.top_k + 1) + ",k=" + std::to_string(p.top_k + 1) + ")");
  const mr::status cuda_deep = mr::cuda::route(too_deep, batch, cpu_plan.view(), ws);
  CHECK_FALSE(cuda_deep.ok());
  CHECK(mr::to_string(cuda_deep) == mr::to_string(mr::cpu::route(too_deep, batch, cpu_plan.view(), cpu_ws)));

  const mr::cuda::workspace small(fake.data(), fake.size() / 2, shape);
  const mr::status too_small = mr::cuda::route(policy, batch, cpu_plan.view(), small);
  CHECK(too_small.code == mr::errc::workspace_too_small);
  CHECK(std::string(too_small.parameter) == "workspace bytes");
}

TEST_CASE("bad segments on the device are reported by input_status, and every row is left empty") {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(16);
  test::problem p;
  do {
    p = test::random_problem(rng, {.max_tokens = 16, .max_experts = 64});
  } while (p.ref.n < 3 || p.segments.size() < 4);
  p.segments[1] = p.ref.n;  // then back to 0: a decreasing offset
  p.segments[2] = 0;
  const device_problem on_device(p);
  const mr::runtime_policy policy = mr::parse_policy_or_throw("xshare_spec(k0=1,m=2,m_r=2,k=" + std::to_string(p.top_k) + ")");
  REQUIRE(on_device.enqueue(policy, {}, nullptr).ok());
  const mr::status input = mr::cuda::input_status(on_device.ws);
  CHECK(input.code == mr::errc::invalid_input);
  CHECK(std::string(input.parameter) == "segments");
  const mr::routing_plan plan = on_device.fetch({});
  for (int i = 0; i < p.ref.n; ++i) CHECK(plan.count(i) == 0);
}

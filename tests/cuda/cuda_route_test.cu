// What only the CUDA backend has: its kernel paths (fused, multi-kernel, segmented sort)
// against each other, the CPU backend and the naive router (tests/naive_router.hpp,
// written from SPEC.md alone) on the random problems the CPU suite uses; capture in a CUDA
// graph; the host-side checks before any launch; and device-checked segments. The routing
// behaviour both backends share is tested once, in tests/bodies/ (backend_bodies_test.cu).
// Cases that need a GPU are skipped without one (test::runs_on<cuda_backend_runner>).

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/cuda.cuh>
#include <moe_routing/moe_routing.hpp>

#include "backends/backend_test_case.hpp"
#include "backends/cpu_backend_runner.hpp"
#include "backends/cuda_backend_runner.cuh"
#include "naive_router.hpp"
#include "plan_checks.hpp"
#include "resident_experts.hpp"  // examples/
#include "test_support.hpp"

namespace {

namespace mr = moe_routing;
using test::cuda_backend_runner;

mr::routing_plan route_on_gpu(const test::problem& p, const mr::runtime_policy& policy, mr::padding pad = {},
                              mr::cuda::route_path path = mr::cuda::route_path::automatic) {
  mr::routing_plan plan(p.ref.n, p.top_k, p.ref.E, p.ref.G, pad);
  const mr::status s = cuda_backend_runner::route(policy, p, plan, {}, path);
  REQUIRE_MESSAGE(s.ok(), mr::to_string(s));
  return plan;
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

/// Random problems and policies on every kernel path, the CPU backend and the naive router.
void compare_paths_and_backends(unsigned seed, int cases, const test::problem_options& options) {
  std::mt19937 rng(seed);
  for (int c = 0; c < cases; ++c) {
    const test::problem p = test::random_problem(rng, options);
    const std::string text = test::random_policy_text(rng, p);
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    const mr::padding pad =
        c % 3 == 0 ? mr::padding{mr::padding_kind::repeat, -1} : mr::padding{mr::padding_kind::sentinel, p.ref.E};
    INFO("case " << c << ": " << text << ", n=" << p.ref.n << " E=" << p.ref.E << " k=" << p.top_k);
    const mr::routing_plan gpu = route_on_gpu(p, policy, pad);
    const mr::routing_plan cpu = test::route_problem(p, policy, pad);
    check_same_plan(gpu, cpu);
    // The other kernel paths give the same plan (the path changes speed only).
    const auto other =
        p.ref.n <= mr::cuda::fused_max_tokens ? mr::cuda::route_path::multi_kernel : mr::cuda::route_path::fused;
    check_same_plan(route_on_gpu(p, policy, pad, other), cpu);
    check_same_plan(route_on_gpu(p, policy, pad, mr::cuda::route_path::segmented_sort), cpu);
    if (pad.kind == mr::padding_kind::sentinel) {
      test::check_against_naive(gpu, naive::route(p.ref, test::to_naive(policy), p.top_k), text);
    }
  }
}

}  // namespace

TEST_CASE("CUDA plans equal the CPU backend's and the naive router's: decode batches (fused kernel)" *
          test::runs_on<cuda_backend_runner>{}) {
  compare_paths_and_backends(11, 400, {.max_tokens = 40, .max_experts = 1024});
}

TEST_CASE("CUDA plans equal the CPU backend's and the naive router's: large batches (four kernels)" *
          test::runs_on<cuda_backend_runner>{}) {
  compare_paths_and_backends(12, 30, {.max_tokens = 3000, .max_experts = 1024});
}

TEST_CASE("CUDA plans at n = 16384, E = 256 equal the CPU backend's" * test::runs_on<cuda_backend_runner>{}) {
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

TEST_CASE("a CUDA routing call is captured in a graph and replays on new scores" *
          test::runs_on<cuda_backend_runner>{}) {
  std::mt19937 rng(14);
  test::problem p;
  do {
    p = test::random_problem(rng, {.max_tokens = 64, .max_experts = 256, .allow_non_finite = false});
  } while (p.ref.n < 8 || p.type != test::element::f32);
  const mr::runtime_policy policy = mr::parse_policy_or_throw("xshare(k0=1,m=4,k=" + std::to_string(p.top_k) + ")");
  mr::routing_plan plan(p.ref.n, p.top_k, p.ref.E, p.ref.G);
  test::device_inputs inputs(p);
  const test::device_plan out(plan);
  const test::device_route_workspace ws(test::workspace_shape_of(p), false);
  cudaStream_t stream;
  test::require_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph;
  test::require_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  const mr::status captured = mr::cuda::route(policy, inputs.batch<float>(), out.view(), ws.get(), stream);
  test::require_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  REQUIRE_MESSAGE(captured.ok(), mr::to_string(captured));
  cudaGraphExec_t exec;
  test::require_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int replay = 0; replay < 3; ++replay) {
    // New scores in the same device buffer, then one replay of the captured call.
    std::vector<float> values(static_cast<std::size_t>(p.ref.n) * p.ref.E);
    for (auto& v : values) v = std::normal_distribution<float>(0.0f, 1.5f)(rng);
    test::store_scores(p, values);
    inputs.upload_scores(p);
    test::require_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    test::require_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    out.copy_to(plan);
    check_same_plan(plan, test::route_problem(p, policy));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_CASE("a user stage (examples/resident_experts) runs on CUDA and gives the CPU backend's plans" *
          test::runs_on<cuda_backend_runner>{}) {
  std::mt19937 rng(29);
  for (int c = 0; c < 40; ++c) {
    const test::problem p = test::random_problem(rng);
    examples::resident_experts resident;
    for (int e = c % 3; e < p.ref.E; e += 3) resident.resident.insert(e);
    const auto policy = mr::prune{.k0 = 1} | resident | mr::refine{.k = 0};
    INFO("case " << c << ": n=" << p.ref.n << " E=" << p.ref.E << " k=" << p.top_k);
    mr::routing_plan gpu(p.ref.n, p.top_k, p.ref.E, p.ref.G), cpu(p.ref.n, p.top_k, p.ref.E, p.ref.G);
    const mr::status on_gpu = cuda_backend_runner::route(policy, p, gpu);
    const mr::status on_cpu = test::cpu_backend_runner::route(policy, p, cpu);
    REQUIRE(on_gpu.ok() == on_cpu.ok());
    if (on_cpu.ok()) check_same_plan(gpu, cpu);
  }
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

  const mr::runtime_policy too_deep =
      mr::parse_policy_or_throw("oea(k0=" + std::to_string(p.top_k + 1) + ",k=" + std::to_string(p.top_k + 1) + ")");
  const mr::status cuda_deep = mr::cuda::route(too_deep, batch, cpu_plan.view(), ws);
  CHECK_FALSE(cuda_deep.ok());
  CHECK(mr::to_string(cuda_deep) == mr::to_string(mr::cpu::route(too_deep, batch, cpu_plan.view(), cpu_ws)));

  const mr::cuda::workspace small(fake.data(), fake.size() / 2, shape);
  const mr::status too_small = mr::cuda::route(policy, batch, cpu_plan.view(), small);
  CHECK(too_small.code == mr::errc::workspace_too_small);
  CHECK(std::string(too_small.parameter) == "workspace bytes");
}

TEST_CASE("bad segments on the device are reported by input_status, and every row is left empty" *
          test::runs_on<cuda_backend_runner>{}) {
  std::mt19937 rng(16);
  test::problem p;
  do {
    p = test::random_problem(rng, {.max_tokens = 16, .max_experts = 64});
  } while (p.ref.n < 3 || p.segments.size() < 4);
  p.segments[1] = p.ref.n;  // then back to 0: a decreasing offset
  p.segments[2] = 0;
  const mr::runtime_policy policy =
      mr::parse_policy_or_throw("xshare_spec(k0=1,m=2,m_r=2,k=" + std::to_string(p.top_k) + ")");
  mr::routing_plan plan(p.ref.n, p.top_k, p.ref.E, p.ref.G);
  const mr::status input = cuda_backend_runner::route(policy, p, plan);
  CHECK(input.code == mr::errc::invalid_input);
  CHECK(std::string(input.parameter) == "segments");
  for (int i = 0; i < p.ref.n; ++i) CHECK(plan.count(i) == 0);
}

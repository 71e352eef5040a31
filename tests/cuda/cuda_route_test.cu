// What only the CUDA backend has: its kernel paths (fused, multi-kernel, segmented sort)
// against each other, the CPU backend and the naive router (tests/naive_router.hpp,
// written from SPEC.md alone) on the random problems the CPU suite uses; capture in a CUDA
// graph; the host-side checks before any launch; and device-checked segments. The routing
// behaviour both backends share is tested once, in tests/bodies/ (backend_bodies_test.cu).
// Cases that need a GPU are skipped without one (test::runs_on<cuda_backend_runner>).

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <functional>
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
  mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G, .pad = pad});
  const mr::status s = cuda_backend_runner::route(policy, p, plan, {}, path);
  REQUIRE_MESSAGE(s.ok(), mr::to_string(s));
  return plan;
}

/// ids and counts equal, weights within 1e-6 relative, same summary and counters, same
/// guaranteed ranks per token.
void check_same_plan(const mr::routing_plan& gpu, const mr::routing_plan& cpu) {
  REQUIRE(gpu.ids() == cpu.ids());
  REQUIRE(gpu.counts() == cpu.counts());
  for (std::size_t i = 0; i < cpu.weights().size(); ++i) {
    REQUIRE_MESSAGE(test::close(gpu.weights()[i], cpu.weights()[i]), gpu.weights()[i] << " vs " << cpu.weights()[i]);
  }
  for (int i = 0; i < cpu.tokens(); ++i) CHECK(gpu.guaranteed(i) == cpu.guaranteed(i));
  CHECK(gpu.summary().active == cpu.summary().active);
  CHECK(gpu.summary().selected == cpu.summary().selected);
  CHECK(gpu.summary().selected_count == cpu.summary().selected_count);
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

namespace {

constexpr mr::cuda::route_path every_path[] = {mr::cuda::route_path::fused, mr::cuda::route_path::multi_kernel,
                                               mr::cuda::route_path::segmented_sort};

/// n rows of E normal logits (f32), top-k k.
test::problem logit_rows(std::mt19937& rng, int n, int experts, int k, float spread = 1.5f) {
  std::vector<float> values(static_cast<std::size_t>(n) * experts);
  for (auto& v : values) v = std::normal_distribution<float>(0.0f, spread)(rng);
  return test::problem_from_rows(values, experts, k);
}

/// Owners of a stream, a graph and its executable form, released however the test ends.
struct stream_guard {
  cudaStream_t stream = nullptr;
  stream_guard() { test::require_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"); }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;
  ~stream_guard() {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) == cudaSuccess && capturing != cudaStreamCaptureStatusNone) {
      cudaGraph_t abandoned = nullptr;  // a check failed mid-capture: end it, drop what was captured
      if (cudaStreamEndCapture(stream, &abandoned) == cudaSuccess && abandoned != nullptr) cudaGraphDestroy(abandoned);
    }
    cudaStreamDestroy(stream);
  }
};
struct graph_guard {
  cudaGraph_t graph = nullptr;
  graph_guard() = default;
  graph_guard(const graph_guard&) = delete;
  graph_guard& operator=(const graph_guard&) = delete;
  ~graph_guard() {
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};
struct graph_exec_guard {
  cudaGraphExec_t exec = nullptr;
  graph_exec_guard() = default;
  graph_exec_guard(const graph_exec_guard&) = delete;
  graph_exec_guard& operator=(const graph_exec_guard&) = delete;
  ~graph_exec_guard() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

}  // namespace

TEST_CASE("CUDA plans at n = 16384, E = 256 equal the CPU backend's, on every path" *
          test::runs_on<cuda_backend_runner>{}) {
  std::mt19937 rng(13);
  const test::problem p = logit_rows(rng, 16384, 256, 8);
  REQUIRE(p.ref.n == 16384);
  for (const char* text : {"topk(k=8)", "oea(k0=4,k=8)", "xshare(k0=1,m=16,k=8)", "lynx_acc(conf=0.5,budget=24,k=8)",
                           "xshare_spec(k0=2,m=4,m_r=2,k=8)"}) {
    INFO(text);
    const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
    const mr::routing_plan cpu = test::route_problem(p, policy);
    for (const auto path : every_path) {
      CAPTURE(static_cast<int>(path));
      check_same_plan(route_on_gpu(p, policy, {}, path), cpu);
    }
  }
}

TEST_CASE(
    "CUDA plans for E not a multiple of 32 (E = 60, Qwen1.5-MoE, and 40, and 96) equal the CPU's and the naive "
    "router's" *
    test::runs_on<cuda_backend_runner>{}) {
  std::mt19937 rng(17);
  for (const int experts : {60, 40, 96}) {
    for (const int n : {1, 7, 300}) {
      test::problem p = logit_rows(rng, n, experts, 4);
      if (n == 7) {  // a bias, and a group limit of 4 groups of E / 4
        p.ref.bias.resize(static_cast<std::size_t>(experts));
        for (auto& b : p.ref.bias) b = std::normal_distribution<float>(0.0f, 0.5f)(rng);
        p.ref.n_group = 4;
        p.ref.topk_group = 2;
      }
      for (const char* text :
           {"topk(k=4)", "topk(k=4,weights=raw)", "oea(k0=2,top_p=0.6,k=4)", "xshare(k0=1,m=5,k=4)",
            "xshare_spec(k0=1,m=2,m_r=2,k=4)", "lynx_lat(d=3,k=4)", "lynx_acc(conf=0.3,budget=6,k=4)"}) {
        INFO(text << ", E=" << experts << " n=" << n);
        const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
        const mr::routing_plan cpu = test::route_problem(p, policy);
        test::check_against_naive(cpu, naive::route(p.ref, test::to_naive(policy), p.top_k), text);
        for (const auto path : every_path) {
          CAPTURE(static_cast<int>(path));
          const mr::routing_plan gpu = route_on_gpu(p, policy, {}, path);
          check_same_plan(gpu, cpu);
          test::check_against_naive(gpu, naive::route(p.ref, test::to_naive(policy), p.top_k), text);
        }
      }
    }
  }
}

TEST_CASE("a CUDA routing call is captured in a graph and replays on new scores, on every path" *
          test::runs_on<cuda_backend_runner>{}) {
  // n = 600: more than the 500 segments past which cub::DeviceSegmentedSort synchronised
  // with the host (capture then failed on the segmented-sort path).
  std::mt19937 rng(14);
  for (const auto path : every_path) {
    for (const char* text :
         {"xshare(k0=1,m=4,k=6)", "xshare_spec(k0=1,m=2,m_r=2,k=6)", "lynx_acc(conf=0.4,budget=9,k=6)"}) {
      CAPTURE(static_cast<int>(path));
      INFO(text);
      test::problem p = logit_rows(rng, 600, 128, 6);
      const mr::runtime_policy policy = mr::parse_policy_or_throw(text);
      mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G});
      test::device_inputs inputs(p);
      const test::device_plan out(plan);
      const test::device_route_workspace ws(test::workspace_shape_of(p), path == mr::cuda::route_path::segmented_sort);
      const stream_guard stream;
      graph_guard graph;
      graph_exec_guard exec;
      test::require_cuda(cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
      const mr::status captured =
          mr::cuda::route(policy, inputs.batch<float>(), out.view(), ws.get(), stream.stream, path);
      test::require_cuda(cudaStreamEndCapture(stream.stream, &graph.graph), "cudaStreamEndCapture");
      REQUIRE_MESSAGE(captured.ok(), mr::to_string(captured));
      test::require_cuda(cudaGraphInstantiate(&exec.exec, graph.graph, 0), "cudaGraphInstantiate");
      for (int replay = 0; replay < 3; ++replay) {
        // New scores in the same device buffer, then one replay of the captured call.
        std::vector<float> values(static_cast<std::size_t>(p.ref.n) * p.ref.E);
        for (auto& v : values) v = std::normal_distribution<float>(0.0f, 1.5f)(rng);
        test::store_scores(p, values);
        inputs.upload_scores(p);
        test::require_cuda(cudaGraphLaunch(exec.exec, stream.stream), "cudaGraphLaunch");
        test::require_cuda(cudaStreamSynchronize(stream.stream), "cudaStreamSynchronize");
        out.copy_to(plan);
        check_same_plan(plan, test::route_problem(p, policy));
      }
    }
  }
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
    mr::routing_plan gpu({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G}),
        cpu({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G});
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
  mr::routing_plan cpu_plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k});
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
  mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G});
  const mr::status input = cuda_backend_runner::route(policy, p, plan);
  CHECK(input.code == mr::errc::invalid_input);
  CHECK(std::string(input.parameter) == "segments");
  for (int i = 0; i < p.ref.n; ++i) CHECK(plan.count(i) == 0);
}

TEST_CASE("a bad replica map on the device is reported by input_status as the CPU names it, rows left empty" *
          test::runs_on<cuda_backend_runner>{}) {
  std::mt19937 rng(17);
  test::problem p;
  do {
    p = test::random_problem(rng, {.max_tokens = 16, .max_experts = 64});
  } while (p.ref.n < 2 || p.ref.E < 3 || p.ref.E % 2 == 0);
  p.segments.clear();
  const int E = p.ref.E, P = E + 1;  // two devices; expert 0 has a second replica in slot E
  std::vector<std::int32_t> first_devices(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) first_devices[static_cast<std::size_t>(e)] = e / (P / 2);
  test::set_placement(p, 2, first_devices);
  p.replica_width = 2;
  p.replica_p2l.resize(static_cast<std::size_t>(P));
  p.replica_l2p.assign(static_cast<std::size_t>(E) * 2, -1);
  p.replica_counts.assign(static_cast<std::size_t>(E), 1);
  for (int e = 0; e < E; ++e) p.replica_p2l[static_cast<std::size_t>(e)] = p.replica_l2p[2 * e] = e;
  p.replica_p2l[static_cast<std::size_t>(E)] = p.replica_l2p[1] = 0;
  p.replica_counts[0] = 2;
  const mr::runtime_policy policy =
      mr::parse_policy_or_throw("xshare_spec(k0=1,m=2,m_r=2,k=" + std::to_string(p.top_k) + ")");
  const auto new_plan = [&] {
    return mr::routing_plan({.tokens = p.ref.n, .experts = E, .top_k = p.top_k, .devices = 2});
  };
  mr::routing_plan good = new_plan();
  REQUIRE_MESSAGE(test::cpu_backend_runner::route(policy, p, good).ok(), "the well-formed map");
  const mr::status fine = cuda_backend_runner::route(policy, p, good);
  CHECK_MESSAGE(fine.ok(), mr::to_string(fine));

  // One map per fault `validate_replica_map` names (replica_map.hpp's replica_fault).
  const std::vector<std::function<void(test::problem&)>> faults = {
      [&](test::problem& q) { q.replica_p2l[1] = E; },                           // slot 1 holds no expert
      [](test::problem& q) { q.replica_counts[1] = 0; },                         // count out of [1, max_replicas]
      [](test::problem& q) { q.replica_l2p[3] = 0; },                            // e1's padding is not -1
      [&](test::problem& q) { q.replica_l2p[1] = P; },                           // e0's second slot out of [0, P)
      [](test::problem& q) { q.replica_l2p[1] = 1; },                            // slot 1 holds e1
      [](test::problem& q) { q.replica_l2p[1] = 0; },                            // slot 0 twice
      [](test::problem& q) { q.replica_counts[0] = 1, q.replica_l2p[1] = -1; },  // slot E unused
      // placement[e] not the device of e's first replica (slot 0, device 0).
      [](test::problem& q) { q.placement[0] = q.ref.placement[0] = 1; },
      // Two faults: e0's names slot 1 (other_expert), e2's count is 0 (count, a lower
      // code): both backends name the first in expert order, e0's.
      [](test::problem& q) { q.replica_l2p[1] = 1, q.replica_counts[2] = 0; },
      // A slot holding no expert and a row fault: the slots are checked first.
      [&](test::problem& q) { q.replica_p2l[E - 1] = -1, q.replica_counts[0] = 0; },
  };
  for (std::size_t f = 0; f < faults.size(); ++f) {
    CAPTURE(f);
    test::problem bad = p;
    faults[f](bad);
    mr::routing_plan cpu_plan = new_plan(), plan = new_plan();
    const mr::status cpu = test::cpu_backend_runner::route(policy, bad, cpu_plan);
    const mr::status input = cuda_backend_runner::route(policy, bad, plan);
    REQUIRE_FALSE(cpu.ok());
    CHECK(input.code == mr::errc::invalid_input);
    REQUIRE(input.parameter != nullptr);
    CHECK(std::string(input.parameter) == cpu.parameter);
    CHECK(std::string(input.requirement) == cpu.requirement);
    for (int i = 0; i < p.ref.n; ++i) CHECK(plan.count(i) == 0);
  }
}

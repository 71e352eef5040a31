// The CUDA executor against the naive per-token loop of tests/naive_executor.hpp, on
// plans from every preset; and its bad-input checks. Without a usable GPU the device
// cases print that they were skipped, and why, and pass.

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/cuda.cuh>
#include <moe_routing/cuda/moe_forward.cuh>

#include "naive_executor.hpp"
#include "plan_checks.hpp"

namespace {
namespace mr = moe_routing;

void require_cuda(cudaError_t code, const char* call) {
  REQUIRE_MESSAGE(code == cudaSuccess, call << ": " << cudaGetErrorString(code));
}

template <class T>
T* upload(const std::vector<T>& host) {
  T* device = nullptr;
  require_cuda(cudaMalloc(&device, (host.empty() ? 1 : host.size()) * sizeof(T)), "cudaMalloc");
  if (!host.empty()) require_cuda(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

/// A bank's matrices on the device, with host tables of their device pointers.
template <class Weight>
struct device_bank {
  std::vector<Weight*> owned;
  std::vector<const Weight*> gate, up, down, gate_up;

  explicit device_bank(const test::expert_bank<Weight>& bank) {
    for (int e = 0; e < bank.experts; ++e) {
      for (auto [table, source] : {std::pair{&gate, &bank.gate[e]}, std::pair{&up, &bank.up[e]}, std::pair{&down, &bank.down[e]},
                                   std::pair{&gate_up, &bank.gate_up[e]}}) {
        owned.push_back(upload(*source));
        table->push_back(owned.back());
      }
    }
  }
  ~device_bank() {
    for (Weight* p : owned) cudaFree(p);
  }
};

template <class Weight>
mr::expert_weights<Weight> device_view(const test::expert_bank<Weight>& bank, const device_bank<Weight>& on_device, bool fused,
                                       const test::expert_bank<Weight>* shared, const device_bank<Weight>* shared_on_device) {
  mr::expert_weights<Weight> w = test::view_of(bank, fused, shared);
  w.gate = on_device.gate.data(), w.up = on_device.up.data(), w.down = on_device.down.data(), w.gate_up = on_device.gate_up.data();
  if (shared != nullptr) {
    w.shared_gate = shared_on_device->gate.data(), w.shared_up = shared_on_device->up.data();
    w.shared_down = shared_on_device->down.data(), w.shared_gate_up = shared_on_device->gate_up.data();
  }
  return w;
}

/// Every preset's plans at n 1..512, shared experts on and off, both layouts. Activations
/// are rounded to the weight type before each GEMM, so bf16 runs compare with the naive
/// loop's bf16 rounding at one bf16 step; float32 runs at 1e-5.
template <class Weight>
void check_against_naive_loop(std::uint32_t seed) {
  if (!mr::cuda::probe_device().available) {
    MESSAGE("skipped: no usable GPU (" << std::string(mr::cuda::probe_device().reason) << ")");
    return;
  }
  std::mt19937 rng(seed);
  const int experts = 16, d = 64, h = 48, shared_h = 40, k = 4;
  const test::expert_bank<Weight> routed(experts, d, h, rng), shared(2, d, shared_h, rng);
  const device_bank<Weight> routed_on_device(routed), shared_on_device(shared);
  const bool rounded = std::is_same_v<Weight, mr::bfloat16>;
  const double tolerance = rounded ? 1.0 / 256 : 1e-5;
  for (const int n : {1, 7, 64, 512}) {
    const test::layer_inputs inputs(n, d, experts, rng);
    const std::vector<float>& x = inputs.x;
    const mr::routing_batch<float> batch = inputs.batch();
    float* x_device = upload(x);
    float* y_device = upload(std::vector<float>(x.size()));
    mr::cuda::executor_workspace<Weight> ws({n, k, experts, d, h, 2, shared_h});
    for (const char* text : {"topk(k=4)", "oea(k0=2,k=4)", "xshare(k0=1,m=3,k=4)", "xshare_spec(k0=1,m=1,m_r=2,k=4)", "lynx_acc(conf=0.3,budget=5,k=4,weights=raw,scale=2.5)"}) {
      mr::routing_plan plan(n, k, experts);
      REQUIRE(mr::cpu::route(mr::parse_policy_or_throw(text), batch, plan.view()).ok());
      std::int32_t* ids = upload(plan.ids());
      float* weights = upload(plan.weights());
      std::int32_t* counts = upload(plan.counts());
      const mr::plan_view device_plan{ids, weights, counts, nullptr, n, k};
      for (const bool with_shared : {false, true}) {
        for (const bool fused : {false, true}) {
          CAPTURE(n);
          CAPTURE(text);
          CAPTURE(with_shared);
          CAPTURE(fused);
          const auto* s = with_shared ? &shared : nullptr;
          const auto w = device_view(routed, routed_on_device, fused, s, with_shared ? &shared_on_device : nullptr);
          const mr::status status = mr::cuda::moe_forward(x_device, n, device_plan, w, y_device, ws);
          REQUIRE_MESSAGE(status.ok(), mr::to_string(status));
          std::vector<float> y(x.size());
          require_cuda(cudaMemcpy(y.data(), y_device, y.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
          CHECK(test::relative_error(y, test::naive_forward(x, plan, routed, s, rounded)) < tolerance);
          if (n > 3) {
            for (int c = 0; c < d; ++c) REQUIRE(y[static_cast<std::size_t>(2) * d + c] == 0.0f);  // the masked token
          }
        }
      }
      cudaFree(ids);
      cudaFree(weights);
      cudaFree(counts);
    }
    cudaFree(x_device);
    cudaFree(y_device);
  }
}

}  // namespace

TEST_CASE("CUDA executor equals a naive per-token loop: float32 weights") { check_against_naive_loop<float>(21); }
TEST_CASE("CUDA executor equals a naive per-token loop: bfloat16 weights and activations") {
  check_against_naive_loop<mr::bfloat16>(22);
}

TEST_CASE("CUDA executor bad input: mismatched shapes and null pointers fail before any launch") {
  // Host checks only: no workspace (which would allocate on a GPU) is needed to reach them.
  std::mt19937 rng(23);
  const test::expert_bank<float> bank(4, 8, 6, rng);
  const test::expert_bank<float>* no_shared = nullptr;
  mr::expert_weights<float> w = test::view_of(bank, false, no_shared);
  w.down = nullptr;
  CHECK(std::string(mr::validate_weights(w).parameter) == "weights.down");
  if (!mr::cuda::probe_device().available) {
    MESSAGE("skipped the device part: no usable GPU (" << std::string(mr::cuda::probe_device().reason) << ")");
    return;
  }
  mr::cuda::executor_workspace<float> ws({4, 2, 4, 8, 6});
  std::vector<std::int32_t> ids = {0, 9, 1, 2, 3, 0, 1, 2};  // expert 9 does not exist
  std::vector<float> weights(8, 0.5f);
  std::vector<std::int32_t> counts = {2, 2, 2, 2};
  std::int32_t* ids_device = upload(ids);
  float* weights_device = upload(weights);
  std::int32_t* counts_device = upload(counts);
  float* x = upload(std::vector<float>(32, 1.0f));
  float* y = upload(std::vector<float>(32));
  const mr::plan_view plan{ids_device, weights_device, counts_device, nullptr, 4, 2};
  const mr::status bad_id = mr::cuda::moe_forward(x, 4, plan, test::view_of(bank, false, no_shared), y, ws);
  CHECK(bad_id.code == mr::errc::invalid_input);
  CHECK(std::string(bad_id.parameter) == "plan.ids/counts");
  const mr::status no_x = mr::cuda::moe_forward(static_cast<const float*>(nullptr), 4, plan, test::view_of(bank, false, no_shared), y, ws);
  CHECK(no_x.code == mr::errc::null_pointer);
  const test::expert_bank<float> wider(4, 16, 6, rng);
  const mr::status wrong_d = mr::cuda::moe_forward(x, 4, plan, test::view_of(wider, false, no_shared), y, ws);
  CHECK(wrong_d.code == mr::errc::workspace_too_small);  // the CPU executor's check and message
  for (void* p : {static_cast<void*>(ids_device), static_cast<void*>(weights_device), static_cast<void*>(counts_device),
                  static_cast<void*>(x), static_cast<void*>(y)}) {
    cudaFree(p);
  }
}

// The executor bodies of tests/bodies/executor_check.hpp on both backends, and the CUDA
// executor's bad-input checks: those on the host run anywhere, those that need device
// buffers are skipped without a usable GPU.

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include <moe_routing/cuda/executor/moe_forward.cuh>

#include "backends/backend_test_case.hpp"
#include "backends/cpu_executor_runner.hpp"
#include "backends/cuda_executor_runner.cuh"
#include "backends/device_array.cuh"
#include "bodies/executor_check.hpp"
#include "naive_executor.hpp"

MOE_ROUTING_EXECUTOR_TESTS(test::cpu_backend_runner)
MOE_ROUTING_EXECUTOR_TESTS(test::cuda_backend_runner)

namespace {
namespace mr = moe_routing;
}  // namespace

TEST_CASE("CUDA executor bad input: weights without a matrix table fail on the host") {
  std::mt19937 rng(23);
  const test::expert_bank<float> bank(4, 8, 6, rng);
  mr::expert_weights<float> w = test::view_of(bank, false, static_cast<const test::expert_bank<float>*>(nullptr));
  w.down = nullptr;
  CHECK(std::string(mr::validate_weights(w).parameter) == "weights.down");
}

TEST_CASE("CUDA executor bad input: ids beyond E, a NaN weight, a null x, another width" *
          test::runs_on<test::cuda_backend_runner>{}) {
  std::mt19937 rng(23);
  const test::expert_bank<float> bank(4, 8, 6, rng);
  const test::expert_bank<float>* no_shared = nullptr;
  mr::cuda::executor_workspace<float> ws({4, 2, 4, 8, 6});
  const test::device_array<std::int32_t> ids(
      std::vector<std::int32_t>{0, 9, 1, 2, 3, 0, 1, 2});  // expert 9 does not exist
  const test::device_array<float> weights(std::vector<float>(8, 0.5f));
  const test::device_array<std::int32_t> counts(std::vector<std::int32_t>{2, 2, 2, 2});
  const test::device_array<float> x(std::vector<float>(32, 1.0f));
  const test::device_array<float> y(std::vector<float>(32));
  const mr::plan_view plan{ids.get(), weights.get(), counts.get(), nullptr, 4, 2};
  const mr::status bad_id = mr::cuda::moe_forward(x.get(), 4, plan, test::view_of(bank, false, no_shared), y.get(), ws);
  CHECK(bad_id.code == mr::errc::invalid_input);
  CHECK(std::string(bad_id.parameter) == "plan.ids/counts/weights");
  CHECK(bad_id.value == 1);
  std::vector<float> host_weights(8, 0.5f);
  host_weights[5] = std::numeric_limits<float>::quiet_NaN();  // token 2, slot 1; every id valid
  const test::device_array<float> nan_weights(host_weights);
  const test::device_array<std::int32_t> valid_ids(std::vector<std::int32_t>{0, 3, 1, 2, 3, 0, 1, 2});
  const mr::plan_view nan_plan{valid_ids.get(), nan_weights.get(), counts.get(), nullptr, 4, 2};
  const mr::status bad_weight =
      mr::cuda::moe_forward(x.get(), 4, nan_plan, test::view_of(bank, false, no_shared), y.get(), ws);
  CHECK(bad_weight.code == mr::errc::invalid_input);
  CHECK(bad_weight.value == 1);
  const mr::status no_x = mr::cuda::moe_forward(static_cast<const float*>(nullptr), 4, plan,
                                                test::view_of(bank, false, no_shared), y.get(), ws);
  CHECK(no_x.code == mr::errc::null_pointer);
  const test::expert_bank<float> wider(4, 16, 6, rng);
  const mr::status wrong_d =
      mr::cuda::moe_forward(x.get(), 4, plan, test::view_of(wider, false, no_shared), y.get(), ws);
  CHECK(wrong_d.code == mr::errc::workspace_too_small);  // the CPU executor's check and message
}

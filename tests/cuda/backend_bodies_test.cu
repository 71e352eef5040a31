// The routing test bodies of tests/bodies/ on both backends: the CPU instances keep the
// CPU suite's names, the CUDA ones end in " [cuda]" and are skipped without a usable GPU.

#include "backends/cpu_backend_runner.hpp"
#include "backends/cuda_backend_runner.cuh"
#include "bodies/bad_input_table.hpp"
#include "bodies/capacity.hpp"
#include "bodies/coverage_budget.hpp"
#include "bodies/expert_parallel.hpp"
#include "bodies/hand_examples.hpp"
#include "bodies/invariants.hpp"

MOE_ROUTING_HAND_EXAMPLE_TESTS(test::cpu_backend_runner)
MOE_ROUTING_HAND_EXAMPLE_TESTS(test::cuda_backend_runner)
MOE_ROUTING_INVARIANT_TESTS(test::cpu_backend_runner)
MOE_ROUTING_INVARIANT_TESTS(test::cuda_backend_runner)
MOE_ROUTING_BAD_INPUT_TESTS(test::cpu_backend_runner)
MOE_ROUTING_BAD_INPUT_TESTS(test::cuda_backend_runner)
MOE_ROUTING_EXPERT_PARALLEL_TESTS(test::cpu_backend_runner)
MOE_ROUTING_EXPERT_PARALLEL_TESTS(test::cuda_backend_runner)
MOE_ROUTING_CAPACITY_TESTS(test::cpu_backend_runner)
MOE_ROUTING_CAPACITY_TESTS(test::cuda_backend_runner)
MOE_ROUTING_COVERAGE_BUDGET_TESTS(test::cpu_backend_runner)
MOE_ROUTING_COVERAGE_BUDGET_TESTS(test::cuda_backend_runner)

// The hand-worked routing examples (tests/bodies/hand_examples.hpp) on the CPU backend;
// tests/cuda/backend_bodies_test.cu runs the same bodies on the CUDA backend.

#include "bodies/hand_examples.hpp"
#include "backends/cpu_backend_runner.hpp"

MOE_ROUTING_HAND_EXAMPLE_TESTS(test::cpu_backend_runner)

// SPEC section 6's invariants (tests/bodies/invariants.hpp) on the CPU backend;
// tests/cuda/backend_bodies_test.cu runs the same bodies on the CUDA backend.

#include "bodies/invariants.hpp"
#include "backends/cpu_backend_runner.hpp"

MOE_ROUTING_INVARIANT_TESTS(test::cpu_backend_runner)

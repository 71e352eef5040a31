#pragma once
/// \file
/// Library-wide limits and the host/device annotation shared by every backend.

#include <cstdint>

#if defined(__CUDACC__)
#define MOE_ROUTING_HOST_DEVICE __host__ __device__
/// For a function template that is host and device code but may be instantiated with a
/// host-only argument (a user stage's `apply` with the CPU's context): nvcc then checks only
/// the side it is called from.
#define MOE_ROUTING_HOST_DEVICE_TEMPLATE _Pragma("nv_exec_check_disable") __host__ __device__
/// The same for a declaration that begins with `template <...>`: the pragma goes before it,
/// and the function is declared `MOE_ROUTING_HOST_DEVICE`.
#define MOE_ROUTING_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#define MOE_ROUTING_HOST_DEVICE
#define MOE_ROUTING_HOST_DEVICE_TEMPLATE
#define MOE_ROUTING_NO_EXEC_CHECK
#endif

/// Unrolls the next loop completely (its count is a constant): a kernel's accumulators
/// indexed by constants then live in registers instead of a stack array stored back on
/// every step (what GCC 12 did with the bfloat16 kernel's 24 accumulators), and a short
/// loop of stores stays stores (`expert_set::clear`).
#if defined(__CUDACC__)  // nvcc's front end knows neither pragma (its host pass keeps the loops)
#define MOE_ROUTING_UNROLL
#elif defined(__clang__)
#define MOE_ROUTING_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define MOE_ROUTING_UNROLL _Pragma("GCC unroll 32")
#else
#define MOE_ROUTING_UNROLL
#endif

/// Placed after a lambda's parameter list: its body is always inlined into the caller, so it
/// is compiled for the caller's target (`cpu/executor/compiled_for_kernel.hpp`).
#if defined(__GNUC__) || defined(__clang__)
#define MOE_ROUTING_INLINE_LAMBDA __attribute__((always_inline))
#else
#define MOE_ROUTING_INLINE_LAMBDA
#endif

namespace moe_routing {

/// Largest expert count a routing call supports (SPEC section 1). Expert sets are
/// fixed-size bitsets of this many bits so that they fit in registers and shared memory.
inline constexpr int max_experts = 1024;
/// Largest model top-k a routing call supports.
inline constexpr int max_top_k = 32;
/// Largest batch (tokens in one routing call).
inline constexpr int max_tokens = 16384;
/// The largest finite float (FLT_MAX), spelled as a literal so that device code can use it.
inline constexpr float largest_float = 3.4028234e38f;

}  // namespace moe_routing

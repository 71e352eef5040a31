#pragma once
/// \file
/// `compiled_for(kernel, body)`: runs `body()` inside a function compiled for the kernel's
/// instruction set, so that the code around a kernel's tiles (the sweep's loops, the gate/up
/// epilogue's SwiGLU and bfloat16 rounding) is compiled for that set too, whatever `-march`
/// the program was built with. The tiles themselves carry target attributes; the code that
/// calls them is a template, compiled once for the build's target: for the x86-64 baseline
/// (a consumer's build without `-march`), SSE2 only, and the tile's own call not inlined.
/// The body must be a lambda marked `MOE_ROUTING_INLINE_LAMBDA` and every function it calls
/// that should follow it inline (a function that is not inlined keeps the build's target).
///
/// Why: on Zen 5 at b851afc a build without `-march` took 1.05-1.13x the time of a native one
/// on one gate/up work item (`item/avx512_bf16/gate_up`), while the tiles alone took the
/// same time in both (docs/benchmarks/executor_zen5.md).

#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if defined(__GNUC__) || defined(__clang__)
/// Placed after a lambda's parameter list: its body is always inlined into the caller, and so
/// compiled for the caller's target (`compiled_for`).
#define MOE_ROUTING_INLINE_LAMBDA __attribute__((always_inline))
#else
#define MOE_ROUTING_INLINE_LAMBDA
#endif

namespace moe_routing::cpu {

/// Any other kernel (the portable one, or a test's): the build's own target.
template <class Kernel, class Body>
[[gnu::always_inline]] inline void compiled_for(Kernel, Body&& body) {
  body();
}

#if MOE_ROUTING_X86_KERNELS
template <class Body>
MOE_ROUTING_TARGET_AVX2 inline void compiled_for(avx2_kernel, Body&& body) {
  body();
}
template <class Body>
MOE_ROUTING_TARGET_AVX2 inline void compiled_for(avx2_bf16_kernel, Body&& body) {
  body();
}
template <class Body>
MOE_ROUTING_TARGET_AVX512 inline void compiled_for(avx512_kernel, Body&& body) {
  body();
}
template <class Body>
MOE_ROUTING_TARGET_AVX512_BF16 inline void compiled_for(avx512_bf16_kernel, Body&& body) {
  body();
}
#endif

}  // namespace moe_routing::cpu

#pragma once
/// \file
/// `compiled_for(kernel, body)`: runs `body()` inside a function compiled for the kernel's
/// instruction set, so that the code around a kernel's tiles (the sweep's loops, the gate/up
/// epilogue's SwiGLU and bfloat16 rounding) is compiled for that set too, whatever `-march`
/// the program was built with. The tiles themselves carry target attributes; the code that
/// calls them is a template, compiled once for the build's target: for the x86-64 baseline
/// (a consumer's build without `-march`), SSE2 only, and the tile's own call not inlined.
/// The body is a lambda marked `MOE_ROUTING_INLINE_LAMBDA` (`core/config.hpp`), and every
/// function it calls that should be compiled for the kernel must be always inlined too
/// (`[[gnu::always_inline]]`, or the macro for a lambda): a function that is not inlined is one
/// copy, for the build's target. Small ones (`to_bfloat16`) are left to the compiler, which
/// inlines them.
///
/// Why: on Zen 5 at 02aece0 a build without `-march` took 1.06-1.12x the time of a native one
/// on one gate/up work item (`item/avx512_bf16/gate_up`), while the tiles alone took the
/// same time in both; with this, 0.98-1.03x (docs/benchmarks/executor_zen5.md).

#include "moe_routing/core/config.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

namespace moe_routing::cpu {

/// Any other kernel (the portable one, or a test's), and every kernel where
/// `MOE_ROUTING_X86_KERNELS` is 0: the build's own target.
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
MOE_ROUTING_TARGET_AVX512 inline void compiled_for(avx512_pairs_kernel, Body&& body) {
  body();
}
template <class Body>
MOE_ROUTING_TARGET_AVX512_BF16 inline void compiled_for(avx512_bf16_kernel, Body&& body) {
  body();
}
#endif

}  // namespace moe_routing::cpu

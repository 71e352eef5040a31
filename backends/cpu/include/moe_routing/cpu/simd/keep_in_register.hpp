#pragma once
/// \file
/// `keep_in_register(v)`: hides where the vector `v` came from, so the compiler cannot load it
/// again from memory at each use and keeps it in a register for all of them. A kernel loads
/// each activation (or weight) vector once and uses it for several rows (or tokens); left to
/// itself, GCC 12 may instead fold the load into every multiply-add that uses it, as a memory
/// operand: one load per multiply-add, and then the load ports, not the multiply-adds, set the
/// pace. It did so under some tunings and not others (for the same instructions): `-march=native`
/// on Zen 5 (which GCC 12 takes as `-mtune=znver3`) folded the activations of the AVX-512 and
/// AVX2 widening kernels, the x86-64 baseline's generic tuning did not
/// (docs/benchmarks/executor_zen5.md).
///
/// One overload per vector type, each compiled for the instruction set that has its registers:
/// Clang checks an `asm` operand's size against the function the `asm` is written in, so one
/// template without a target attribute would not compile for 256- and 512-bit vectors in a build
/// without `-march`. Always inlined into the kernel, which has at least that set.

#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
namespace moe_routing::cpu {

[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline void keep_in_register(__m256& v) noexcept { asm("" : "+v"(v)); }
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX2 inline void keep_in_register(__m256i& v) noexcept { asm("" : "+v"(v)); }
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512 inline void keep_in_register(__m512& v) noexcept { asm("" : "+v"(v)); }
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512 inline void keep_in_register(__m512i& v) noexcept {
  asm("" : "+v"(v));
}
[[gnu::always_inline]] MOE_ROUTING_TARGET_AVX512_BF16 inline void keep_in_register(__m512bh& v) noexcept {
  asm("" : "+v"(v));
}

}  // namespace moe_routing::cpu
#endif

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

namespace moe_routing::cpu {

/// Always inlined: it takes the vector registers of the kernel it is called from, whatever
/// instruction set that kernel is compiled for.
template <class Vector>
[[gnu::always_inline]] inline void keep_in_register(Vector& v) noexcept {
  asm("" : "+v"(v));
}

}  // namespace moe_routing::cpu

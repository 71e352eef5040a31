#pragma once
/// \file
/// The member count of an expert set with the CPU's POPCNT instruction, chosen at run time.
///
/// `expert_set::size()` is portable code: on a build for the x86-64 baseline (a consumer's
/// build without `-march`) it counts 16 words in SWAR (`core/bit_count.hpp`), which GCC 12
/// vectorises into some 200 SSE2 instructions (its 64-bit multiplies become shifts and
/// adds). Routing counts three sets a call (S twice, the active set once): perf put these
/// counts at about a tenth of the time of routing one token (n = 1). Every x86-64 CPU with
/// AVX2 has POPCNT; where the build already targets POPCNT, `size()` is that instruction and
/// no dispatch is needed.

#include <bit>

#include "moe_routing/core/expert_set.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"
#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS && !defined(__POPCNT__)
#define MOE_ROUTING_MEMBER_COUNT_DISPATCH 1
#else
#define MOE_ROUTING_MEMBER_COUNT_DISPATCH 0
#endif

namespace moe_routing::cpu::detail {

#if MOE_ROUTING_MEMBER_COUNT_DISPATCH
/// `member_count` with POPCNT.
MOE_ROUTING_TARGET_POPCNT inline int member_count_popcnt(const expert_set& set) noexcept {
  int total = 0;
  for (int w = 0; w < expert_set::word_count; ++w) total += std::popcount(set.word(w));
  return total;
}
#endif

/// `set.size()`, the same count by the fastest instruction the CPU has.
inline int member_count(const expert_set& set) noexcept {
#if MOE_ROUTING_MEMBER_COUNT_DISPATCH
  if (cpu_runs(isa_level::avx2)) return member_count_popcnt(set);
#endif
  return set.size();
}

}  // namespace moe_routing::cpu::detail

#undef MOE_ROUTING_MEMBER_COUNT_DISPATCH

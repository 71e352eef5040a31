#pragma once
/// \file
/// `keep_scalar(value)`: the loop that computes `value` stays a scalar loop. Some short loops
/// are written to run one element at a time on purpose, such as the placing of ranked
/// candidates: 8 to 32 stores to addresses that depend on the data. GCC 12 vectorized them with
/// scatters and gathers, which AMD's CPUs run as long microcoded sequences: under
/// `-march=native` on Zen 4 (`-mtune=znver3` to GCC 12) the gathers and scatters of
/// `place_ranked` made routing (top-k, OEA and XShare) 1.12x as slow as the same source built without
/// `-march`, whose generic tuning did not gather (docs/benchmarks/routing_zen4.md). Applied to
/// a value the loop computes each iteration (a slot, an index loaded from memory): the empty
/// `asm` emits nothing, and a compiler cannot vectorize a loop that contains one.

#include <type_traits>

namespace moe_routing::cpu {

template <class Integer>
[[gnu::always_inline]] inline void keep_scalar(Integer& value) noexcept {
  static_assert(std::is_integral_v<Integer>, "keep_scalar holds an integer in a general-purpose register");
#if defined(__GNUC__) || defined(__clang__)
  asm("" : "+r"(value));
#endif
}

}  // namespace moe_routing::cpu

#pragma once
/// \file
/// Which cache the first pass of a sweep streams the weight rows into, chosen once per process
/// by the CPU (`weight_stream_cache()`): L1 (prefetcht0) or L2 (prefetcht1). The rows come from
/// memory once per call, so this choice sets how fast a memory-bound layer can go.
///
/// Measured on Zen 4 (AMD EPYC, family 25 model 17), `executor/qwen3` at n = 1 to 64, one
/// binary run both ways in interleaved rounds: L2 took 0.86-0.90 of the time of L1, while
/// compute alone (the weights already in cache) took 1.07-1.13 of it; scratch builds before it
/// agreed (docs/benchmarks/executor_zen4.md). Streaming into L2, a first pass also asks further
/// ahead (`l2_stream_block_bytes_ahead` in `row_sweep.hpp`), and the `avx512_bf16` kernel reads a
/// one-token down projection in address order (`reads_one_token_rows_in_order`). Zen 4 therefore
/// streams into L2 by default; every other CPU keeps L1, where the kernels were tuned (Zen 5,
/// Zen 3). On Zen 5, in one run on one core (a build without TBB), L2 took 1.13-1.21 of L1's
/// time for compute alone and 0.99-1.05 for the layer (docs/benchmarks/cpu_kind_checks_zen5.md);
/// the two-core comparison is still to be made. The AMX kernel's tiles prefetch on their own and
/// are not affected (its groups that fall back to `avx512_bf16` are).
///
/// `MOE_ROUTING_STREAM_CACHE` (environment, read once) overrides the default with `l1` or `l2`,
/// so the comparison can be made on any machine with one binary. An unknown value stops the
/// program with a message naming it, as `MOE_ROUTING_CPU_ISA` does.

#include <optional>

#include "moe_routing/cpu/executor/environment_choice.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

enum class stream_cache { l1, l2 };

inline const char* name_of(stream_cache cache) noexcept { return cache == stream_cache::l2 ? "l2" : "l1"; }

namespace detail {

/// The value of `MOE_ROUTING_STREAM_CACHE` as a cache, or nothing when it names none.
inline std::optional<stream_cache> parse_stream_cache(const char* text) noexcept {
  return setting_named<stream_cache>(text, {{"l1", stream_cache::l1}, {"l2", stream_cache::l2}});
}

}  // namespace detail

/// Where the sweeps' first pass streams the weight rows on this CPU: `MOE_ROUTING_STREAM_CACHE`
/// when set, else L2 on Zen 4 (`runs_on_zen4`) and L1 on every other CPU. Worked out on the first
/// call (thread-safe), then a load.
inline stream_cache weight_stream_cache() {
  static const stream_cache cache =
      detail::environment_choice("MOE_ROUTING_STREAM_CACHE", "l1 or l2", detail::parse_stream_cache)
          .value_or(runs_on_zen4() ? stream_cache::l2 : stream_cache::l1);
  return cache;
}

}  // namespace moe_routing::cpu

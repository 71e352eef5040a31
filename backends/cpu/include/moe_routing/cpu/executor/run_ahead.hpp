#pragma once
/// \file
/// How the later token passes of a sweep ask for the rows their core takes next (the run-ahead
/// of `prefetch_step` in `row_sweep.hpp`), chosen once per process by the CPU
/// (`weight_run_ahead()`):
///   - whole block: the second pass asks for every row of that block, one line of each row per
///     64 bytes of columns; the passes after it ask for nothing;
///   - one row per pass: the second pass asks for the block's first row, the third for its
///     second, and so on to the last row (later passes ask for nothing): a quarter of the rate
///     in blocks of 4 rows, spread over up to four passes, and fewer of the rows when fewer
///     passes follow the first (with 4-token tiles an expert of 5-8 tokens has one: a quarter of
///     the next rows).
///
/// Why it matters: one core reading alone draws about half of what both draw (on Ice Lake-SP
/// 11.2 of 20.7 GB/s), so at n = 16 and 64 the layer stays at memory speed only while both cores
/// keep asking, through the passes that compute from L2 too. On Ice Lake-SP (Intel, family 6
/// model 106), in two interleaved runs of 12 and 10 rounds, one row per pass took 0.94 of the
/// whole block's time at n = 64 (10 and 8 rounds below 1) and 0.92 with 16 tokens on each of 8
/// experts; the paired fraction at n = 64 rose by 0.064 and 0.036 (11 of 12 and 10 of 10 rounds
/// higher), at n = 16 by 0.056 and 0.024 (docs/benchmarks/cpu_kind_checks_icelake.md). Two rows
/// per pass did no better than one; our reading is that a whole block's prefetches, each waiting
/// on memory in one of the core's few line-fill buffers, leave the pass's own loads from L2
/// queueing behind them. On
/// Zen 5 the whole block measured 0.93 of no run-ahead at n = 64 (`row_sweep.hpp`); one row per
/// pass is unmeasured on AMD, so AMD's CPUs keep the whole block and every other CPU takes one
/// row per pass. Only Ice Lake-SP with `avx512_pairs` measured it: other Intel CPUs (AMX
/// machines' row kernels, AVX2-only ones), other vendors and non-x86 builds take it unmeasured.
///
/// `MOE_ROUTING_RUN_AHEAD` (environment, read once) overrides the default with `block` or `row`,
/// so the comparison can be made on any machine with one binary
/// (`benchmarks/cpu_kind_checks.sh --checks run_ahead`). An unknown value stops the program with
/// a message naming it, as `MOE_ROUTING_CPU_ISA` does.

#include <optional>

#include "moe_routing/cpu/executor/environment_choice.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

enum class run_ahead_style { whole_block, one_row_per_pass };

/// The style as `MOE_ROUTING_RUN_AHEAD` names it.
inline const char* name_of(run_ahead_style style) noexcept {
  return style == run_ahead_style::one_row_per_pass ? "row" : "block";
}

/// The style on a CPU of AMD's or another vendor's (see the file comment).
constexpr run_ahead_style default_run_ahead(bool amd) noexcept {
  return amd ? run_ahead_style::whole_block : run_ahead_style::one_row_per_pass;
}

namespace detail {

/// The value of `MOE_ROUTING_RUN_AHEAD` as a style, or nothing when it names none.
inline std::optional<run_ahead_style> parse_run_ahead(const char* text) noexcept {
  return setting_named<run_ahead_style>(
      text, {{"block", run_ahead_style::whole_block}, {"row", run_ahead_style::one_row_per_pass}});
}

}  // namespace detail

/// How this process's later passes run ahead: `MOE_ROUTING_RUN_AHEAD` when set, else this CPU's
/// default (`default_run_ahead`, by CPUID's vendor). Worked out on the first call (thread-safe),
/// then a load.
inline run_ahead_style weight_run_ahead() {
  static const run_ahead_style style =
      detail::environment_choice("MOE_ROUTING_RUN_AHEAD", "block or row", detail::parse_run_ahead)
          .value_or(default_run_ahead(detail::cpu_vendor_family().amd));
  return style;
}

}  // namespace moe_routing::cpu

#pragma once
/// \file
/// In which order a sweep (`row_sweep.hpp`) takes an expert's token groups and blocks of rows,
/// chosen per kernel and CPU at run time:
///   - token groups first: the first group sweeps every block of the item, each later group
///     sweeps them all again from L2 (and the second asks for the next item's rows);
///   - blocks first: every group over one block before the next, the second group asking for
///     the next block's rows while it computes.
/// Both give the same sums (a tile's sums do not depend on the order of tiles); they differ in
/// how much of an expert's compute the memory streams under. Measured in interleaved rounds
/// (docs/benchmarks/executor_zen*.md), blocks first against token groups first:
///   - `avx2_bf16` on Zen 3: 0.92-0.94 of the time at n = 16, 0.91-0.99 at n = 64;
///   - `avx512_bf16` on Zen 5: no gain (at n = 64 0.98 of the time raw, 1.04-1.08 against the
///     run's controls; in an older sweep 1.18);
///   - `avx512_bf16` on Zen 4, in two runs of 8 and 10 rounds with the machine's read at
///     31-35 GB/s: the paired fraction at n = 64 from 0.765 to 0.802 and from 0.779 to 0.816,
///     n = 1-16 within 2 points either way, compute alone 0.96-1.03.
/// So `avx2_bf16` takes blocks first everywhere, the AVX-512 kernels on Zen 4 (`avx512` and
/// `avx512_pairs`, unmeasured there, follow `avx512_bf16`), every other kernel and CPU token
/// groups first.
///
/// `MOE_ROUTING_SWEEP_ORDER` (environment, read once) overrides the default for every row
/// kernel (the AMX tiles walk their own order) with `groups` or `blocks`, so the comparison can
/// be made on any machine with one binary. An unknown value stops the program with a message
/// naming it, as `MOE_ROUTING_CPU_ISA` does.

#include <concepts>
#include <optional>

#include "moe_routing/cpu/executor/environment_choice.hpp"
#include "moe_routing/cpu/executor/kernel_tags.hpp"
#include "moe_routing/cpu/simd/cpu_features.hpp"

namespace moe_routing::cpu {

enum class sweep_order { groups_first, blocks_first };

/// The order as `MOE_ROUTING_SWEEP_ORDER` names it.
inline const char* name_of(sweep_order order) noexcept {
  return order == sweep_order::blocks_first ? "blocks" : "groups";
}

/// A kernel's order on a CPU that is Zen 4 or not (`runs_on_zen4`): token groups first unless
/// an overload says otherwise (found by argument-dependent lookup, as `tile_tokens_of` is).
template <class Kernel>
constexpr sweep_order default_sweep_order(Kernel, bool /*zen4*/) noexcept {
  return sweep_order::groups_first;
}
constexpr sweep_order default_sweep_order(avx2_bf16_kernel, bool /*zen4*/) noexcept {
  return sweep_order::blocks_first;
}

namespace detail {
/// The AVX-512 row kernels, which take one order on each CPU.
template <class Kernel>
concept avx512_row_kernel = std::same_as<Kernel, avx512_bf16_kernel> || std::same_as<Kernel, avx512_pairs_kernel> ||
    std::same_as<Kernel, avx512_kernel>;
}  // namespace detail

template <detail::avx512_row_kernel Kernel>
constexpr sweep_order default_sweep_order(Kernel, bool zen4) noexcept {
  return zen4 ? sweep_order::blocks_first : sweep_order::groups_first;
}

namespace detail {

/// The value of `MOE_ROUTING_SWEEP_ORDER` as an order, or nothing when it names none.
inline std::optional<sweep_order> parse_sweep_order(const char* text) noexcept {
  return setting_named<sweep_order>(text,
                                    {{"groups", sweep_order::groups_first}, {"blocks", sweep_order::blocks_first}});
}

/// `MOE_ROUTING_SWEEP_ORDER`'s order, or nothing when it is unset or empty. Read on the first
/// call (thread-safe), then a load.
inline std::optional<sweep_order> sweep_order_override() {
  static const std::optional<sweep_order> order =
      environment_choice("MOE_ROUTING_SWEEP_ORDER", "groups or blocks", parse_sweep_order);
  return order;
}

}  // namespace detail

/// The order `kernel`'s sweeps take here: `MOE_ROUTING_SWEEP_ORDER` when set, else the kernel's
/// default on this CPU.
template <class Kernel>
sweep_order sweep_order_of(Kernel kernel) {
  if (const std::optional<sweep_order> chosen = detail::sweep_order_override()) return *chosen;
  return default_sweep_order(kernel, runs_on_zen4());
}

}  // namespace moe_routing::cpu

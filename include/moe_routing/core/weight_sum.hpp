#pragma once
/// \file
/// Sums that only scale weights (SPEC preamble): the softmax denominator and a token's
/// candidate total. Every backend accumulates their float terms in double precision and
/// rounds to float once, so the order it sums in (serially in expert order on the CPU, per
/// lane then a warp tree on CUDA) cannot move a weight by more than the contract allows:
/// any two orders of E <= 1024 terms give doubles within (E - 1) * 2^-53 relative of the
/// exact sum, and those round to the same float or to two adjacent ones (one float rounding
/// step, 2^-23 relative at most). A float accumulator instead drifts with the order by about
/// sqrt(E) rounding steps (1.7e-6 relative at E = 1024, seen in issue #22).

#include "moe_routing/core/config.hpp"

namespace moe_routing {

/// A running sum of float terms, exact to double precision; `add` terms and `merge` partial
/// sums in any order, then read `rounded()` once. Trivially copyable, so it can cross a
/// warp shuffle as its `value`.
struct weight_sum {
  double value = 0;

  MOE_ROUTING_HOST_DEVICE constexpr void add(float term) noexcept { value += static_cast<double>(term); }
  MOE_ROUTING_HOST_DEVICE constexpr void merge(const weight_sum& other) noexcept { value += other.value; }
  /// The sum as the float every backend reads: rounded to nearest once.
  [[nodiscard]] MOE_ROUTING_HOST_DEVICE constexpr float rounded() const noexcept { return static_cast<float>(value); }
};

}  // namespace moe_routing

#pragma once
/// \file
/// The status every low-level entry point returns instead of throwing. It carries
/// static strings and numbers only, so it is trivially copyable, allocation-free and
/// usable from device code; `error.hpp` turns it into a message or an exception.

#include <cstdint>
#include <type_traits>

#include "moe_routing/core/config.hpp"

namespace moe_routing {

enum class errc : std::uint8_t {
  ok = 0,
  invalid_parameter,    ///< a policy parameter is out of range or inconsistent
  shape_mismatch,       ///< batch, plan or workspace shapes disagree
  null_pointer,         ///< a required pointer is null
  workspace_too_small,  ///< the workspace was sized for a smaller problem
  invalid_input,        ///< optional inputs (segments, placement) hold bad values
  syntax_error,         ///< a policy text could not be parsed
  device_error,         ///< a GPU runtime call failed (the parameter names the call)
};

/// Outcome of a call. On failure it names the offending parameter and its value, and
/// what it had to satisfy, e.g. `prune.k0 = 9: must be at most refine.k = 8`. An entry of an
/// array is named with index letters, `plan.ids[i][j]`, and `at(i, j)` records which entry:
/// the message then reads `plan.ids[3][1] = -1`.
struct [[nodiscard]] status {
  errc code = errc::ok;
  const char* parameter = nullptr;    ///< e.g. "prune.k0", "batch.n", "plan.ids[i][j]"
  double value = 0;                   ///< the offending value
  const char* requirement = nullptr;  ///< e.g. "must be at most"
  const char* bound_name = nullptr;   ///< what the value was compared with, if anything
  double bound = 0;                   ///< that bound's value
  /// The values of the index letters, in the order the letters first appear in `parameter`
  /// and then `bound_name` (-1: not recorded; the letter stays in the message).
  std::int32_t index[2] = {-1, -1};

  MOE_ROUTING_HOST_DEVICE constexpr bool ok() const noexcept { return code == errc::ok; }

  /// This status with the entry it is about: the values of its first one or two index letters.
  MOE_ROUTING_HOST_DEVICE constexpr status at(std::int32_t first, std::int32_t second = -1) const noexcept {
    status located = *this;
    located.index[0] = first;
    located.index[1] = second;
    return located;
  }
};

static_assert(std::is_trivially_copyable_v<status>);

/// A failed status about `parameter = value`.
MOE_ROUTING_HOST_DEVICE constexpr status fail(errc code, const char* parameter, double value, const char* requirement,
                                              const char* bound_name = nullptr, double bound = 0) noexcept {
  return status{code, parameter, value, requirement, bound_name, bound};
}

/// `fail(code, ...)` when `value` lies outside [lo, hi], else ok. `requirement` spells
/// the range ("must be in [0, max_tokens]") and `limit` names `hi` for the message.
MOE_ROUTING_HOST_DEVICE constexpr status check_range(errc code, const char* parameter, int value, int lo, int hi,
                                                     const char* requirement, const char* limit) noexcept {
  return value < lo || value > hi ? fail(code, parameter, value, requirement, limit, hi) : status{};
}

}  // namespace moe_routing

/// Return from the enclosing function when a status-returning expression fails.
#define MOE_ROUTING_TRY(expression)                                                                \
  do {                                                                                             \
    if (const ::moe_routing::status moe_routing_status_ = (expression); !moe_routing_status_.ok()) \
      return moe_routing_status_;                                                                  \
  } while (false)

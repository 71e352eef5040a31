#pragma once
/// \file
/// A stage's parameters as data. Each built-in stage lists them in
/// `static constexpr auto parameters()`: the name written in policy text (and a synonym),
/// the member it sets, whether it is required, the range it must lie in with the sentence
/// that says so, and whether it counts experts per token. The parser, the range checks and
/// the plan width all read this one list, so a parameter is described in one place.

#include <array>
#include <concepts>
#include <cstdint>
#include <limits>

#include "moe_routing/core/config.hpp"
#include "moe_routing/core/status.hpp"
#include "moe_routing/policies/stage_concepts.hpp"

namespace moe_routing {

/// The values a parameter accepts and the sentence that states them in error messages.
struct value_range {
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool low_open = false;  ///< low itself is refused
  const char* rule = nullptr;

  constexpr bool holds(double value) const noexcept {
    return (low_open ? value > low : value >= low) && value <= high;  // NaN holds nothing
  }
};

inline constexpr value_range any_value{};
inline constexpr value_range non_negative{0, std::numeric_limits<double>::infinity(), false, "must not be negative"};
inline constexpr value_range at_least_one{1, std::numeric_limits<double>::infinity(), false, "must be at least 1"};
inline constexpr value_range unit_interval{0, 1, false, "must be in [0, 1]"};
inline constexpr value_range share_of_one{0, 1, true, "must be in (0, 1]"};
inline constexpr value_range finite_positive{0, largest_float, true, "must be finite and positive"};

/// What kind of value a parameter holds, and so how policy text spells it.
enum class parameter_kind : std::uint8_t {
  integer,    ///< a whole number
  real,       ///< a number
  gate,       ///< `sparse` or `dense` (column_mass)
  weighting,  ///< `renormalize` or `raw`
};

/// One parameter of `Stage`: exactly one of the member pointers is set, by `kind`.
template <class Stage>
struct stage_parameter {
  const char* name = nullptr;       ///< as written in policy text
  const char* synonym = nullptr;    ///< a second spelling (the papers' symbol), or null
  const char* qualified = nullptr;  ///< "stage.parameter", as error messages name it
  parameter_kind kind = parameter_kind::integer;
  int Stage::*integer = nullptr;
  float Stage::*real = nullptr;
  column_mass Stage::*gate = nullptr;
  weighting Stage::*weights = nullptr;
  bool required = false;
  /// The member holds a "not given" value (INT_MIN, NaN) when another parameter is
  /// chosen instead: the range is checked only for a given value.
  bool optional = false;
  value_range range = any_value;
  bool counts_experts_per_token = false;  ///< bounded by the model's top-k; widens the plan

  constexpr double value_of(const Stage& stage) const noexcept {
    return kind == parameter_kind::integer ? static_cast<double>(stage.*integer) : static_cast<double>(stage.*real);
  }
  constexpr bool given(const Stage& stage) const noexcept {
    if (!optional) return true;
    return kind == parameter_kind::integer ? stage.*integer != std::numeric_limits<int>::min()
                                           : stage.*real == stage.*real;
  }
};

template <class Stage>
concept describes_parameters = requires {
  Stage::parameters();
};

/// A stage's parameter table in static storage. `Stage::parameters()` returns the array by
/// value, so a loop over the call copies it onto the stack on every check (several hundred
/// bytes per stage per routing call: a `rep movsq` each in a build for the x86-64 baseline).
template <describes_parameters Stage>
inline constexpr auto parameter_table = Stage::parameters();

/// Every numeric parameter of a stage against its range, in the order they are listed.
template <class Stage>
constexpr status check_parameter_ranges(const Stage& stage) noexcept {
  if constexpr (describes_parameters<Stage>) {
    for (const auto& parameter : parameter_table<Stage>) {
      const bool numeric = parameter.kind == parameter_kind::integer || parameter.kind == parameter_kind::real;
      if (!numeric || parameter.range.rule == nullptr || !parameter.given(stage)) continue;
      const double value = parameter.value_of(stage);
      if (!parameter.range.holds(value)) {
        return fail(errc::invalid_parameter, parameter.qualified, value, parameter.range.rule);
      }
    }
  }
  return {};
}

/// Every parameter that counts experts per token against the model's top-k.
template <class Stage>
constexpr status check_against_top_k(const Stage& stage, const binding_shape& shape) noexcept {
  if constexpr (describes_parameters<Stage>) {
    for (const auto& parameter : parameter_table<Stage>) {
      if (!parameter.counts_experts_per_token) continue;
      MOE_ROUTING_TRY(check_at_most_top_k(parameter.qualified, stage.*parameter.integer, shape));
    }
  }
  return {};
}

/// The largest count of experts per token among the stage's parameters (0 when none).
template <class Stage>
constexpr int widest_parameter(const Stage& stage) noexcept {
  int widest = 0;
  if constexpr (describes_parameters<Stage>) {
    for (const auto& parameter : parameter_table<Stage>) {
      if (parameter.counts_experts_per_token && stage.*parameter.integer > widest) widest = stage.*parameter.integer;
    }
  }
  return widest;
}

/// A stage's parameter ranges, then its own check of how they fit together (`validate()`,
/// when it declares one).
template <class Stage>
constexpr status validate_stage(const Stage& stage) noexcept {
  MOE_ROUTING_TRY(check_parameter_ranges(stage));
  if constexpr (requires {
                  { stage.validate() } -> std::same_as<status>;
                }) {
    return stage.validate();
  } else {
    return {};
  }
}

/// A stage's checks against the shape it is bound to: its per-token counts against the
/// model's top-k, then its own `bind(shape)` when it declares one.
template <class Stage>
constexpr status bind_stage(const Stage& stage, const binding_shape& shape) noexcept {
  MOE_ROUTING_TRY(check_against_top_k(stage, shape));
  if constexpr (requires {
                  { stage.bind(shape) } -> std::same_as<status>;
                }) {
    return stage.bind(shape);
  } else {
    return {};
  }
}

}  // namespace moe_routing

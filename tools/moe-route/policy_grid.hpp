#pragma once
// Expands a policy grid such as "oea(k0=1..8,k=8)" or "skip(beta=0.1..0.5:0.1,k=8)"
// into one policy text per combination of the ranged values.

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <range/v3/range/conversion.hpp>
#include <range/v3/view/cartesian_product.hpp>
#include <range/v3/view/transform.hpp>

#include "command_line.hpp"

namespace moe_route {

/// The most policies one grid may stand for, and the most values of one range.
inline constexpr std::size_t max_grid_policies = 10000;

/// The values of one `a..b` or `a..b:step` range (step 1 by default).
inline std::vector<std::string> range_values(const std::string& range, const std::string& grid) {
  const auto dots = range.find("..");
  const auto colon = range.find(':', dots);
  const std::string where = "range '" + range + "' in grid '" + grid + "' (A..B or A..B:STEP)";
  const double lo = parse_finite(range.substr(0, dots), where);
  const auto hi_length = colon == std::string::npos ? std::string::npos : colon - dots - 2;
  const double hi = parse_finite(range.substr(dots + 2, hi_length), where);
  const double step = colon == std::string::npos ? 1.0 : parse_finite(range.substr(colon + 1), where);
  if (!(step > 0) || hi < lo || (hi - lo) / step >= max_grid_policies) {
    throw usage_error("bad range '" + range + "' in grid '" + grid + "' (need A <= B, STEP > 0, at most 10000 values)");
  }
  std::vector<std::string> values;
  const long count = static_cast<long>(std::floor((hi - lo) / step + 1e-9)) + 1;
  for (long i = 0; i < count; ++i) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", lo + static_cast<double>(i) * step);
    values.push_back(text);
  }
  return values;
}

/// A grid cut at its ranges: for each range, its choices as text that carries the literal
/// text before the range ("oea(k0=1", "oea(k0=2", ...; then ",k=1", ",k=2", ...), and the
/// literal text after the last range.
struct grid_parts {
  std::vector<std::vector<std::string>> choices;
  std::string tail;
  /// For each range, its parameter and values as a short label ("k0=1", "k0=2", ...).
  std::vector<std::vector<std::string>> labels;
};

/// Cuts `grid` at its ranges and checks them, including how many policies they multiply
/// to, before anything is expanded.
inline grid_parts cut_grid(const std::string& grid) {
  grid_parts parts;
  std::size_t policies = 1;
  std::size_t at = 0;
  for (auto dots = grid.find(".."); dots != std::string::npos; dots = grid.find("..", at)) {
    std::size_t begin = grid.find_last_of("=", dots);
    if (begin == std::string::npos || begin < at) throw usage_error("range without 'name=' in grid '" + grid + "'");
    ++begin;
    std::size_t end = grid.find_first_of(",)| ", dots);
    if (end == std::string::npos) end = grid.size();
    const std::vector<std::string> values = range_values(grid.substr(begin, end - begin), grid);
    // Checked before expanding: two ranges of 10000 values would otherwise build 10^8 texts.
    policies *= values.size();
    if (policies > max_grid_policies) {
      throw usage_error("grid '" + grid + "' expands to more than " + std::to_string(max_grid_policies) + " policies");
    }
    const std::size_t name_end = begin - 1;  // the '='
    const std::size_t name_start = grid.find_last_of("(,| ", name_end);
    const std::string name = grid.substr(name_start == std::string::npos ? 0 : name_start + 1,
                                         name_end - (name_start == std::string::npos ? 0 : name_start + 1));
    parts.labels.push_back(values | ranges::views::transform([&](const std::string& v) { return name + "=" + v; }) |
                           ranges::to<std::vector>());
    const std::string before = grid.substr(at, begin - at);
    parts.choices.push_back(values | ranges::views::transform([&](const std::string& v) { return before + v; }) |
                            ranges::to<std::vector>());
    at = end;
  }
  parts.tail = grid.substr(at);
  return parts;
}

namespace detail {

/// Every combination of one choice per list, in order (the last list varies fastest),
/// each joined with `separator` between choices.
inline std::vector<std::string> combinations(const std::vector<std::vector<std::string>>& lists,
                                             const std::string& separator) {
  std::vector<std::string> texts = {""};
  bool first = true;
  for (const std::vector<std::string>& choices : lists) {
    const auto joined = [&](const auto& prefix_and_choice) {
      const auto& [prefix, choice] = prefix_and_choice;
      return first ? prefix + choice : prefix + separator + choice;
    };
    texts =
        ranges::views::cartesian_product(texts, choices) | ranges::views::transform(joined) | ranges::to<std::vector>();
    first = false;
  }
  return texts;
}

}  // namespace detail

/// Every policy text the grid stands for, in order (the last range varies fastest).
inline std::vector<std::string> expand_grid(const std::string& grid) {
  const grid_parts parts = cut_grid(grid);
  std::vector<std::string> texts = detail::combinations(parts.choices, "");
  for (std::string& text : texts) text += parts.tail;
  return texts;
}

/// A short label for each policy of `expand_grid(grid)`, in the same order: the ranged
/// parameters and their values ("k0=3", "k0=1,m=8"), or the whole text for a grid
/// without ranges. The sweep plot writes them beside its points.
inline std::vector<std::string> grid_labels(const std::string& grid) {
  const grid_parts parts = cut_grid(grid);
  if (parts.labels.empty()) return {grid};
  return detail::combinations(parts.labels, ",");
}

}  // namespace moe_route

#pragma once
// Expands a policy grid such as "oea(k0=1..8,k=8)" or "skip(beta=0.1..0.5:0.1,k=8)"
// into one policy text per combination of the ranged values.

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

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
  const double hi = parse_finite(range.substr(dots + 2, colon == std::string::npos ? std::string::npos : colon - dots - 2), where);
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

/// Every policy text the grid stands for, in order (the last range varies fastest).
inline std::vector<std::string> expand_grid(const std::string& grid) {
  std::vector<std::string> results = {""};
  std::size_t at = 0;
  while (at < grid.size()) {
    const auto dots = grid.find("..", at);
    if (dots == std::string::npos) {
      for (auto& r : results) r += grid.substr(at);
      break;
    }
    std::size_t begin = grid.find_last_of("=", dots);
    if (begin == std::string::npos || begin < at) throw usage_error("range without 'name=' in grid '" + grid + "'");
    ++begin;
    std::size_t end = grid.find_first_of(",)| ", dots);
    if (end == std::string::npos) end = grid.size();
    const std::vector<std::string> values = range_values(grid.substr(begin, end - begin), grid);
    // Checked before expanding: two ranges of 10000 values would otherwise build 10^8 texts.
    if (results.size() * values.size() > max_grid_policies) {
      throw usage_error("grid '" + grid + "' expands to more than " + std::to_string(max_grid_policies) + " policies");
    }
    std::vector<std::string> next;
    for (const auto& prefix : results) {
      for (const auto& v : values) next.push_back(prefix + grid.substr(at, begin - at) + v);
    }
    results = std::move(next);
    at = end;
  }
  return results;
}

}  // namespace moe_route

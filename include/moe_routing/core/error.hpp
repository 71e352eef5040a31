#pragma once
/// \file
/// The throwing convenience layer over `status`: readable messages and one exception
/// type. Nothing on the routing hot path includes this.

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "moe_routing/core/status.hpp"

namespace moe_routing {

inline const char* to_string(errc code) noexcept {
  switch (code) {
    case errc::ok:
      return "ok";
    case errc::invalid_parameter:
      return "invalid parameter";
    case errc::shape_mismatch:
      return "shape mismatch";
    case errc::null_pointer:
      return "null pointer";
    case errc::workspace_too_small:
      return "workspace too small";
    case errc::invalid_input:
      return "invalid input";
    case errc::syntax_error:
      return "syntax error";
    case errc::device_error:
      return "device error";
  }
  return "unknown error";
}

namespace detail {
inline void write_number(std::ostream& out, double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    out << static_cast<long long>(value);
  } else {
    out << value;
  }
}

/// The entry an index placeholder names (`i`, or `r+1` with r recorded as 4: 5), or -1 when
/// the status does not record its letter. `letters` keeps which letter took which of the
/// status's indices, in the order they are met, so that the same letter in the parameter and
/// in the bound's name reads the same number.
inline long long index_of_placeholder(std::string_view placeholder, const status& s, char (&letters)[2]) {
  const bool lone_letter = placeholder.size() == 1;
  const bool with_offset = placeholder.size() == 3 && (placeholder[1] == '+' || placeholder[1] == '-') &&
                           placeholder[2] >= '0' && placeholder[2] <= '9';
  if (!(lone_letter || with_offset) || placeholder[0] < 'a' || placeholder[0] > 'z') return -1;
  for (int slot = 0; slot < 2; ++slot) {
    if (letters[slot] == 0) letters[slot] = placeholder[0];
    if (letters[slot] != placeholder[0]) continue;
    if (s.index[slot] < 0) return -1;
    const int offset = with_offset ? (placeholder[1] == '+' ? 1 : -1) * (placeholder[2] - '0') : 0;
    return static_cast<long long>(s.index[slot]) + offset;
  }
  return -1;
}

/// Writes an array's name with the recorded entry in place of its index letters:
/// `plan.ids[i][j]` as `plan.ids[3][1]`.
inline void write_name(std::ostream& out, std::string_view name, const status& s, char (&letters)[2]) {
  for (std::size_t at = 0; at < name.size();) {
    const std::size_t open = name.find('[', at);
    const std::size_t close = open == std::string_view::npos ? open : name.find(']', open);
    if (close == std::string_view::npos) {
      out << name.substr(at);
      return;
    }
    const std::string_view placeholder = name.substr(open + 1, close - open - 1);
    const long long entry = index_of_placeholder(placeholder, s, letters);
    out << name.substr(at, open + 1 - at);
    if (entry >= 0) {
      out << entry;
    } else {
      out << placeholder;
    }
    out << ']';
    at = close + 1;
  }
}
}  // namespace detail

/// "invalid parameter: prune.k0 = 9: must be at most refine.k = 8"; an array entry with its
/// indices, when the status records them: "invalid input: plan.ids[3][1] = -1: ..."
inline std::string to_string(const status& s) {
  if (s.ok()) return "ok";
  std::ostringstream out;
  out << to_string(s.code);
  char letters[2] = {0, 0};
  if (s.parameter != nullptr) {
    out << ": ";
    detail::write_name(out, s.parameter, s, letters);
    if (!std::isnan(s.value)) {  // NaN marks a status about a parameter, not a value
      out << " = ";
      detail::write_number(out, s.value);
    }
  }
  if (s.requirement != nullptr) out << ": " << s.requirement;
  if (s.bound_name != nullptr) {
    out << ' ';
    detail::write_name(out, s.bound_name, s, letters);
    out << " = ";
    detail::write_number(out, s.bound);
  }
  return out.str();
}

/// Thrown by the convenience layer; `code()` keeps the machine-readable reason.
class routing_error : public std::invalid_argument {
 public:
  explicit routing_error(const status& s) : std::invalid_argument(to_string(s)), status_(s) {}
  explicit routing_error(errc code, const std::string& message) : std::invalid_argument(message), status_{code} {}
  errc code() const noexcept { return status_.code; }
  const status& detail() const noexcept { return status_; }

 private:
  status status_;
};

inline void throw_if_failed(const status& s) {
  if (!s.ok()) throw routing_error(s);
}

}  // namespace moe_routing

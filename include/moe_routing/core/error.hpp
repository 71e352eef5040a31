#pragma once
/// \file
/// The throwing convenience layer over `status`: readable messages and one exception
/// type. Nothing on the routing hot path includes this.

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

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
}  // namespace detail

/// "invalid parameter: prune.k0 = 9: must be at most refine.k = 8"
inline std::string to_string(const status& s) {
  if (s.ok()) return "ok";
  std::ostringstream out;
  out << to_string(s.code);
  if (s.parameter != nullptr) {
    out << ": " << s.parameter;
    if (!std::isnan(s.value)) {  // NaN marks a status about a parameter, not a value
      out << " = ";
      detail::write_number(out, s.value);
    }
  }
  if (s.requirement != nullptr) out << ": " << s.requirement;
  if (s.bound_name != nullptr) {
    out << ' ' << s.bound_name << " = ";
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

#pragma once
/// \file
/// The flat JSON objects the trace metadata uses: string and number values only,
/// no nesting. Enough to read `trace.json` without a dependency; anything else is
/// refused with a message.

#include <cctype>
#include <map>
#include <stdexcept>
#include <string>

namespace moe_routing::io {

class json_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses `{"key": "text" | number | true | false, ...}` into key -> raw text. A key given
/// twice is refused (one of the two values would be ignored).
inline std::map<std::string, std::string> parse_flat_json(const std::string& text, const std::string& origin) {
  std::map<std::string, std::string> out;
  std::size_t at = 0;
  auto skip = [&] {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  };
  auto fail = [&](const std::string& what) {
    throw json_error(origin + ": " + what + " at offset " + std::to_string(at));
  };
  auto string_value = [&] {
    if (at >= text.size() || text[at] != '"') fail("expected '\"'");
    std::string value;
    for (++at; at < text.size() && text[at] != '"'; ++at) {
      if (text[at] == '\\' && at + 1 < text.size()) ++at;
      value += text[at];
    }
    if (at >= text.size()) fail("unterminated string");
    ++at;
    return value;
  };
  skip();
  if (at >= text.size() || text[at] != '{') fail("expected '{'");
  ++at;
  skip();
  if (at < text.size() && text[at] == '}') return out;
  while (true) {
    skip();
    const std::string key = string_value();
    skip();
    if (at >= text.size() || text[at] != ':') fail("expected ':'");
    ++at;
    skip();
    std::string value;
    if (at < text.size() && text[at] == '"') {
      value = string_value();
    } else {
      const std::size_t begin = at;
      while (at < text.size() && text[at] != ',' && text[at] != '}' &&
             !std::isspace(static_cast<unsigned char>(text[at])))
        ++at;
      value = text.substr(begin, at - begin);
      if (value.empty() || value[0] == '{' || value[0] == '[') fail("expected a string, number or boolean value");
    }
    if (!out.emplace(key, value).second) fail("key \"" + key + "\" given twice");
    skip();
    if (at < text.size() && text[at] == ',') {
      ++at;
      continue;
    }
    if (at < text.size() && text[at] == '}') return out;
    fail("expected ',' or '}'");
  }
}

}  // namespace moe_routing::io

#pragma once
/// \file
/// The executor's tuning switches in the environment (`MOE_ROUTING_STREAM_CACHE`,
/// `MOE_ROUTING_SWEEP_ORDER`, `MOE_ROUTING_RUN_AHEAD`), read in one way: unset or empty leaves
/// the CPU's default; a word the switch knows picks its setting; any other value stops the
/// program with a message naming the variable, the value and the words it takes, so a typo never
/// measures the default under another name.

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

namespace moe_routing::cpu::detail {

/// The setting whose word in `words` ({word, setting} pairs) is `text`, or nothing: how each
/// switch parses its value (case and all, exactly).
template <class Setting, std::size_t Count>
std::optional<Setting> setting_named(const char* text, const std::pair<const char*, Setting> (&words)[Count]) noexcept {
  for (const auto& [word, setting] : words) {
    if (std::strcmp(text, word) == 0) return setting;
  }
  return std::nullopt;
}

/// The setting `parse` (a `const char*` to a `std::optional`) makes of environment variable
/// `name`, or nothing when it is unset or empty. `words` lists the values it takes, for the message.
template <class Parse>
auto environment_choice(const char* name, const char* words, Parse&& parse) -> decltype(parse("")) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return {};
  if (auto chosen = parse(text)) return chosen;
  std::fprintf(stderr, "moe_routing: %s = \"%s\": must be %s\n", name, text, words);
  std::abort();
}

}  // namespace moe_routing::cpu::detail

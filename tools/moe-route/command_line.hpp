#pragma once
// Argument handling shared by the moe-route subcommands: `--name value` pairs, strict
// number parsing, and the two failure kinds with their exit statuses (2: bad arguments,
// 1: bad input).

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace moe_route {

/// Bad command-line arguments: exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Unreadable or inconsistent input files, or outputs that cannot be written: exit status 1.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The whole of `text` as an integer in [lo, hi], or a usage error naming `what` and the
/// text. No wrap-around, no trailing junk, no leading '+' or space, no fraction.
inline long long parse_integer(const std::string& text, const std::string& what, long long lo, long long hi) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end) {
    throw usage_error(what + " expects an integer, got '" + text + "'");
  }
  if (value < lo || value > hi) {
    throw usage_error(what + " = " + text + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return value;
}

/// The whole of `text` as a finite number, or a usage error naming `what` and the text.
inline double parse_finite(const std::string& text, const std::string& what) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end || !std::isfinite(value)) {
    throw usage_error(what + " expects a finite number, got '" + text + "'");
  }
  return value;
}

class arguments {
 public:
  /// Parses `--name value` pairs; `flags` lists the names that take no value, `repeatable`
  /// those that may be given more than once (any other given twice is refused: one of the
  /// two would be ignored). `--help` or `-h` where an option name is expected asks for
  /// help (then nothing else is checked); as the value of an option it is just that value.
  arguments(const std::vector<std::string>& words, const std::vector<std::string>& known,
            const std::vector<std::string>& flags = {}, const std::vector<std::string>& repeatable = {}) {
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::string& word = words[i];
      if (word == "--help" || word == "-h") {
        help_ = true;
        return;
      }
      if (word.rfind("--", 0) != 0) throw usage_error("unexpected argument '" + word + "'");
      const std::string name = word.substr(2);
      const bool is_flag = contains(flags, name);
      if (!is_flag && !contains(known, name)) throw usage_error("unknown option '" + word + "'");
      if (has(name) && !contains(repeatable, name)) throw usage_error("option '" + word + "' given twice");
      if (is_flag) {
        values_[name].push_back("1");
        continue;
      }
      if (i + 1 >= words.size()) throw usage_error("option '" + word + "' needs a value");
      values_[name].push_back(words[++i]);
    }
  }

  bool help() const noexcept { return help_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  /// The last value given for --name, or `fallback`.
  std::string get(const std::string& name, const std::string& fallback) const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second.back();
  }
  /// Every value given for a repeatable option, in order.
  std::vector<std::string> all(const std::string& name) const {
    const auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }
  std::string required(const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end()) throw usage_error("missing required option --" + name);
    return it->second.back();
  }
  /// --name as an integer in [lo, hi], or `fallback` when absent (which must be in range
  /// too: a default derived from the input may not fit it).
  long long integer(const std::string& name, long long fallback, long long lo, long long hi) const {
    if (has(name)) return parse_integer(get(name, ""), "--" + name, lo, hi);
    if (fallback < lo || fallback > hi) {
      throw usage_error("--" + name + " defaults to " + std::to_string(fallback) + " here, outside [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + "]; give --" + name);
    }
    return fallback;
  }
  /// --name as a finite number, or `fallback` when absent.
  double real(const std::string& name, double fallback) const {
    return has(name) ? parse_finite(get(name, ""), "--" + name) : fallback;
  }
  /// Refuses options that cannot be given together.
  void exclusive(const std::string& a, const std::string& b) const {
    if (has(a) && has(b)) throw usage_error("give --" + a + " or --" + b + ", not both");
  }

 private:
  static bool contains(const std::vector<std::string>& names, const std::string& name) {
    for (const auto& n : names) {
      if (n == name) return true;
    }
    return false;
  }

  std::map<std::string, std::vector<std::string>> values_;
  bool help_ = false;
};

/// Runs one invocation (`words` = argv[1..]) and returns its exit status: 0, 1 (bad
/// input) or 2 (bad arguments). Never throws: every failure is one line on stderr.
int run(const std::vector<std::string>& words) noexcept;

int route_command(const std::vector<std::string>& words);
int gen_command(const std::vector<std::string>& words);
int replay_command(const std::vector<std::string>& words);
int sweep_command(const std::vector<std::string>& words);
int batch_command(const std::vector<std::string>& words);

}  // namespace moe_route

#pragma once
// Argument handling shared by the moe-route subcommands: `--name value` pairs, and
// the two failure kinds with their exit statuses (2: bad arguments, 1: bad input).

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe_route {

/// Bad command-line arguments: exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Unreadable or inconsistent input files: exit status 1.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class arguments {
 public:
  /// Parses `--name value` pairs; `flags` lists the names that take no value.
  arguments(const std::vector<std::string>& words, const std::vector<std::string>& known,
            const std::vector<std::string>& flags = {}) {
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::string& word = words[i];
      if (word.rfind("--", 0) != 0) throw usage_error("unexpected argument '" + word + "'");
      const std::string name = word.substr(2);
      bool is_flag = false;
      for (const auto& f : flags) is_flag = is_flag || f == name;
      bool is_known = is_flag;
      for (const auto& k : known) is_known = is_known || k == name;
      if (!is_known) throw usage_error("unknown option '" + word + "'");
      if (is_flag) {
        values_[name].push_back(std::string(1, '1'));
        continue;
      }
      if (i + 1 >= words.size()) throw usage_error("option '" + word + "' needs a value");
      values_[name].push_back(words[++i]);
    }
  }

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
  long long integer(const std::string& name, long long fallback) const {
    return number<long long>(name, fallback, "an integer", [](const std::string& t, std::size_t* used) { return std::stoll(t, used); });
  }
  double real(const std::string& name, double fallback) const {
    return number<double>(name, fallback, "a number", [](const std::string& t, std::size_t* used) { return std::stod(t, used); });
  }

 private:
  /// The whole text of --name converted by `convert`, or a usage error naming it.
  template <class Number, class Convert>
  Number number(const std::string& name, Number fallback, const char* what, Convert convert) const {
    if (!has(name)) return fallback;
    const std::string text = get(name, "");
    std::size_t used = 0;
    Number value{};
    try {
      value = convert(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || text.empty()) throw usage_error("--" + name + " expects " + what + ", got '" + text + "'");
    return value;
  }

  std::map<std::string, std::vector<std::string>> values_;
};

inline bool has_help(const std::vector<std::string>& words) {
  for (const auto& word : words) {
    if (word == "--help" || word == "-h") return true;
  }
  return false;
}

int route_command(const std::vector<std::string>& words);
int gen_command(const std::vector<std::string>& words);
int replay_command(const std::vector<std::string>& words);
int sweep_command(const std::vector<std::string>& words);

}  // namespace moe_route

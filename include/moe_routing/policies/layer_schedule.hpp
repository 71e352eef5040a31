#pragma once
/// \file
/// Per-layer schedules: one runtime policy per layer, so any stage parameter can differ
/// between layers (the papers found that layers differ in how much a batch shares).
///
/// Text form: a policy whose parameters may be lists, one entry per layer, e.g.
/// `prune(k0=[4,4,3,2]) | refine(k=8)`; `v*n` repeats v for n layers, so a 48-layer
/// schedule reads `prune(k0=[4*8,3*24,2*16]) | refine(k=8)`. Every list of one text has the
/// same length L (the schedule's layers); a parameter without a list holds for every layer;
/// a text without any list is a schedule of one entry that applies to every layer. Layer l's
/// policy is the text with each list replaced by its entry l, parsed and checked by
/// `parse_policy`, so a bad entry is reported with its layer, its parameter and its value.
///
/// A model with more layers than the lists is an error (`check_layers`), never a silent
/// repeat: a 4-entry schedule given to a 48-layer model is a mistake. `for_layer(l)` is O(1)
/// and returns a trivially copyable `runtime_policy`: routing a layer allocates nothing.

#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "moe_routing/core/status.hpp"
#include "moe_routing/policies/parse_policy.hpp"
#include "moe_routing/policies/runtime_policy.hpp"

namespace moe_routing {

struct layer_schedule {
  static constexpr int max_layers = 128;  ///< DeepSeek-V3/R1 have 61 MoE layers, Qwen3-235B 94

  runtime_policy layers[max_layers] = {};
  int layer_count = 0;  ///< L; 1 when the text held no list (then every layer uses it)

  /// Layer l's policy. A one-entry schedule answers every layer; past L (which
  /// `check_layers` refuses beforehand) the last entry.
  constexpr const runtime_policy& for_layer(int layer) const noexcept {
    return layers[layer < layer_count ? (layer < 0 ? 0 : layer) : layer_count - 1];
  }
  /// Whether the schedule fits a model of `model_layers` layers: L equal to it, or 1.
  constexpr status check_layers(int model_layers) const noexcept {
    if (layer_count == 1 || layer_count == model_layers) return {};
    return fail(errc::invalid_parameter, "schedule layers", layer_count,
                "must equal the model's layers (or the text hold no list)", "layers", model_layers);
  }
};

static_assert(std::is_trivially_copyable_v<layer_schedule>);

struct schedule_parse_result {
  status outcome{};
  std::string message;  ///< empty when ok; else the reason, naming the layer, parameter and value
};

namespace detail {

/// One `[...]` of a schedule text: where it is, the parameter it gives, its entries.
struct schedule_list {
  std::size_t begin = 0, end = 0;  ///< [begin, end) covers the brackets
  std::string parameter;
  std::vector<std::string> entries;  ///< expanded, one per layer
};

inline std::string trim(std::string_view text) {
  std::size_t b = 0, e = text.size();
  while (b < e && (text[b] == ' ' || text[b] == '\t')) ++b;
  while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t')) --e;
  return std::string(text.substr(b, e - b));
}

/// The identifier before the `=` that precedes position `at` (the list's parameter).
inline std::string parameter_before(std::string_view text, std::size_t at) {
  std::size_t e = at;
  while (e > 0 && (text[e - 1] == ' ' || text[e - 1] == '=')) --e;
  std::size_t b = e;
  while (b > 0 && (std::isalnum(static_cast<unsigned char>(text[b - 1])) || text[b - 1] == '_')) --b;
  return std::string(text.substr(b, e - b));
}

/// Splits the lists out of `text`; false with `message` set on a malformed list.
inline bool find_schedule_lists(std::string_view text, std::vector<schedule_list>& lists, std::string& message) {
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (text[at] == ']') {
      message = "schedule: ']' at column " + std::to_string(at + 1) + " closes no list";
      return false;
    }
    if (text[at] != '[') continue;
    schedule_list list;
    list.begin = at;
    list.parameter = parameter_before(text, at);
    std::size_t before = at;  // a list is a parameter's value: `name=[` inside a stage's `(...)`
    while (before > 0 && (text[before - 1] == ' ' || text[before - 1] == '\t')) --before;
    int depth = 0;
    for (std::size_t c = 0; c < at; ++c) depth += text[c] == '(' ? 1 : (text[c] == ')' ? -1 : 0);
    if (before == 0 || text[before - 1] != '=' || list.parameter.empty() || depth != 1) {
      message = "schedule: the list at column " + std::to_string(at + 1) +
                " must be a parameter's value, `name=[...]` inside a stage's parentheses";
      return false;
    }
    const std::size_t close = text.find(']', at + 1);
    const std::size_t nested = text.find('[', at + 1);
    if (close == std::string_view::npos || (nested != std::string_view::npos && nested < close)) {
      message = "schedule: the list of " + list.parameter + " at column " + std::to_string(at + 1) +
                " needs its ']' (lists do not nest)";
      return false;
    }
    list.end = close + 1;
    std::string_view body = text.substr(at + 1, close - at - 1);
    const std::size_t stray = body.find_first_of("|()=");
    if (stray != std::string_view::npos) {
      message = "schedule: the list of " + list.parameter + " at column " + std::to_string(at + 1) + " holds '" +
                std::string(1, body[stray]) + "' at column " + std::to_string(at + 2 + stray) +
                ": entries are plain values";
      return false;
    }
    std::size_t after = list.end;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    if (after == text.size() || (text[after] != ',' && text[after] != ')')) {
      message = "schedule: the list of " + list.parameter + " at column " + std::to_string(at + 1) +
                " must be followed by ',' or ')'";
      return false;
    }
    while (true) {
      const std::size_t comma = body.find(',');
      const std::string entry = trim(body.substr(0, comma));
      const std::size_t star = entry.find('*');
      std::string value = trim(std::string_view(entry).substr(0, star));
      int repeat = 1;
      if (star != std::string::npos) {
        const std::string count = trim(std::string_view(entry).substr(star + 1));
        char* parsed_end = nullptr;
        const long n = std::strtol(count.c_str(), &parsed_end, 10);
        if (count.empty() || *parsed_end != '\0' || n < 1 || n > layer_schedule::max_layers) {
          message = "schedule: " + list.parameter + " entry '" + entry +
                    "': the repeat count after '*' must be a whole number in [1, " +
                    std::to_string(layer_schedule::max_layers) + "]";
          return false;
        }
        repeat = static_cast<int>(n);
      }
      if (value.empty()) {
        message = "schedule: " + list.parameter + " has an empty entry (entry " +
                  std::to_string(list.entries.size() + 1) + ")";
        return false;
      }
      for (int r = 0; r < repeat; ++r) list.entries.push_back(value);
      if (list.entries.size() > static_cast<std::size_t>(layer_schedule::max_layers)) {
        message = "schedule: " + list.parameter + " has more than " + std::to_string(layer_schedule::max_layers) +
                  " entries (layer_schedule::max_layers)";
        return false;
      }
      if (comma == std::string_view::npos) break;
      body = body.substr(comma + 1);
    }
    lists.push_back(std::move(list));
    at = close;
  }
  return true;
}

}  // namespace detail

/// Layer l's policy text: `text` with each list replaced by its entry l.
inline std::string schedule_layer_text(std::string_view text, const std::vector<detail::schedule_list>& lists,
                                       int layer) {
  std::string out;
  std::size_t from = 0;
  for (const auto& list : lists) {
    out.append(text.substr(from, list.begin - from));
    out += list.entries[static_cast<std::size_t>(layer)];
    from = list.end;
  }
  out.append(text.substr(from));
  return out;
}

/// Parses a schedule text into `schedule`. Never throws for bad text; allocates (a tool-time
/// call, never per routing call).
inline schedule_parse_result parse_layer_schedule(std::string_view text, layer_schedule& schedule) {
  schedule_parse_result result;
  schedule.layer_count = 0;
  std::vector<detail::schedule_list> lists;
  if (!detail::find_schedule_lists(text, lists, result.message)) {
    result.outcome = fail(errc::syntax_error, "schedule", 0, "malformed list");
    return result;
  }
  int layers = 1;
  for (std::size_t i = 0; i < lists.size(); ++i) {
    const int length = static_cast<int>(lists[i].entries.size());
    if (i == 0) layers = length;
    if (length != layers) {
      result.outcome = fail(errc::invalid_parameter, "schedule list length", length, "must be the same for every list",
                            "first list's length", layers);
      result.message = "schedule: " + lists[i].parameter + " has " + std::to_string(length) + " entries but " +
                       lists[0].parameter + " has " + std::to_string(layers) + ": every list gives one value per layer";
      return result;
    }
  }
  for (int layer = 0; layer < layers; ++layer) {
    const std::string layer_text = schedule_layer_text(text, lists, layer);
    const parse_result parsed = parse_policy(layer_text);
    if (!parsed.outcome.ok()) {
      result.outcome = parsed.outcome;
      std::string values;
      for (const auto& list : lists) {
        values += (values.empty() ? "" : ", ") + list.parameter + "=" + list.entries[static_cast<std::size_t>(layer)];
      }
      result.message = "schedule layer " + std::to_string(layer) + " of " + std::to_string(layers) + " (" + values +
                       "): " + describe(parsed, layer_text);
      return result;
    }
    schedule.layers[layer] = parsed.policy;
  }
  schedule.layer_count = layers;
  return result;
}

/// Parses a schedule text; throws `routing_error` with the message on failure.
inline layer_schedule parse_layer_schedule_or_throw(std::string_view text) {
  layer_schedule schedule;
  const schedule_parse_result result = parse_layer_schedule(text, schedule);
  if (!result.outcome.ok()) throw routing_error(result.outcome.code, result.message);
  return schedule;
}

/// Whether a policy text holds a per-layer list (and so is a schedule, not one policy).
inline bool is_schedule_text(std::string_view text) { return text.find('[') != std::string_view::npos; }

}  // namespace moe_routing

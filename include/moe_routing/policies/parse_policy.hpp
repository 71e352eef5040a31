#pragma once
/// \file
/// Text form of a policy for tools and sweeps: stages joined by `|`, such as
/// `prune(k0=4) | refine(k=8)`, or one preset call such as `oea(k0=4,k=8)`.
/// `parse_policy` never throws; `parse_policy_or_throw` formats a syntax error with
/// the text and a caret under the column where something else was expected.

#include <charconv>
#include <cmath>
#include <sstream>
#include <string>
#include <string_view>

#include "moe_routing/core/error.hpp"
#include "moe_routing/policies/capacity.hpp"
#include "moe_routing/policies/policy_checks.hpp"
#include "moe_routing/policies/presets.hpp"
#include "moe_routing/policies/runtime_policy.hpp"
#include "moe_routing/policies/stage_parameters.hpp"

namespace moe_routing {

struct parse_result {
  runtime_policy policy{};
  status outcome{};  ///< syntax_error (value = 1-based column) or a validate_policy status
  int column = 0;    ///< where the problem is, for syntax errors
};

namespace detail {

/// One `name=value` argument as written.
struct policy_argument {
  std::string_view name;
  std::string_view text;
  double number = 0;
  bool is_number = false;
  int column = 0;
  bool used = false;
};

class policy_parser {
 public:
  explicit policy_parser(std::string_view text) : text_(text) {}

  parse_result run() {
    parse_result result;
    skip_space();
    const std::size_t first_call = position_;
    if (!read_call()) return error_result();
    skip_space();
    if (is_preset(name_)) {
      const std::size_t preset_end = position_;
      if (position_ < text_.size() && text_[position_] == '|') position_ = text_.size();  // capacity, below
      if (position_ != text_.size()) {
        expect("expected the end of the policy: a preset call is a whole policy", position_);
        return error_result();
      }
      if (!build_preset(result.policy)) return error_result();
      position_ = preset_end;
      if (position_ != text_.size() &&
          !read_capacity_step(result.policy,
                              "expected the end of the policy: a preset call is a whole policy (only "
                              "capacity(c=...) may follow it)")) {
        return error_result();
      }
    } else {
      position_ = first_call;
      if (!read_pipeline(result.policy)) return error_result();
    }
    result.outcome = validate_policy(result.policy);
    return result;
  }

 private:
  static constexpr int max_arguments = 12;

  static bool is_preset(std::string_view name) {
    for (std::string_view preset :
         {"topk", "vanilla", "oea", "pruned", "xshare", "xshare_spec", "xshare_ep", "lynx_lat", "lynx_acc", "skip"}) {
      if (name == preset) return true;
    }
    return false;
  }

  parse_result error_result() const {
    parse_result result;
    result.column = error_column_;
    result.outcome = fail(errc::syntax_error, missing_ != nullptr ? missing_ : "policy text column",
                          missing_ != nullptr ? bad_value_ : error_column_, expected_);
    return result;
  }

  bool expect(const char* what, std::size_t at) {
    if (expected_ == nullptr) {
      expected_ = what;
      error_column_ = static_cast<int>(at) + 1;
    }
    return false;
  }

  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\t' ||
                                        text_[position_] == '\n' || text_[position_] == '\r')) {
      ++position_;
    }
  }

  static bool identifier_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
  }

  std::string_view read_identifier() {
    const std::size_t begin = position_;
    while (position_ < text_.size() && identifier_char(text_[position_], position_ == begin)) {
      ++position_;
    }
    return text_.substr(begin, position_ - begin);
  }

  /// name '(' [arg {',' arg}] ')'
  bool read_call() {
    skip_space();
    name_column_ = position_;
    name_ = read_identifier();
    if (name_.empty()) return expect("expected a stage or preset name", position_);
    skip_space();
    if (position_ >= text_.size() || text_[position_] != '(') {
      return expect("expected '(' after the stage or preset name", position_);
    }
    ++position_;
    argument_count_ = 0;
    skip_space();
    if (position_ < text_.size() && text_[position_] == ')') {
      ++position_;
      return true;
    }
    while (true) {
      skip_space();
      if (argument_count_ == max_arguments) return expect("expected at most 12 arguments", position_);
      policy_argument& argument = arguments_[argument_count_++];
      argument = {};
      argument.column = static_cast<int>(position_);
      argument.name = read_identifier();
      if (argument.name.empty()) return expect("expected an argument name", position_);
      for (int i = 0; i + 1 < argument_count_; ++i) {
        if (arguments_[i].name == argument.name) {
          return expect("expected each argument once", static_cast<std::size_t>(argument.column));
        }
      }
      skip_space();
      if (position_ >= text_.size() || text_[position_] != '=') {
        return expect("expected '=' after the argument name", position_);
      }
      ++position_;
      skip_space();
      const std::size_t value_begin = position_;
      while (position_ < text_.size() && text_[position_] != ',' && text_[position_] != ')' &&
             text_[position_] != ' ' && text_[position_] != '|') {
        ++position_;
      }
      argument.text = text_.substr(value_begin, position_ - value_begin);
      if (argument.text.empty()) return expect("expected a value after '='", value_begin);
      const char* end = argument.text.data() + argument.text.size();
      const auto parsed = std::from_chars(argument.text.data(), end, argument.number);
      argument.is_number = parsed.ec == std::errc{} && parsed.ptr == end;
      skip_space();
      if (position_ < text_.size() && text_[position_] == ',') {
        ++position_;
        continue;
      }
      if (position_ < text_.size() && text_[position_] == ')') {
        ++position_;
        return true;
      }
      return expect("expected ',' or ')' after an argument", position_);
    }
  }

  bool read_pipeline(runtime_policy& policy) {
    while (true) {
      if (!read_call()) return false;
      if (name_ == "refine") {
        if (policy.set_stage_count == 0) {
          return expect("expected a set stage before refine (a policy needs one)", name_column_);
        }
        if (!build_refine(policy.assignment)) return false;
        skip_space();
        if (position_ < text_.size() && text_[position_] == '|') {  // capacity.hpp
          return read_capacity_step(policy,
                                    "expected the end of the policy: refine must be the last stage (only "
                                    "capacity(c=...) may follow it)");
        }
        if (position_ != text_.size()) {
          return expect("expected the end of the policy: refine must be the last stage", position_);
        }
        return true;
      }
      if (policy.set_stage_count == runtime_policy::max_set_stages) {
        return expect("expected at most 8 set stages", name_column_);
      }
      any_set_stage stage;
      if (!build_set_stage(stage)) return false;
      policy.set_stages[policy.set_stage_count++] = stage;
      skip_space();
      if (position_ >= text_.size()) {
        return expect("expected '| refine(...)': a policy ends with its assignment stage", position_);
      }
      if (text_[position_] != '|') return expect("expected '|' between stages", position_);
      ++position_;
    }
  }

  /// `| capacity(c=N)` after the assignment stage (a preset's or refine), the whole rest of
  /// the text: sugar for refine's `capacity` parameter (policies/capacity.hpp).
  bool read_capacity_step(runtime_policy& policy, const char* otherwise) {
    const std::size_t bar = position_;
    ++position_;
    if (!read_call()) return false;
    if (name_ != capacity::name) return expect(otherwise, bar);
    if (policy.assignment.caps_experts()) {
      return expect("expected one capacity: refine already has capacity=", name_column_);
    }
    capacity step;
    if (!read_stage(step)) return false;
    policy.assignment.capacity = step.c;  // its range is refine.capacity's, checked by validate_policy
    skip_space();
    if (position_ != text_.size()) {
      return expect("expected the end of the policy: capacity(c=...) is the last step", position_);
    }
    return true;
  }

  // ---- arguments ----
  policy_argument* find(std::string_view name) {
    for (int i = 0; i < argument_count_; ++i) {
      if (arguments_[i].name == name) return &arguments_[i];
    }
    return nullptr;
  }
  /// The argument `name`, marked used; null when absent (an error when required).
  policy_argument* take(std::string_view name, bool required, bool& ok) {
    policy_argument* argument = find(name);
    ok = true;
    if (argument == nullptr) {
      if (required) {
        missing_ = name.data();  // the names passed here are string literals
        ok = expect("expected this required argument, which is missing", name_column_);
      }
      return nullptr;
    }
    argument->used = true;
    return argument;
  }
  bool integer(std::string_view name, int& out, bool required = false) {
    bool ok = true;
    const policy_argument* argument = take(name, required, ok);
    if (argument == nullptr) return ok;
    if (!argument->is_number || argument->number != std::floor(argument->number)) {
      return expect("expected an integer value", static_cast<std::size_t>(argument->column));
    }
    if (std::fabs(argument->number) > 1e9) {  // a whole number, but too large for any parameter
      missing_ = name.data();                 // string literals
      bad_value_ = argument->number;
      return expect("expected an integer within [-1e9, 1e9]", static_cast<std::size_t>(argument->column));
    }
    out = static_cast<int>(argument->number);
    return true;
  }
  /// Refuses two spellings of one parameter given together (one would silently win).
  bool one_of(std::string_view name, std::string_view synonym) {
    const policy_argument* first = find(name);
    const policy_argument* second = find(synonym);
    if (first == nullptr || second == nullptr) return true;
    missing_ = synonym.data();  // string literals
    return expect("expected only one of two names for the same parameter",
                  static_cast<std::size_t>(std::max(first->column, second->column)));
  }
  bool real(std::string_view name, float& out, bool required = false) {
    bool ok = true;
    const policy_argument* argument = take(name, required, ok);
    if (argument == nullptr) return ok;
    if (!argument->is_number) return expect("expected a number", static_cast<std::size_t>(argument->column));
    out = static_cast<float>(argument->number);
    return true;
  }
  bool gate(column_mass& out) {
    policy_argument* argument = find("gate");
    if (argument == nullptr) return true;
    argument->used = true;
    if (argument->text == "sparse")
      out = column_mass::sparse;
    else if (argument->text == "dense")
      out = column_mass::dense;
    else
      return expect("expected gate=sparse or gate=dense", static_cast<std::size_t>(argument->column));
    return true;
  }
  bool weighting_choice(weighting& out) {
    if (policy_argument* argument = find("weights")) {
      argument->used = true;
      if (argument->text == "renormalize")
        out = weighting::renormalize;
      else if (argument->text == "raw")
        out = weighting::raw;
      else
        return expect("expected weights=renormalize or weights=raw", static_cast<std::size_t>(argument->column));
    }
    return true;
  }
  /// A preset's weighting arguments: `weights` and `scale`, as refine reads them.
  bool weights(refine& out) { return weighting_choice(out.weights) && real("scale", out.scale); }
  bool all_used() {
    for (int i = 0; i < argument_count_; ++i) {
      if (!arguments_[i].used) {
        return expect("expected an argument this stage or preset takes (see docs/policies.md)",
                      static_cast<std::size_t>(arguments_[i].column));
      }
    }
    return true;
  }

  // ---- stages: read from each stage's `parameters()` ----
  template <class Stage>
  bool read_parameter(Stage& stage, const stage_parameter<Stage>& parameter, std::string_view spelling, bool required) {
    switch (parameter.kind) {
      case parameter_kind::integer:
        return integer(spelling, stage.*parameter.integer, required);
      case parameter_kind::real:
        return real(spelling, stage.*parameter.real, required);
      case parameter_kind::gate:
        return gate(stage.*parameter.gate);
      case parameter_kind::weighting:
        return weighting_choice(stage.*parameter.weights);
    }
    return false;
  }

  /// Every argument of the call into `stage` as its `parameters()` describe them, in their
  /// order (a parameter's synonym right after its name), refusing any other argument.
  template <class Stage>
  bool read_stage(Stage& stage) {
    constexpr auto parameters = Stage::parameters();
    for (const auto& parameter : parameters) {
      if (parameter.synonym != nullptr && !one_of(parameter.name, parameter.synonym)) return false;
    }
    for (const auto& parameter : parameters) {
      const bool required = parameter.required && (parameter.synonym == nullptr || find(parameter.synonym) == nullptr);
      if (!read_parameter(stage, parameter, parameter.name, required)) return false;
      if (parameter.synonym != nullptr && !read_parameter(stage, parameter, parameter.synonym, false)) return false;
    }
    return all_used();
  }

  bool build_refine(refine& out) { return read_stage(out); }

  /// The built-in set stage named by the call, from `builtin_set_stages`.
  bool build_set_stage(any_set_stage& out) { return build_listed_stage(out, builtin_set_stages{}); }
  template <class... Stages>
  bool build_listed_stage(any_set_stage& out, stage_types<Stages...>) {
    bool built = false;
    const bool named = ((name_ == Stages::name ? (built = build_one<Stages>(out), true) : false) || ...);
    if (named) return built;
    return expect(
        "expected a stage name: topk_union, prune, greedy_mass, per_request, ep_fill, "
        "ep_level, vote_drop, confidence_keep, coverage_greedy, prune_to_budget, prune_to_latency or refine; or one "
        "preset call",
        name_column_);
  }
  template <class Stage>
  bool build_one(any_set_stage& out) {
    Stage stage;
    if (!read_stage(stage)) return false;
    out = any_set_stage(stage);
    return true;
  }

  bool build_preset(runtime_policy& policy) {
    presets::weight_options w;
    refine weights_holder;
    column_mass g = column_mass::sparse;
    int k = 0, k0 = 0;
    if (!(integer("k", k, true) && weights(weights_holder))) return false;
    // Only the XShare presets build a column mass; elsewhere gate= would be ignored, so it
    // is left unread and refused as an argument the preset does not take.
    const bool builds_mass = name_ == "xshare" || name_ == "xshare_spec" || name_ == "xshare_ep";
    if (builds_mass && !gate(g)) return false;
    w.weights = weights_holder.weights;
    w.scale = weights_holder.scale;
    if (name_ == "topk" || name_ == "vanilla") {
      policy = to_runtime_policy(presets::vanilla(k, w));
    } else if (name_ == "oea") {
      float top_p = 1.0f;
      int max_rank = max_experts;
      if (!(integer("k0", k0, true) && real("top_p", top_p) && integer("max_rank", max_rank))) return false;
      policy = to_runtime_policy(presets::oea_general(k0, top_p, k, max_rank, w));
    } else if (name_ == "pruned") {
      if (!integer("k0", k0, true)) return false;
      policy = to_runtime_policy(presets::pruned_only(k0, k, w));
    } else if (name_ == "xshare") {
      int m = 0;
      if (!(integer("k0", k0, true) && integer("m", m, true))) return false;
      policy = to_runtime_policy(presets::xshare_batch(k0, m, k, w, g));
    } else if (name_ == "xshare_spec") {
      int m = 0, m_r = 0;
      if (!(integer("k0", k0, true) && integer("m", m) && integer("m_r", m_r, true))) return false;
      policy = to_runtime_policy(presets::xshare_speculative(k0, m_r, m, k, w, g));
    } else if (name_ == "xshare_ep") {
      int m_g = 0;
      if (!(integer("k0", k0, true) && integer("m_g", m_g, true))) return false;
      policy = to_runtime_policy(presets::xshare_expert_parallel(k0, m_g, k, w, g));
    } else if (name_ == "lynx_lat") {
      int d = 0;
      if (!integer("d", d, true)) return false;
      policy = to_runtime_policy(presets::lynx_latency(d, k, w));
    } else if (name_ == "lynx_acc") {
      float conf = 0;
      int budget = 0;
      if (!(real("conf", conf, true) && integer("budget", budget, true))) return false;
      policy = to_runtime_policy(presets::lynx_accuracy(conf, budget, k, w));
    } else {  // skip
      float beta = 0;
      if (!real("beta", beta, true)) return false;
      policy = to_runtime_policy(presets::dynamic_skipping(beta, k, w));
    }
    return all_used();
  }

  std::string_view text_;
  std::size_t position_ = 0;
  std::string_view name_;
  std::size_t name_column_ = 0;
  policy_argument arguments_[max_arguments];
  int argument_count_ = 0;
  const char* expected_ = nullptr;
  const char* missing_ = nullptr;
  double bad_value_ = std::nan("");  ///< with missing_: the out-of-range value given
  int error_column_ = 0;
};

}  // namespace detail

/// Parses and validates a policy text. Never throws, never allocates.
inline parse_result parse_policy(std::string_view text) noexcept { return detail::policy_parser(text).run(); }

/// "syntax error at column 12: expected '|' between stages" with the text and a caret
/// on the next two lines; other failures as `to_string(status)`.
inline std::string describe(const parse_result& result, std::string_view text) {
  if (result.outcome.code != errc::syntax_error) return to_string(result.outcome);
  std::string named;  // the parameter, and its value when the error is about the value
  if (std::isnan(result.outcome.value)) {
    named = std::string(" (") + result.outcome.parameter + ")";
  } else if (std::string_view(result.outcome.parameter) != "policy text column") {
    std::ostringstream value;
    detail::write_number(value, result.outcome.value);
    named = std::string(" (") + result.outcome.parameter + " = " + value.str() + ")";
  }
  std::string message = "syntax error in policy at column " + std::to_string(result.column) + ": " +
                        result.outcome.requirement + named + "\n  " + std::string(text) + "\n  " +
                        std::string(static_cast<std::size_t>(result.column > 0 ? result.column - 1 : 0), ' ') + "^";
  return message;
}

/// Parses a policy text and throws `routing_error` with a readable message on failure.
inline runtime_policy parse_policy_or_throw(std::string_view text) {
  const parse_result result = parse_policy(text);
  if (!result.outcome.ok()) throw routing_error(result.outcome.code, describe(result, text));
  return result.policy;
}

}  // namespace moe_routing

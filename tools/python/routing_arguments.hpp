#pragma once
/// \file
/// Everything one Python routing call passes besides the policy: the arrays of a
/// `routing_batch` and its options as the words Python spells them ("sigmoid",
/// "prefill"), named after the C++ batch's members. `apply_options` turns the words
/// into the library's values, refusing an unknown word by parameter and value.

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <moe_routing/moe_routing.hpp>

#include "array_argument.hpp"

namespace moe_routing::python {

struct routing_arguments {
  array_argument scores;     ///< [n, E] float32, float16 or bfloat16; rows may be strided
  array_argument bias;       ///< [E] float32: s = p + bias
  array_argument mask;       ///< [n] bool or uint8: nonzero = valid token
  array_argument segments;   ///< [R + 1] int32 or int64 request offsets
  array_argument placement;  ///< [E] int32 or int64 device of each expert
  std::string_view scoring = "softmax";
  std::int64_t n_group = 0;  ///< groups = (n_group, topk_group); 0 = no group limit
  std::int64_t topk_group = 0;
  std::string_view group_score = "top2_sum";
  std::string_view phase = "decode";
  std::string_view padding = "sentinel";
  std::int64_t sentinel = -1;
  std::optional<double> scale;    ///< none: the policy's own
  std::string_view weights = "";  ///< "renormalize" | "raw" | "": the policy's own
  std::int64_t devices = 0;       ///< device count; 0: one more than the largest placement entry
};

namespace detail {

template <class Choice>
Choice choose(std::string_view parameter, std::string_view word,
              std::initializer_list<std::pair<std::string_view, Choice>> choices) {
  std::string allowed;
  for (const auto& [text, choice] : choices) {
    if (word == text) return choice;
    allowed += (allowed.empty() ? "" : ", ") + std::string(text);
  }
  throw argument_error(std::string(parameter) + " = '" + std::string(word) + "': must be one of " + allowed);
}

}  // namespace detail

/// The scalar options of `arguments` applied to a batch and a policy (before any array is read).
template <score_element Element>
void apply_options(const routing_arguments& arguments, routing_batch<Element>& batch, runtime_policy& policy) {
  batch.mode = detail::choose<scoring>("scoring", arguments.scoring,
                                       {{"softmax", scoring::softmax},
                                        {"sigmoid", scoring::sigmoid},
                                        {"sqrtsoftplus", scoring::sqrtsoftplus},
                                        {"probabilities", scoring::probabilities}});
  batch.step =
      detail::choose<phase>("phase", arguments.phase, {{"decode", phase::decode}, {"prefill", phase::prefill}});
  if (arguments.n_group != 0 || arguments.topk_group != 0) {
    for (const auto& [name, value] : {std::pair{"groups[0] (n_group)", arguments.n_group},
                                      std::pair{"groups[1] (topk_group)", arguments.topk_group}}) {
      if (value < 1 || value > max_experts) {
        throw argument_error(std::string(name) + " = " + std::to_string(value) + ": must be in [1, " +
                             std::to_string(max_experts) + "]");
      }
    }
    batch.groups = {static_cast<int>(arguments.n_group), static_cast<int>(arguments.topk_group),
                    detail::choose<group_score>("group_score", arguments.group_score,
                                                {{"top2_sum", group_score::top2_sum}, {"max", group_score::max}})};
  }
  if (arguments.scale.has_value()) {
    const double scale = *arguments.scale;  // NaN and infinities are refused, never read as "not given"
    if (!std::isfinite(scale) || !(scale > 0) || scale > std::numeric_limits<float>::max()) {
      throw argument_error("scale = " + std::to_string(scale) + ": must be a positive, finite float32");
    }
    policy.assignment.scale = static_cast<float>(scale);
  }
  if (!arguments.weights.empty()) {
    policy.assignment.weights = detail::choose<weighting>(
        "weights", arguments.weights, {{"renormalize", weighting::renormalize}, {"raw", weighting::raw}});
  }
}

/// The plan's padding from the `padding` and `sentinel` words.
inline padding padding_of(const routing_arguments& arguments) {
  padding pad;
  pad.kind = detail::choose<padding_kind>("padding", arguments.padding,
                                          {{"sentinel", padding_kind::sentinel}, {"repeat", padding_kind::repeat}});
  if (arguments.sentinel < std::numeric_limits<std::int32_t>::min() ||
      arguments.sentinel > std::numeric_limits<std::int32_t>::max()) {
    throw argument_error("sentinel = " + std::to_string(arguments.sentinel) + ": must fit in int32");
  }
  pad.sentinel_value = static_cast<std::int32_t>(arguments.sentinel);
  return pad;
}

}  // namespace moe_routing::python

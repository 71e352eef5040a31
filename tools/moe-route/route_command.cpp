// `moe-route route`: one batch from .npy files through a policy into .npy outputs.

#include <algorithm>
#include <cstdio>
#include <execution>
#include <string>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/moe_routing.hpp>

#include "command_line.hpp"
#include "trace_input.hpp"

namespace moe_route {
namespace {

namespace mr = moe_routing;

constexpr const char* route_help =
    "usage: moe-route route --scores S.npy --policy TEXT --ids I.npy --weights W.npy [options]\n"
    "       moe-route route --trace DIR [--layer L] [--step S] --policy TEXT --ids I.npy --weights W.npy\n"
    "\n"
    "Routes one batch of router output ([n, E] float32 or float16, or one layer and decode\n"
    "step of a trace with its segments, mask and placement) and writes int32 ids and\n"
    "float32 weights [n, k] as .npy files.\n"
    "\n"
    "  --policy TEXT        e.g. \"prune(k0=4) | refine(k=8)\" or \"oea(k0=4,k=8)\"\n"
    "  --scoring MODE       softmax (default) | sigmoid | sqrtsoftplus | probabilities\n"
    "  --bias B.npy         [E] float32 selection bias (sigmoid, sqrtsoftplus)\n"
    "  --groups G:T         group-limited routing: n_group:topk_group\n"
    "  --group-score KIND   top2_sum (default) | max\n"
    "  --mask M.npy         [n] bool or uint8, nonzero = valid token\n"
    "  --segments O.npy     [R+1] int32/int64 request offsets\n"
    "  --placement P.npy    [E] int32/int64 device of each expert\n"
    "  --phase PHASE        decode (default) | prefill\n"
    "  --padding KIND       sentinel (default) | repeat\n"
    "  --sentinel V         padding id for sentinel padding (default -1)\n"
    "  --scale X            routed scaling factor (overrides the policy's)\n"
    "  --top-k K            plan width (default: the policy's largest k)\n"
    "  --counts C.npy       also write the per-token counts [n] int32\n"
    "\n"
    "Exit status: 0 ok, 1 unreadable or inconsistent input, 2 bad arguments.\n";

mr::npy::array load(const std::string& path) {
  try {
    return mr::npy::read(path);
  } catch (const mr::npy::npy_error& error) {
    throw input_error(error.what());
  }
}

/// An int32 copy of a 1-D integer array (int32 or int64 as numpy.save writes them).
std::vector<std::int32_t> load_indices(const std::string& path, const char* what) {
  const mr::npy::array a = load(path);
  if (a.shape.size() != 1) throw input_error(path + ": " + what + " must be 1-D");
  std::vector<std::int32_t> out(a.size());
  if (a.type == mr::npy::dtype::int32) {
    std::copy_n(a.data<std::int32_t>(), a.size(), out.begin());
  } else if (a.type == mr::npy::dtype::int64) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const long long v = a.data<std::int64_t>()[i];
      if (v < INT32_MIN || v > INT32_MAX) throw input_error(path + ": value " + std::to_string(v) + " out of int32 range");
      out[i] = static_cast<std::int32_t>(v);
    }
  } else {
    throw input_error(path + ": " + what + " must be int32 or int64, not " + mr::npy::descr(a.type));
  }
  return out;
}

template <class Choice>
Choice choose(const arguments& args, const std::string& name, const std::string& fallback,
              std::initializer_list<std::pair<const char*, Choice>> choices) {
  const std::string value = args.get(name, fallback);
  std::string allowed;
  for (const auto& [text, choice] : choices) {
    if (value == text) return choice;
    allowed += allowed.empty() ? text : std::string(", ") + text;
  }
  throw usage_error("--" + name + " must be one of " + allowed + ", got '" + value + "'");
}

/// Routes `batch` after applying the optional flags, and writes the outputs. Flags that
/// are absent leave the batch as given (a trace supplies its own segments, mask, placement).
template <class Element>
int route_batch(const arguments& args, mr::routing_batch<Element> batch, mr::runtime_policy policy) {
  const int n = batch.tokens();
  const int experts = batch.experts();
  if (args.has("scoring")) {
    batch.mode = choose<mr::scoring>(args, "scoring", "softmax",
                                     {{"softmax", mr::scoring::softmax},
                                      {"sigmoid", mr::scoring::sigmoid},
                                      {"sqrtsoftplus", mr::scoring::sqrtsoftplus},
                                      {"probabilities", mr::scoring::probabilities}});
  }
  batch.step = choose<mr::phase>(args, "phase", "decode",
                                 {{"decode", mr::phase::decode}, {"prefill", mr::phase::prefill}});
  std::vector<float> bias;
  if (args.has("bias")) {
    const mr::npy::array b = load(args.get("bias", ""));
    if (b.type != mr::npy::dtype::float32 || b.shape.size() != 1 || b.size() != static_cast<std::size_t>(experts)) {
      throw input_error(args.get("bias", "") + ": bias must be float32 of shape [" + std::to_string(experts) + "]");
    }
    bias.assign(b.data<float>(), b.data<float>() + experts);
    batch.bias = bias.data();
  }
  if (args.has("groups")) {
    const std::string text = args.get("groups", "");
    const auto colon = text.find(':');
    int n_group = 0, topk_group = 0;
    if (colon == std::string::npos || std::sscanf(text.c_str(), "%d:%d", &n_group, &topk_group) != 2) {
      throw usage_error("--groups expects N_GROUP:TOPK_GROUP, got '" + text + "'");
    }
    batch.groups = {n_group, topk_group,
                    choose<mr::group_score>(args, "group-score", "top2_sum",
                                            {{"top2_sum", mr::group_score::top2_sum}, {"max", mr::group_score::max}})};
  }
  std::vector<std::uint8_t> mask;
  if (args.has("mask")) {
    const mr::npy::array m = load(args.get("mask", ""));
    if ((m.type != mr::npy::dtype::boolean && m.type != mr::npy::dtype::uint8) || m.shape.size() != 1 ||
        m.size() != static_cast<std::size_t>(n)) {
      throw input_error(args.get("mask", "") + ": mask must be bool or uint8 of shape [" + std::to_string(n) + "]");
    }
    mask.assign(m.data<std::uint8_t>(), m.data<std::uint8_t>() + n);
    batch.token_mask = mask.data();
  }
  std::vector<std::int32_t> segments, placement;
  if (args.has("segments")) {
    segments = load_indices(args.get("segments", ""), "segments");
    if (segments.empty()) throw input_error(args.get("segments", "") + ": segments need at least one offset");
    batch.segments = segments.data();
    batch.request_count = static_cast<int>(segments.size()) - 1;
  }
  if (args.has("placement")) {
    placement = load_indices(args.get("placement", ""), "placement");
    if (placement.size() != static_cast<std::size_t>(experts)) {
      throw input_error(args.get("placement", "") + ": placement must have shape [" + std::to_string(experts) + "]");
    }
    batch.placement = placement.data();
    batch.device_count = 1 + *std::max_element(placement.begin(), placement.end());
  }
  if (args.has("scale")) policy.assignment.scale = static_cast<float>(args.real("scale", 1.0));
  const int top_k = static_cast<int>(args.integer("top-k", mr::preferred_top_k(policy)));
  if (top_k < 1) throw usage_error("--top-k could not be inferred from the policy; pass --top-k");

  mr::padding pad;
  pad.kind = choose<mr::padding_kind>(args, "padding", "sentinel",
                                      {{"sentinel", mr::padding_kind::sentinel}, {"repeat", mr::padding_kind::repeat}});
  pad.sentinel_value = static_cast<std::int32_t>(args.integer("sentinel", -1));

  // Policy and argument errors are the caller's (2); shape and value errors of the
  // files are the input's (1).
  const mr::status bound = mr::bind_policy(policy, {experts, top_k, batch.placement != nullptr});
  if (!bound.ok()) throw usage_error(mr::to_string(bound));
  mr::routing_plan plan(n, top_k, experts, batch.device_count, pad);
  mr::cpu::workspace ws({n, experts, top_k});
  const mr::status routed = mr::cpu::route(policy, batch, plan.view(), ws, std::execution::par);
  if (!routed.ok()) throw input_error(mr::to_string(routed));

  const std::vector<std::size_t> shape = {static_cast<std::size_t>(n), static_cast<std::size_t>(top_k)};
  try {
    mr::npy::write(args.required("ids"), mr::npy::dtype::int32, shape, plan.ids().data());
    mr::npy::write(args.required("weights"), mr::npy::dtype::float32, shape, plan.weights().data());
    if (args.has("counts")) {
      mr::npy::write(args.get("counts", ""), mr::npy::dtype::int32, {static_cast<std::size_t>(n)}, plan.counts().data());
    }
  } catch (const mr::npy::npy_error& error) {
    throw input_error(error.what());
  }
  std::printf("routed %d tokens over %d experts: |active| = %d, |S| = %d\n", n, experts,
              plan.summary().active_count, plan.summary().selected_count);
  return 0;
}

}  // namespace

int route_command(const std::vector<std::string>& words) {
  if (has_help(words)) {
    std::fputs(route_help, stdout);
    return 0;
  }
  const arguments args(words, {"scores", "trace", "layer", "step", "policy", "scoring", "bias", "groups", "group-score", "mask",
                               "segments", "placement", "phase", "padding", "sentinel", "scale",
                               "top-k", "ids", "weights", "counts"});
  const std::string policy_text = args.required("policy");
  args.required("ids");
  args.required("weights");
  const mr::parse_result parsed = mr::parse_policy(policy_text);
  if (!parsed.outcome.ok()) {
    const std::string message = mr::describe(parsed, policy_text);
    throw usage_error(message.substr(0, message.find('\n')));
  }
  if (args.has("trace")) {
    if (args.has("scores")) throw usage_error("give --scores or --trace, not both");
    const mr::io::trace trace = load_trace_or_fail(args.get("trace", ""));
    const long long layer = args.integer("layer", 0), step = args.integer("step", 0);
    if (layer < 0 || layer >= trace.layers) throw usage_error("--layer must be in [0, " + std::to_string(trace.layers) + ")");
    if (step < 0 || step >= trace.step_count()) throw usage_error("--step must be in [0, " + std::to_string(trace.step_count()) + ")");
    std::vector<std::int32_t> segments;
    if (trace.half) return route_batch(args, trace.batch<mr::float16>(static_cast<int>(layer), static_cast<int>(step), segments), parsed.policy);
    return route_batch(args, trace.batch<float>(static_cast<int>(layer), static_cast<int>(step), segments), parsed.policy);
  }
  const mr::npy::array scores = load(args.required("scores"));
  if (scores.shape.size() != 2) {
    throw input_error(args.get("scores", "") + ": scores must be 2-D [n, E], got " +
                      std::to_string(scores.shape.size()) + " dimensions");
  }
  const int n = static_cast<int>(scores.shape[0]), experts = static_cast<int>(scores.shape[1]);
  if (scores.type == mr::npy::dtype::float32) {
    return route_batch(args, mr::routing_batch<float>{mr::make_score_view(scores.data<float>(), n, experts)}, parsed.policy);
  }
  if (scores.type == mr::npy::dtype::float16) {
    return route_batch(args, mr::routing_batch<mr::float16>{mr::make_score_view(scores.data<mr::float16>(), n, experts)}, parsed.policy);
  }
  throw input_error(args.get("scores", "") + ": scores must be float32 or float16, not " + mr::npy::descr(scores.type));
}

}  // namespace moe_route

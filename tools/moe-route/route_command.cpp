// `moe-route route`: one batch from .npy files through a policy into .npy outputs.

#include <algorithm>
#include <cstdio>
#include <execution>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/moe_routing.hpp>

#include "command_line.hpp"
#include "output_files.hpp"
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
    "float32 weights [n, k] as .npy files, all of them or none. With --trace, --scoring,\n"
    "--mask, --segments and --placement replace the trace's own.\n"
    "\n"
    "  --policy TEXT        e.g. \"prune(k0=4) | refine(k=8)\" or \"oea(k0=4,k=8)\"\n"
    "  --scoring MODE       softmax (default) | sigmoid | sqrtsoftplus | probabilities\n"
    "  --bias B.npy         [E] float32 selection bias: s = p + bias (softmax, sigmoid, sqrtsoftplus)\n"
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

/// An int32 copy of a 1-D integer array (int32 or int64 as numpy.save writes them), each
/// value in [lo, hi].
std::vector<std::int32_t> load_indices(const std::string& path, const char* what, long long lo, long long hi) {
  const mr::npy::array a = load(path);
  if (a.shape.size() != 1) throw input_error(path + ": " + what + " must be 1-D");
  if (a.type != mr::npy::dtype::int32 && a.type != mr::npy::dtype::int64) {
    throw input_error(path + ": " + what + " must be int32 or int64, not " + mr::npy::descr(a.type));
  }
  std::vector<std::int32_t> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const long long v = a.type == mr::npy::dtype::int32 ? a.data<std::int32_t>()[i] : a.data<std::int64_t>()[i];
    if (v < lo || v > hi) {
      throw input_error(path + ": " + what + "[" + std::to_string(i) + "] = " + std::to_string(v) + " must be in [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    out[i] = static_cast<std::int32_t>(v);
  }
  return out;
}

/// `--groups N_GROUP:TOPK_GROUP`, both whole integers.
std::pair<int, int> parse_groups(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw usage_error("--groups expects N_GROUP:TOPK_GROUP, got '" + text + "'");
  const auto n_group = parse_integer(text.substr(0, colon), "--groups N_GROUP", 1, mr::max_experts);
  const auto topk_group = parse_integer(text.substr(colon + 1), "--groups TOPK_GROUP", 1, mr::max_experts);
  return {static_cast<int>(n_group), static_cast<int>(topk_group)};
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

/// The optional inputs a command line adds to a batch, read and checked against it.
/// Flags that are absent leave the batch as given (a trace supplies its own segments,
/// mask and placement). The vectors own what the batch points at.
struct batch_inputs {
  std::vector<float> bias;
  std::vector<std::uint8_t> mask;
  std::vector<std::int32_t> segments, placement;

  template <class Element>
  void apply(const arguments& args, mr::routing_batch<Element>& batch) {
    const int n = batch.tokens();
    const int experts = batch.experts();
    if (args.has("scoring")) {
      batch.mode = choose<mr::scoring>(args, "scoring", "softmax",
                                       {{"softmax", mr::scoring::softmax},
                                        {"sigmoid", mr::scoring::sigmoid},
                                        {"sqrtsoftplus", mr::scoring::sqrtsoftplus},
                                        {"probabilities", mr::scoring::probabilities}});
    }
    batch.step =
        choose<mr::phase>(args, "phase", "decode", {{"decode", mr::phase::decode}, {"prefill", mr::phase::prefill}});
    if (args.has("bias")) {
      const mr::npy::array b = load(args.get("bias", ""));
      if (b.type != mr::npy::dtype::float32 || b.shape.size() != 1 || b.size() != static_cast<std::size_t>(experts)) {
        throw input_error(args.get("bias", "") + ": bias must be float32 of shape [" + std::to_string(experts) + "]");
      }
      bias.assign(b.data<float>(), b.data<float>() + experts);
      batch.bias = bias.data();
    }
    if (args.has("groups")) {
      const auto [n_group, topk_group] = parse_groups(args.get("groups", ""));
      const auto score = choose<mr::group_score>(
          args, "group-score", "top2_sum", {{"top2_sum", mr::group_score::top2_sum}, {"max", mr::group_score::max}});
      batch.groups = {n_group, topk_group, score};
    }
    if (args.has("mask")) {
      const mr::npy::array m = load(args.get("mask", ""));
      if ((m.type != mr::npy::dtype::boolean && m.type != mr::npy::dtype::uint8) || m.shape.size() != 1 ||
          m.size() != static_cast<std::size_t>(n)) {
        throw input_error(args.get("mask", "") + ": mask must be bool or uint8 of shape [" + std::to_string(n) + "]");
      }
      mask.assign(m.data<std::uint8_t>(), m.data<std::uint8_t>() + n);
      batch.token_mask = mask.data();
    }
    if (args.has("segments")) {
      segments = load_indices(args.get("segments", ""), "segments", 0, n);
      if (segments.empty()) throw input_error(args.get("segments", "") + ": segments need at least one offset");
      batch.segments = segments.data();
      batch.request_count = static_cast<int>(segments.size()) - 1;
    }
    if (args.has("placement")) {
      // Checked before the device count is taken from it: the plan is sized by that count.
      placement = load_indices(args.get("placement", ""), "placement", 0, mr::max_experts - 1);
      if (placement.size() != static_cast<std::size_t>(experts)) {
        throw input_error(args.get("placement", "") + ": placement must have shape [" + std::to_string(experts) + "]");
      }
      batch.placement = placement.data();
      batch.device_count = 1 + *std::max_element(placement.begin(), placement.end());
    }
  }
};

/// Routes `batch` with the command line's optional inputs and writes the outputs.
template <class Element>
int route_batch(const arguments& args, mr::routing_batch<Element> batch, mr::runtime_policy policy) {
  batch_inputs inputs;
  inputs.apply(args, batch);
  const int n = batch.tokens();
  const int experts = batch.experts();
  if (args.has("scale")) {
    const double scale = args.real("scale", 1.0);
    if (!(scale > 0) || scale > std::numeric_limits<float>::max()) {
      throw usage_error("--scale = " + args.get("scale", "") + ": must be a positive float32");
    }
    policy.assignment.scale = static_cast<float>(scale);
  }
  const int inferred = mr::preferred_top_k(policy);
  if (inferred < 1 && !args.has("top-k")) {
    throw usage_error("--top-k could not be inferred from the policy; pass --top-k");
  }
  const int top_k = static_cast<int>(args.integer("top-k", inferred, 1, mr::max_top_k));

  mr::padding pad;
  pad.kind = choose<mr::padding_kind>(args, "padding", "sentinel",
                                      {{"sentinel", mr::padding_kind::sentinel}, {"repeat", mr::padding_kind::repeat}});
  pad.sentinel_value = static_cast<std::int32_t>(
      args.integer("sentinel", -1, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()));

  // Policy and argument errors are the caller's (2); shape and value errors of the
  // files are the input's (1).
  const mr::status bound = mr::bind_policy(policy, {experts, top_k, batch.placement != nullptr});
  if (!bound.ok()) throw usage_error(mr::to_string(bound));
  // --groups is an argument: its errors are the caller's (2), like the policy's.
  for (const mr::status grouped :
       {mr::validate_groups(batch.groups, experts), mr::validate_group_candidates(batch.groups, experts, top_k)}) {
    if (!grouped.ok()) throw usage_error("--groups " + args.get("groups", "") + ": " + mr::to_string(grouped));
  }
  mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = top_k, .devices = batch.device_count, .pad = pad});
  mr::cpu::workspace ws({n, experts, top_k});
  const mr::status routed = mr::cpu::route(policy, batch, plan.view(), ws, std::execution::par);
  if (!routed.ok()) throw input_error(mr::to_string(routed));

  const std::vector<std::size_t> shape = {static_cast<std::size_t>(n), static_cast<std::size_t>(top_k)};
  output_files outputs;
  auto write_npy = [&](const std::string& path, mr::npy::dtype type, const std::vector<std::size_t>& dims,
                       const void* data) {
    const std::vector<unsigned char> bytes = mr::npy::serialize(type, dims, data);
    outputs.write(path, bytes.data(), bytes.size());
  };
  write_npy(args.required("ids"), mr::npy::dtype::int32, shape, plan.ids().data());
  write_npy(args.required("weights"), mr::npy::dtype::float32, shape, plan.weights().data());
  if (args.has("counts")) write_npy(args.get("counts", ""), mr::npy::dtype::int32, {shape[0]}, plan.counts().data());
  outputs.commit();
  std::printf("routed %d tokens over %d experts: |active| = %d, |S| = %d\n", n, experts, plan.summary().active_count,
              plan.summary().selected_count);
  return 0;
}

/// Every file the command reads or writes, so that no output lands on another file.
void refuse_shared_files(const arguments& args) {
  std::vector<std::pair<std::string, std::string>> named;
  for (const char* option : {"ids", "weights", "counts", "scores", "bias", "mask", "segments", "placement"}) {
    if (args.has(option)) named.emplace_back(option, args.get(option, ""));
  }
  refuse_shared_paths(named);
  if (args.has("trace")) {
    std::vector<std::pair<std::string, std::string>> outputs;
    for (const char* option : {"ids", "weights", "counts"}) {
      if (args.has(option)) outputs.emplace_back(option, args.get(option, ""));
    }
    refuse_outputs_inside({"trace", args.get("trace", "")}, outputs);
  }
}

/// Routes one layer and step of a trace directory.
int route_trace_step(const arguments& args, const mr::runtime_policy& policy) {
  const mr::io::trace trace = load_trace_or_fail(args.get("trace", ""));
  const int layer = static_cast<int>(args.integer("layer", 0, 0, trace.layers - 1));
  const int step = static_cast<int>(args.integer("step", 0, 0, trace.step_count() - 1));
  std::vector<std::int32_t> segments;
  if (trace.half) return route_batch(args, trace.batch<mr::float16>(layer, step, segments), policy);
  return route_batch(args, trace.batch<float>(layer, step, segments), policy);
}

/// Routes a [n, E] score matrix read from --scores.
int route_scores(const arguments& args, const mr::runtime_policy& policy) {
  const std::string path = args.required("scores");
  const mr::npy::array scores = load(path);
  if (scores.shape.size() != 2) {
    throw input_error(path + ": scores must be 2-D [n, E], got " + std::to_string(scores.shape.size()) + " dimensions");
  }
  // Checked before the extents become ints.
  if (scores.shape[0] > static_cast<std::size_t>(mr::max_tokens) || scores.shape[1] < 2 ||
      scores.shape[1] > static_cast<std::size_t>(mr::max_experts)) {
    throw input_error(path + ": scores of shape [" + std::to_string(scores.shape[0]) + ", " +
                      std::to_string(scores.shape[1]) + "]: n must be in [0, " + std::to_string(mr::max_tokens) +
                      "] and E in [2, " + std::to_string(mr::max_experts) + "]");
  }
  const int n = static_cast<int>(scores.shape[0]), experts = static_cast<int>(scores.shape[1]);
  if (scores.type == mr::npy::dtype::float32) {
    return route_batch(args, mr::routing_batch<float>{mr::make_score_view(scores.data<float>(), n, experts)}, policy);
  }
  if (scores.type == mr::npy::dtype::float16) {
    return route_batch(
        args, mr::routing_batch<mr::float16>{mr::make_score_view(scores.data<mr::float16>(), n, experts)}, policy);
  }
  throw input_error(path + ": scores must be float32 or float16, not " + mr::npy::descr(scores.type));
}

}  // namespace

int route_command(const std::vector<std::string>& words) {
  const arguments args(words, {"scores",   "trace",       "layer", "step",     "policy",    "scoring", "bias",
                               "groups",   "group-score", "mask",  "segments", "placement", "phase",   "padding",
                               "sentinel", "scale",       "top-k", "ids",      "weights",   "counts"});
  if (args.help()) {
    std::fputs(route_help, stdout);
    return 0;
  }
  const mr::runtime_policy policy = parse_or_usage(args.required("policy"));
  args.required("ids");
  args.required("weights");
  args.exclusive("scores", "trace");
  for (const char* trace_only : {"layer", "step"}) {
    if (args.has(trace_only) && !args.has("trace")) {
      throw usage_error(std::string("--") + trace_only + " needs --trace");
    }
  }
  if (args.has("group-score") && !args.has("groups")) throw usage_error("--group-score needs --groups");
  if (args.has("bias") && args.get("scoring", "") == "probabilities") {
    throw usage_error("--bias does not apply to --scoring probabilities (s = p)");
  }
  refuse_shared_files(args);
  for (const char* output : {"ids", "weights", "counts"}) {
    if (args.has(output)) check_destination(args.get(output, ""));
  }
  return args.has("trace") ? route_trace_step(args, policy) : route_scores(args, policy);
}

}  // namespace moe_route

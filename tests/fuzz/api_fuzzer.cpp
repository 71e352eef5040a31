// Differential fuzzing of the routing entry points over shapes: a batch, a plan shape that
// may disagree with it, a workspace that may be too small, a policy. A too-small workspace
// must be refused; an explicit workspace, the thread-local one and a router built for the
// batch must all refuse (with a message) or all produce the well-formed call's plan, and
// a plan that fits must be accepted. Hand-built plan views with exactly-sized expert and
// device buffers, and a router reused over batches of other sizes, check buffer lengths.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "fuzz_input.hpp"

namespace {

namespace mr = moe_routing;

std::string context;  // the decoded case, for failure messages

[[noreturn]] void failure(const std::string& what) {
  std::fprintf(stderr, "api_fuzzer: %s (%s)\n", what.c_str(), context.c_str());
  std::abort();
}

/// Owns one batch's arrays.
struct batch_input {
  int n = 0, experts = 2, devices = 0;
  mr::scoring mode = mr::scoring::softmax;
  mr::group_limit groups{};
  bool prefill = false;
  std::vector<float> scores, bias;
  std::vector<std::int32_t> placement;
  std::vector<std::uint8_t> mask;

  mr::routing_batch<float> view() const {
    return {.scores = mr::make_score_view(scores.data(), n, experts),
            .mode = mode,
            .bias = bias.empty() ? nullptr : bias.data(),
            .groups = groups,
            .token_mask = mask.empty() ? nullptr : mask.data(),
            .placement = placement.empty() ? nullptr : placement.data(),
            .device_count = placement.empty() ? 0 : devices,
            .step = prefill ? mr::phase::prefill : mr::phase::decode};
  }
};

struct plan_shape {
  int tokens = 0, top_k = 1, experts = 2, devices = 0;
  mr::padding pad{};
};

/// Refused (with the message) or routed (with the plan's rows).
struct outcome {
  bool ok = false;
  std::string message;
  std::vector<std::int32_t> ids, counts;
  std::vector<float> weights;
};

/// Scores come from a seeded pattern (values are the route fuzzer's concern), so short
/// inputs still reach every shape decision.
batch_input decode_batch(fuzz::byte_stream& in) {
  batch_input b;
  b.n = in.in(0, 40);
  b.experts = in.in(2, 80);
  b.mode = static_cast<mr::scoring>(in.u8() % 4);
  b.prefill = in.u8() % 8 == 0;
  const unsigned seed = in.u8(), stride = in.u8() | 1u;
  b.scores.resize(static_cast<std::size_t>(b.n) * b.experts);
  for (std::size_t i = 0; i < b.scores.size(); ++i) {
    const auto level = static_cast<float>((i * stride + seed) % 29);
    b.scores[i] = b.mode == mr::scoring::probabilities ? level / 29.0f : level / 7.0f - 2.0f;
  }
  if (in.flag()) {  // in every scoring mode, so the mode-bias rule is fuzzed too
    for (int e = 0; e < b.experts; ++e) b.bias.push_back(static_cast<float>((e * 13 + seed) % 9) / 16.0f - 0.25f);
  }
  if (in.u8() % 4 == 0) {
    const int groups = in.in(1, b.experts);
    b.groups.n_group = in.flag() ? groups : std::gcd(groups, b.experts);  // often not a divisor of E: refused
    b.groups.topk_group = in.in(0, b.groups.n_group + 1);
    b.groups.score = in.flag() ? mr::group_score::max : mr::group_score::top2_sum;
  }
  if (in.u8() % 4 == 0) {
    for (int i = 0; i < b.n; ++i) b.mask.push_back(static_cast<std::uint8_t>((i * stride + seed) % 3 != 0));
  }
  if (in.flag()) {
    b.devices = in.in(1, 6);
    for (int e = 0; e < b.experts; ++e)
      b.placement.push_back(static_cast<std::int32_t>((e * stride + seed) % b.devices));
    if (in.u8() % 16 == 0) b.placement[in.u16() % b.placement.size()] = b.devices;  // out of range: refused
  }
  return b;
}

/// Mostly the batch's shape; otherwise one that disagrees or is out of every range.
plan_shape decode_plan_shape(fuzz::byte_stream& in, const batch_input& b) {
  plan_shape p;
  const int odd_tokens[] = {0, -1, 16385, 100000}, odd_k[] = {0, -1, 33, b.experts + 1};
  const int odd_experts[] = {-1, 1, 1025}, odd_devices[] = {-1, 1025, 0};
  const int t = in.u8() % 8, k = in.u8() % 8, e = in.u8() % 8, d = in.u8() % 8;
  p.tokens = t < 5 ? b.n : t == 5 ? b.n + 1 : t == 6 ? b.n - 1 : odd_tokens[in.u8() % 4];
  p.top_k = k < 5 ? in.in(1, std::min(b.experts, 32)) : k == 5 ? odd_k[in.u8() % 4] : in.in(1, 32);
  p.experts = e < 5    ? b.experts
              : e == 5 ? b.experts - in.in(1, b.experts)
              : e == 6 ? b.experts + in.in(1, 8)
                       : odd_experts[in.u8() % 3];
  p.devices = d < 5    ? b.devices
              : d == 5 ? std::max(0, b.devices - 1)
              : d == 6 ? b.devices + 2
                       : odd_devices[in.u8() % 3];
  const int pad = in.u8() % 3;
  p.pad = {pad == 2 ? mr::padding_kind::repeat : mr::padding_kind::sentinel, pad == 1 ? b.experts : -1};
  return p;
}

int around(fuzz::byte_stream& in, int needed) {
  const int choice = in.u8() % 4;
  return choice < 2 ? needed : choice == 2 ? needed + in.in(1, 16) : needed - in.in(1, 4);
}

std::string policy_text(fuzz::byte_stream& in, int plan_k) {
  const int widest = std::clamp(plan_k, 1, mr::max_top_k);
  const int k = in.flag() ? widest : in.in(1, widest);  // a policy narrower than the plan is legal
  const std::string K = std::to_string(k), k0 = std::to_string(in.in(1, k));
  const std::string a = std::to_string(in.in(0, 8)), b = std::to_string(in.in(0, 4));
  switch (in.u8() % 9) {
    case 0:
      return "topk(k=" + K + ")";
    case 1:
      return "oea(k0=" + k0 + ",k=" + K + ")";
    case 2:
      return "xshare(k0=" + k0 + ",m=" + a + ",k=" + K + ")";
    case 3:
      return "xshare_ep(k0=" + k0 + ",m_g=" + b + ",k=" + K + ")";
    case 4:
      return "lynx_lat(d=" + a + ",k=" + K + ")";
    case 5:
      return "skip(beta=0." + a + ",k=" + K + ")";
    case 6:
      return "prune(k0=" + k0 + ") | refine(k=" + K + ")";
    case 7:
      return "per_request(k0=" + k0 + ",m_r=" + b + ") | ep_fill(m_g=" + a + ") | refine(k=" + K + ")";
    default:
      return "topk_union(k=" + k0 + ") | vote_drop(d=" + b + ") | refine(k=" + K + ")";
  }
}

template <class Route>
outcome guarded(const char* way, Route route) {
  outcome result;
  try {
    result = route();
  } catch (const mr::routing_error& error) {
    result = {false, error.what(), {}, {}, {}};
  } catch (const std::exception& error) {
    failure(std::string(way) + " threw something other than routing_error: " + error.what());
  } catch (...) {
    failure(std::string(way) + " threw a non-standard exception");
  }
  if (!result.ok && result.message.empty()) failure(std::string(way) + " refused without a message");
  return result;
}

/// The plan's rows when `s` is ok, else the refusal.
outcome taken(const mr::status& s, const mr::routing_plan& plan) {
  return s.ok() ? outcome{true, "", plan.ids(), plan.counts(), plan.weights()}
                : outcome{false, mr::to_string(s), {}, {}, {}};
}

void expect_same(const outcome& want, const outcome& got, const std::string& way) {
  if (want.ok != got.ok)
    failure(way + (got.ok ? " routed what a well-formed call refuses" : " refused: " + got.message));
  if (!got.ok) return;
  // Bit for bit: every way runs the same code on the same data.
  const bool same_weights =
      std::equal(want.weights.begin(), want.weights.end(), got.weights.begin(), got.weights.end(),
                 [](float x, float y) { return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y); });
  if (want.ids != got.ids || want.counts != got.counts || !same_weights)
    failure(way + ": plan differs from the well-formed call's");
}

/// The well-formed call: a plan and a workspace of exactly the batch's shape.
outcome reference(const mr::runtime_policy& policy, const batch_input& b, const plan_shape& p) {
  return guarded("reference", [&] {
    mr::routing_plan plan({.tokens = b.n, .experts = b.experts, .top_k = p.top_k, .devices = b.devices, .pad = p.pad});
    mr::cpu::workspace ws({b.n, b.experts, p.top_k});
    return taken(mr::cpu::route(policy, b.view(), plan.view(), ws), plan);
  });
}

/// Whether a workspace of `w` serves the call: in the library's ranges and as large as the call.
bool adequate(const mr::workspace_shape& w, const batch_input& b, const plan_shape& p) {
  return w.max_tokens <= mr::max_tokens && w.experts <= mr::max_experts && w.top_k <= mr::max_top_k &&
         w.max_tokens >= b.n && w.experts >= b.experts && w.top_k >= p.top_k && p.top_k >= 1;
}

/// Whether the plan's buffers hold the batch: then a call the reference accepts must be accepted.
bool fits(const plan_shape& p, const batch_input& b) {
  return p.tokens == b.n && p.experts >= b.experts && p.experts <= mr::max_experts && p.devices >= 0 &&
         p.devices <= mr::max_experts && (b.placement.empty() || p.devices == 0 || p.devices >= b.devices);
}

bool mentions(const std::string& message, const char* name) { return message.find(name) != std::string::npos; }

/// A plan_view whose expert and device buffers are exactly as long as it declares (and
/// non-null even when empty), so that a write past a declared length is a heap overflow
/// ASan reports.
void check_hand_built(fuzz::byte_stream& in, const mr::runtime_policy& policy, const batch_input& b,
                      const plan_shape& p, const outcome& want) {
  const auto rows = static_cast<std::size_t>(b.n), width = rows * static_cast<std::size_t>(p.top_k);
  std::vector<std::int32_t> ids(width), counts(rows), guaranteed(rows);
  std::vector<float> weights(width);
  const int e = in.u8() % 4, d = in.u8() % 4;  // 0: no buffer; 1: exact; 2: shorter; 3: longer
  const int experts = e == 1 ? b.experts : e == 2 ? b.experts - in.in(1, b.experts) : b.experts + in.in(1, 4);
  const int devices = d == 1 ? b.devices : d == 2 ? b.devices - in.in(0, b.devices) : b.devices + 2;
  std::unique_ptr<std::int32_t[]> expert_tokens(e == 0 ? nullptr : new std::int32_t[static_cast<std::size_t>(experts)]);
  std::unique_ptr<std::int32_t[]> device_loads(d == 0 ? nullptr : new std::int32_t[static_cast<std::size_t>(devices)]);
  mr::plan_summary summary;
  mr::plan_view view{ids.data(), weights.data(), counts.data(),       &summary,           b.n,
                     p.top_k,    p.pad,          expert_tokens.get(), device_loads.get(), guaranteed.data()};
  view.experts = experts;
  view.devices = devices;
  mr::cpu::workspace ws({b.n, b.experts, p.top_k});
  const outcome got = guarded("hand-built plan_view", [&] {
    const mr::status s = mr::cpu::route(policy, b.view(), view, ws);
    if (!s.ok()) return outcome{false, mr::to_string(s), {}, {}, {}};
    return outcome{true, "", ids, counts, weights};
  });
  const bool short_experts = e != 0 && experts < b.experts;
  const bool short_devices = d != 0 && !b.placement.empty() && devices < b.devices;
  if (!want.ok || !(short_experts || short_devices)) {
    expect_same(want, got, "hand-built plan_view");
    return;
  }
  if (got.ok) failure("a plan_view shorter than the batch was accepted");
  if (!(short_experts && mentions(got.message, "plan.experts")) &&
      !(short_devices && mentions(got.message, "plan.devices"))) {
    failure("a short plan_view was refused without naming the short buffer: " + got.message);
  }
}

using policy_router = mr::cpu::router<mr::runtime_policy>;

/// The router's own plan must be as wide as the batch: it is written up to E and G.
outcome router_owned(policy_router& router, const batch_input& b, const plan_shape& p) {
  return guarded("router-owned plan", [&] {
    const mr::routing_plan& plan = router.route(b.view(), p.pad);
    if (plan.expert_tokens().size() < static_cast<std::size_t>(b.experts) ||
        (!b.placement.empty() && plan.device_loads().size() < static_cast<std::size_t>(b.devices))) {
      failure("the router's own plan is narrower than the batch");
    }
    return taken({}, plan);
  });
}

/// The three ways of routing `b` into a plan of shape `p`; the router stays for later calls.
struct three_ways {
  outcome explicit_ws, thread_local_ws, routed;
  std::optional<policy_router> router;
};

void route_three_ways(three_ways& r, const mr::runtime_policy& policy, const batch_input& b, const plan_shape& p,
                      const mr::workspace_shape& w) {
  r.explicit_ws = guarded("explicit workspace", [&] {
    mr::routing_plan plan(
        {.tokens = p.tokens, .experts = p.experts, .top_k = p.top_k, .devices = p.devices, .pad = p.pad});
    mr::cpu::workspace ws(w);
    return taken(mr::cpu::route(policy, b.view(), plan.view(), ws), plan);
  });
  r.thread_local_ws = guarded("thread-local workspace", [&] {
    mr::routing_plan plan(
        {.tokens = p.tokens, .experts = p.experts, .top_k = p.top_k, .devices = p.devices, .pad = p.pad});
    return taken(mr::cpu::route(policy, b.view(), plan.view()), plan);
  });
  r.routed = guarded("router", [&] {
    r.router.emplace(policy, mr::workspace_shape{b.n, b.experts, p.top_k}, !b.placement.empty());
    mr::routing_plan plan(
        {.tokens = p.tokens, .experts = p.experts, .top_k = p.top_k, .devices = p.devices, .pad = p.pad});
    r.router->route(b.view(), plan.view());
    return taken({}, plan);
  });
}

/// All ways that were given what they need agree with each other and with the reference.
void check_agreement(const three_ways& r, const outcome& want, bool usable_workspace, bool plan_fits) {
  if (!usable_workspace && r.explicit_ws.ok) failure("a workspace smaller than the call was accepted");
  const outcome& first = usable_workspace ? r.explicit_ws : r.thread_local_ws;
  const std::pair<const char*, const outcome*> ways[] = {
      {"explicit workspace", &r.explicit_ws}, {"thread-local workspace", &r.thread_local_ws}, {"router", &r.routed}};
  for (const auto& [way, got] : ways) {
    if (got == &r.explicit_ws && !usable_workspace) continue;
    if (got->ok != first.ok)
      failure(std::string(way) + " disagrees with another way: " + (got->ok ? first.message : got->message));
    if (got->ok) expect_same(want, *got, way);
  }
  if (want.ok && plan_fits && !first.ok) failure("a plan that fits was refused: " + first.message);
}

/// The router built for the first batch, over batches of other sizes: it must re-bind or
/// refuse, never route a batch into buffers or a binding sized for another.
void check_router_reuse(fuzz::byte_stream& in, policy_router& router, const mr::runtime_policy& policy,
                        const batch_input& first, const plan_shape& p) {
  for (int extra = in.u8() % 4; extra > 0; --extra) {
    const batch_input next = decode_batch(in);
    const outcome again = router_owned(router, next, p), fresh = reference(policy, next, p);
    const bool within = next.n <= first.n && next.experts <= first.experts;  // the router's workspace serves it
    if (within || again.ok)
      expect_same(fresh, again, "router reused for n=" + std::to_string(next.n) + " E=" + std::to_string(next.experts));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_stream in(data, size);
  const batch_input b = decode_batch(in);
  const plan_shape p = decode_plan_shape(in, b);
  const mr::workspace_shape w{around(in, b.n), around(in, b.experts), around(in, p.top_k)};
  const std::string text = policy_text(in, p.top_k);
  const mr::parse_result parsed = mr::parse_policy(text);
  if (!parsed.outcome.ok()) return 0;  // the policy fuzzer covers refused texts
  char shapes[160];
  std::snprintf(shapes, sizeof shapes, "batch n=%d E=%d G=%d, plan %dx%d E=%d G=%d, workspace %d/%d/%d", b.n, b.experts,
                b.devices, p.tokens, p.top_k, p.experts, p.devices, w.max_tokens, w.experts, w.top_k);
  context = "policy '" + text + "', " + shapes;

  const outcome want = reference(parsed.policy, b, p);
  three_ways r;
  route_three_ways(r, parsed.policy, b, p, w);
  check_agreement(r, want, adequate(w, b, p), fits(p, b));
  if (p.top_k >= 1 && p.top_k <= mr::max_top_k) check_hand_built(in, parsed.policy, b, p, want);
  if (!r.router) return 0;
  expect_same(want, router_owned(*r.router, b, p), "router-owned plan");
  check_router_reuse(in, *r.router, parsed.policy, b, p);
  return 0;
}

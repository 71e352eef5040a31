// Fuzzes whole routing calls: bytes decode into a shape, optional inputs, a policy text
// (valid or not) and raw score bits (NaN, inf, subnormals, float16 and bfloat16 patterns).
// Every accepted call must match the naive router and hold SPEC section 6's invariants;
// every refused one must be refused with a status, never a crash.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "../test_support.hpp"
#include "fuzz_input.hpp"

namespace {

namespace mr = moe_routing;

[[noreturn]] void failure(const char* what, const std::string& policy) {
  std::fprintf(stderr, "route_fuzzer: %s (policy '%s')\n", what, policy.c_str());
  std::abort();
}

std::string policy_text(fuzz::byte_stream& in, int k, int experts) {
  // Numbers stray outside the valid ranges on purpose so that refusals are fuzzed too.
  auto small = [&](int lo, int hi) { return std::to_string(in.in(lo, hi)); };
  auto fraction = [&]() { return std::to_string(static_cast<float>(in.in(-10, 110)) / 100.0f); };
  const std::string K = std::to_string(k), k0 = small(0, k + 1), E = std::to_string(experts);
  switch (in.u8() % 14) {
    case 0:
      return "topk(k=" + K + ")";
    case 1:
      return "oea(k0=" + k0 + ",k=" + K + ")";
    case 2:
      return "oea(k0=" + k0 + ",top_p=" + fraction() + ",max_rank=" + small(0, experts + 2) + ",k=" + K + ")";
    case 3:
      return "pruned(k0=" + k0 + ",k=" + K + ")";
    case 4:
      return "xshare(k0=" + k0 + ",m=" + small(-1, 40) + ",k=" + K + (in.flag() ? ",gate=dense" : "") + ")";
    case 5:
      return "xshare_spec(k0=" + k0 + ",m=" + small(0, 8) + ",m_r=" + small(-1, 8) + ",k=" + K + ")";
    case 6:
      return "xshare_ep(k0=" + k0 + ",m_g=" + small(-1, 10) + ",k=" + K + ")";
    case 7:
      return "lynx_lat(d=" + small(-1, experts + 2) + ",k=" + K + ")";
    case 8:
      return "lynx_acc(conf=" + fraction() + ",budget=" + small(-1, experts) + ",k=" + K + ")";
    case 9:
      return "skip(beta=" + fraction() + ",k=" + K + (in.flag() ? ",weights=raw,scale=2.5" : "") + ")";
    case 10:
      return "prune(k0=" + k0 + ") | greedy_mass(mass=" + fraction() + ") | refine(k=" + K +
             ",max_rank=" + small(1, experts) + ")";
    case 11:
      return "topk_union(k=" + small(0, k) + ") | vote_drop(d=" + small(0, 8) + ") | refine(k=" + small(0, k) + ")";
    case 12:
      return "per_request(k0=" + k0 + ",m_r=" + small(0, 4) + ") | ep_fill(m_g=" + small(0, 6) + ") | refine(k=" + K +
             ")";
    default:
      return "confidence_keep(conf=" + fraction() + ",budget=" + small(0, 12) +
             ") | greedy_mass(size=" + small(0, experts) + ",gate=dense) | refine(k=" + K + ")";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_stream in(data, size);
  test::problem p;
  p.ref.E = in.flag() ? in.in(2, 16) : in.in(2, 300);
  p.top_k = in.in(1, std::min(p.ref.E, 32));
  p.ref.n = in.in(0, 48);
  p.type = static_cast<test::element>(in.u8() % 3);
  p.stride = p.ref.E + in.in(0, 3);
  p.ref.scoring = static_cast<naive::mode>(in.u8() % 4);
  if (in.flag() && p.ref.scoring != naive::mode::probabilities) {
    p.ref.bias.resize(p.ref.E);
    for (auto& b : p.ref.bias) b = static_cast<float>(static_cast<std::int8_t>(in.u8())) / 64.0f;
  }
  if (in.flag()) {
    const int n_group = in.in(1, p.ref.E);
    if (p.ref.E % n_group == 0) {
      p.ref.n_group = n_group;
      p.ref.topk_group = in.in(1, n_group);
      p.ref.group_max = in.flag();
    }
  }
  if (in.flag()) {
    p.ref.mask.resize(p.ref.n);
    for (auto& m : p.ref.mask) m = in.u8() & 3;
  }
  if (in.flag() && p.ref.n > 0) {
    p.segments = {0};
    while (p.segments.back() < p.ref.n) {
      const int step = in.remaining() > 0 ? in.in(0, 5) : 1;  // empty requests only while bytes last
      p.segments.push_back(std::min(p.ref.n, p.segments.back() + step));
    }
    p.ref.segments.assign(p.segments.begin(), p.segments.end());
  }
  if (in.flag()) {
    p.ref.G = in.in(1, 8);
    p.placement.resize(p.ref.E);
    for (auto& d : p.placement) d = in.in(0, p.ref.G - 1);
    p.ref.placement.assign(p.placement.begin(), p.placement.end());
  }
  p.ref.prefill = (in.u8() & 7) == 0;
  const std::string text = policy_text(in, p.top_k, p.ref.E);

  // Scores: raw bit patterns of the element type, from the rest of the input.
  std::vector<float> values(static_cast<std::size_t>(p.ref.n) * p.ref.E);
  for (auto& v : values) {
    if (p.type == test::element::f32) {
      const std::uint32_t bits = in.u32();
      std::memcpy(&v, &bits, 4);
    } else if (p.type == test::element::f16) {
      v = test::decode_f16(in.u16());
    } else {
      v = test::decode_bf16(in.u16());
    }
  }
  test::store_scores(p, values);

  const mr::parse_result parsed = mr::parse_policy(text);
  if (!parsed.outcome.ok()) return 0;  // refused with a message: fine
  mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G});
  mr::cpu::workspace ws({p.ref.n, p.ref.E, p.top_k});
  mr::status s;
  switch (p.type) {
    case test::element::f32:
      s = mr::cpu::route(parsed.policy, p.batch<float>(), plan.view(), ws);
      break;
    case test::element::f16:
      s = mr::cpu::route(parsed.policy, p.batch<mr::float16>(), plan.view(), ws);
      break;
    case test::element::bf16:
      s = mr::cpu::route(parsed.policy, p.batch<mr::bfloat16>(), plan.view(), ws);
      break;
  }
  if (!s.ok()) {
    if (mr::to_string(s).empty()) failure("a refusal without a message", text);
    return 0;
  }

  const naive::plan want = naive::route(p.ref, test::to_naive(parsed.policy), p.top_k);
  for (int i = 0; i < p.ref.n; ++i) {
    if (plan.count(i) != want.counts[i]) failure("count differs from the naive router", text);
    if (plan.count(i) > p.top_k) failure("count above k", text);
    if (p.ref.valid(i) && plan.count(i) < 1) failure("a valid token got no expert", text);
    float sum = 0;
    for (int j = 0; j < plan.count(i); ++j) {
      const int e = plan.id(i, j);
      if (e != want.ids[static_cast<std::size_t>(i) * p.top_k + j]) failure("id differs from the naive router", text);
      if (e < 0 || e >= p.ref.E || !plan.summary().selected.contains(e)) failure("id outside S", text);
      for (int q = 0; q < j; ++q)
        if (plan.id(i, q) == e) failure("repeated id", text);
      const float w = plan.weight(i, j);
      if (!std::isfinite(w) || w < 0.0f) failure("NaN, infinite or negative weight", text);
      if (!test::close(w, want.weights[static_cast<std::size_t>(i) * p.top_k + j]))
        failure("weight differs from the naive router", text);
      sum += w;
    }
    for (int j = plan.count(i); j < p.top_k; ++j)
      if (plan.weight(i, j) != 0.0f) failure("padding with weight", text);
    if (plan.count(i) > 0 && parsed.policy.assignment.weights == mr::weighting::renormalize &&
        std::fabs(sum - parsed.policy.assignment.scale) > 1e-5f * parsed.policy.assignment.scale) {
      failure("renormalised row does not sum to scale", text);
    }
    if (plan.guaranteed(i) != want.guaranteed[i]) failure("guaranteed ranks differ", text);
  }
  if (plan.summary().active_count > plan.summary().selected_count) failure("|active| > |S|", text);
  if (plan.summary().selected_count != want.selected) failure("|S| differs from the naive router", text);
  return 0;
}

#pragma once
// Random routing problems for the tests: a library batch (float32, float16 or bfloat16,
// possibly strided) and the same problem in the naive router's form, plus random
// policies in text form and their naive equivalents.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <moe_routing/moe_routing.hpp>

#include "naive_router.hpp"

namespace test {

namespace mr = moe_routing;

/// Independent half-precision decoders (not the library's) for the reference inputs.
inline float decode_bf16(std::uint16_t bits) {
  const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &widened, 4);
  return out;
}
inline float decode_f16(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  float magnitude;
  if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else
    magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  return sign ? -magnitude : magnitude;
}

enum class element { f32, f16, bf16 };

/// Owns a problem's storage; `batch<T>()` views it.
struct problem {
  naive::batch ref;
  element type = element::f32;
  int stride = 0;
  int top_k = 1;
  std::vector<float> f32;
  std::vector<mr::float16> f16;
  std::vector<mr::bfloat16> bf16;
  std::vector<std::int32_t> segments, placement;
  /// Redundant experts (optional; `set_replicas`): the map's three arrays and its shape.
  std::vector<std::int32_t> replica_p2l, replica_l2p, replica_counts;
  int replica_width = 0;
  mr::replica_choice replica_rule = mr::replica_choice::token_modulo;

  template <class T>
  mr::routing_batch<T> batch() const {
    mr::routing_batch<T> b;
    if constexpr (std::is_same_v<T, float>) b.scores = {f32.data(), ref.n, ref.E, stride};
    if constexpr (std::is_same_v<T, mr::float16>) b.scores = {f16.data(), ref.n, ref.E, stride};
    if constexpr (std::is_same_v<T, mr::bfloat16>) b.scores = {bf16.data(), ref.n, ref.E, stride};
    b.mode = static_cast<mr::scoring>(static_cast<int>(ref.scoring));
    b.bias = ref.bias.empty() ? nullptr : ref.bias.data();
    b.groups = {ref.n_group, ref.topk_group, ref.group_max ? mr::group_score::max : mr::group_score::top2_sum};
    b.token_mask = ref.mask.empty() ? nullptr : ref.mask.data();
    if (!segments.empty()) {
      b.segments = segments.data();
      b.request_count = static_cast<int>(segments.size()) - 1;
    }
    if (!placement.empty()) {
      b.placement = placement.data();
      b.device_count = ref.G;
    }
    b.step = ref.prefill ? mr::phase::prefill : mr::phase::decode;
    if (!replica_p2l.empty()) {
      b.replicas = {replica_p2l.data(),
                    replica_l2p.data(),
                    replica_counts.data(),
                    ref.E,
                    static_cast<int>(replica_p2l.size()),
                    replica_width,
                    ref.G,
                    replica_rule};
    }
    return b;
  }
};

struct problem_options {
  int max_tokens = 40;
  int max_experts = 256;
  bool allow_non_finite = true;
};

/// Fills the scores from the reference floats in the chosen element type.
inline void store_scores(problem& p, const std::vector<float>& values) {
  const std::size_t rows = static_cast<std::size_t>(p.ref.n);
  p.f32.assign(rows * p.stride + 1, -7.0f);  // padding between rows must never be read
  p.f16.assign(rows * p.stride + 1, mr::float16{0x7e00});
  p.bf16.assign(rows * p.stride + 1, mr::bfloat16{0x7fc0});
  p.ref.x.resize(rows * p.ref.E);
  for (std::size_t i = 0; i < rows; ++i) {
    for (int e = 0; e < p.ref.E; ++e) {
      const float v = values[i * p.ref.E + e];
      const std::size_t at = i * p.stride + e;
      float seen = v;
      if (p.type == element::f32) p.f32[at] = v;
      if (p.type == element::f16) {
        p.f16[at] = mr::to_float16(v);
        seen = decode_f16(p.f16[at].bits);
      }
      if (p.type == element::bf16) {
        p.bf16[at] = mr::to_bfloat16(v);
        seen = decode_bf16(p.bf16[at].bits);
      }
      p.ref.x[i * p.ref.E + e] = seen;
    }
  }
}

/// A problem from rows written out by hand: n x E float32 values, unstrided, no mask,
/// segments or placement (set those with `set_segments` and `set_placement`).
inline problem problem_from_rows(const std::vector<float>& values, int experts, int top_k,
                                 naive::mode scoring = naive::mode::softmax) {
  problem p;
  p.ref.E = experts;
  p.ref.n = static_cast<int>(values.size()) / experts;
  p.ref.scoring = scoring;
  p.top_k = top_k;
  p.stride = experts;
  p.type = element::f32;
  store_scores(p, values);
  return p;
}

/// Request offsets for both the library batch and the naive one.
inline void set_segments(problem& p, const std::vector<std::int32_t>& offsets) {
  p.segments = offsets;
  p.ref.segments.assign(offsets.begin(), offsets.end());
}

/// An expert placement over `devices` devices, for both the library batch and the naive one.
inline void set_placement(problem& p, int devices, const std::vector<std::int32_t>& device_of_expert) {
  p.placement = device_of_expert;
  p.ref.placement.assign(device_of_expert.begin(), device_of_expert.end());
  p.ref.G = devices;
}

inline problem random_problem(std::mt19937& rng, const problem_options& options = {}) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double probability) { return std::bernoulli_distribution(probability)(rng); };
  problem p;
  const int expert_choices[] = {2, 3, 4, 8, 12, 16, 32, 64, 128, 256, 1024};
  do {
    p.ref.E = expert_choices[uniform(0, 10)];
  } while (p.ref.E > options.max_experts);
  p.top_k = uniform(1, std::min(p.ref.E, chance(0.3) ? 32 : 8));
  p.ref.n = chance(0.05) ? 0 : uniform(1, options.max_tokens);
  p.type = static_cast<element>(uniform(0, 2));
  p.stride = p.ref.E + (chance(0.3) ? uniform(1, 5) : 0);
  p.ref.scoring = static_cast<naive::mode>(uniform(0, 3));
  if (p.ref.scoring != naive::mode::probabilities && chance(0.4)) {  // a selection bias: s = p + bias
    p.ref.bias.resize(p.ref.E);
    for (auto& b : p.ref.bias) b = std::normal_distribution<float>(0.0f, 0.5f)(rng);
  }
  if (chance(0.3)) {  // group-limited candidates, enough of them for top-k
    std::vector<int> divisors;
    for (int g = 1; g <= p.ref.E; ++g)
      if (p.ref.E % g == 0) divisors.push_back(g);
    const int n_group = divisors[uniform(0, static_cast<int>(divisors.size()) - 1)];
    const int size = p.ref.E / n_group;
    const int need = (p.top_k + size - 1) / size;
    if (need <= n_group) {
      p.ref.n_group = n_group;
      p.ref.topk_group = uniform(need, n_group);
      p.ref.group_max = chance(0.5);
    }
  }
  if (chance(0.3)) {
    p.ref.mask.resize(p.ref.n);
    for (auto& m : p.ref.mask) m = chance(0.75) ? static_cast<std::uint8_t>(uniform(1, 255)) : 0;
  }
  if (chance(0.4) && p.ref.n > 0) {
    p.segments = {0};
    while (p.segments.back() < p.ref.n) p.segments.push_back(std::min(p.ref.n, p.segments.back() + uniform(0, 6)));
    p.ref.segments.assign(p.segments.begin(), p.segments.end());
  }
  if (chance(0.5)) {
    p.ref.G = uniform(1, 8);
    p.placement.resize(p.ref.E);
    for (auto& d : p.placement) d = uniform(0, p.ref.G - 1);
    p.ref.placement.assign(p.placement.begin(), p.placement.end());
  }
  p.ref.prefill = chance(0.1);

  std::vector<float> values(static_cast<std::size_t>(p.ref.n) * p.ref.E);
  const int style = uniform(0, 3);
  const float spread = std::uniform_real_distribution<float>(0.1f, 4.0f)(rng);
  for (auto& v : values) {
    if (p.ref.scoring == naive::mode::probabilities)
      v = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    else
      v = std::normal_distribution<float>(0.0f, spread)(rng);
    if (style == 1) v = std::round(v * 4.0f) / 4.0f;  // deliberate ties
    if (style == 2 && options.allow_non_finite && chance(0.05)) {
      const float specials[] = {NAN, INFINITY, -INFINITY, 1e-40f, -0.0f, 0.0f};
      v = specials[uniform(0, 5)];
    }
  }
  store_scores(p, values);
  return p;
}

/// A random policy text whose parameters fit the problem.
inline std::string random_policy_text(std::mt19937& rng, const problem& p) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto real = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  const int k = p.top_k, E = p.ref.E;
  const std::string K = std::to_string(k);
  const std::string k0 = std::to_string(uniform(1, k));
  auto num = [](float v) { return std::to_string(v); };
  const std::string weights = uniform(0, 4) == 0 ? ",weights=raw" : "";
  const std::string scale = uniform(0, 4) == 0 ? ",scale=2.5" : "";
  const std::string gate = uniform(0, 3) == 0 ? ",gate=dense" : "";
  std::vector<std::string> choices = {
      "topk(k=" + K + weights + scale + ")",
      "oea(k0=" + k0 + ",k=" + K + ")",
      "oea(k0=" + k0 + ",top_p=" + num(real(0.05f, 1.0f)) +
          ",max_rank=" + std::to_string(uniform(std::stoi(k0), E + 2)) + ",k=" + K + ")",
      "pruned(k0=" + k0 + ",k=" + K + ")",
      "xshare(k0=" + k0 + ",m=" + std::to_string(uniform(0, 20)) + ",k=" + K + gate + ")",
      "xshare_spec(k0=" + k0 + ",m=" + std::to_string(uniform(0, 8)) + ",m_r=" + std::to_string(uniform(0, 6)) +
          ",k=" + K + gate + ")",
      "lynx_lat(d=" + std::to_string(uniform(0, E)) + ",k=" + K + ")",
      "lynx_acc(conf=" + num(real(0.0f, 1.0f)) + ",budget=" + std::to_string(uniform(0, E)) + ",k=" + K + ")",
      "skip(beta=" + num(real(0.0f, 1.0f)) + ",k=" + K + weights + ")",
      "prune(k0=" + k0 + ",top_p=" + num(real(0.3f, 1.0f)) + ") | greedy_mass(size=" + std::to_string(uniform(0, E)) +
          gate + ") | refine(k=" + K + scale + ")",
      "prune(k0=" + k0 + ") | greedy_mass(mass=" + num(real(0.05f, 1.0f)) + gate + ") | refine(k=" + K +
          ",max_rank=" + std::to_string(uniform(std::stoi(k0), E)) + ")",
      "topk_union(k=" + std::to_string(uniform(1, k)) + ") | vote_drop(d=" + std::to_string(uniform(0, 6)) + gate +
          ") | refine(k=" + K + ")",
      "confidence_keep(min_confidence=" + num(real(0.0f, 1.0f)) + ",budget=" + std::to_string(uniform(0, 12)) +
          ") | greedy_mass(add=" + std::to_string(uniform(0, 4)) + ") | refine(k=" + std::to_string(uniform(1, k)) +
          weights + ")",
      "per_request(k0=" + k0 + ",m_r=" + std::to_string(uniform(0, 4)) + gate +
          ") | vote_drop(d=" + std::to_string(uniform(0, 4)) + ") | refine(k=" + K + ")",
  };
  if (!p.placement.empty()) {
    choices.push_back("xshare_ep(k0=" + k0 + ",m_g=" + std::to_string(uniform(0, 6)) + ",k=" + K + gate + ")");
    choices.push_back("per_request(k0=" + k0 + ",m_r=" + std::to_string(uniform(0, 3)) +
                      ") | ep_fill(m_g=" + std::to_string(uniform(0, 5)) + ") | refine(k=" + K + ")");
  }
  return choices[static_cast<std::size_t>(uniform(0, static_cast<int>(choices.size()) - 1))];
}

inline bool is_dense(mr::column_mass gate) { return gate == mr::column_mass::dense; }

/// The naive router's form of each built-in set stage (reads parameters only).
inline naive::stage to_naive_stage(const mr::topk_union& s) { return {.kind = "topk_union", .k = s.k}; }
inline naive::stage to_naive_stage(const mr::prune& s) {
  return {.kind = "prune", .k0 = s.k0, .top_p = s.top_p, .beta = s.skip_ratio};
}
inline naive::stage to_naive_stage(const mr::greedy_mass& s) {
  return {.kind = "greedy_mass", .add = s.add, .size = s.size, .mass = s.mass, .dense = is_dense(s.gate)};
}
inline naive::stage to_naive_stage(const mr::per_request& s) {
  return {.kind = "per_request", .k0 = s.k0, .m_r = s.m_r, .dense = is_dense(s.gate)};
}
inline naive::stage to_naive_stage(const mr::ep_fill& s) {
  return {.kind = "ep_fill", .m_g = s.m_g, .dense = is_dense(s.gate)};
}
inline naive::stage to_naive_stage(const mr::vote_drop& s) {
  return {.kind = "vote_drop", .d = s.d, .dense = is_dense(s.gate)};
}
inline naive::stage to_naive_stage(const mr::confidence_keep& s) {
  return {.kind = "confidence_keep", .budget = s.budget, .conf = s.min_confidence, .dense = is_dense(s.gate)};
}
/// Not in the naive router: tests/bodies/expert_parallel.hpp replaces it by its definition.
inline naive::stage to_naive_stage(const mr::ep_level& s) { return {.kind = "ep_level", .dense = is_dense(s.gate)}; }
/// Not in the naive router: tests/bodies/coverage_budget.hpp replaces them by their definitions.
inline naive::stage to_naive_stage(const mr::coverage_greedy&) { return {.kind = "coverage_greedy"}; }
inline naive::stage to_naive_stage(const mr::prune_to_budget&) { return {.kind = "prune_to_budget"}; }
inline naive::stage to_naive_stage(const mr::prune_to_latency&) { return {.kind = "prune_to_latency"}; }

/// The naive router's form of a parsed policy (reads parameters only).
inline naive::policy to_naive(const mr::runtime_policy& policy) {
  naive::policy out;
  for (int i = 0; i < policy.set_stage_count; ++i) {
    const mr::any_set_stage& s = policy.set_stages[i];
    naive::stage st;
    s.visit([&](const auto& stage) { st = to_naive_stage(stage); });
    out.sets.push_back(st);
  }
  out.k = policy.assignment.k;
  out.max_rank = policy.assignment.max_rank;
  out.raw = policy.assignment.weights == mr::weighting::raw;
  out.scale = policy.assignment.scale;
  return out;
}

/// Relative closeness for weights (absolute near zero).
inline bool close(float a, float b, float relative = 1e-6f) {
  return std::fabs(a - b) <= relative * std::max({1e-6f, std::fabs(a), std::fabs(b)});
}

}  // namespace test

#pragma once
/// \file
/// Seeded synthetic router traces with knobs a user can reason about. Deterministic
/// across platforms for a given seed: the generator uses a 64-bit integer PRNG and only
/// IEEE-exact float operations (+, -, *, /, sqrt), never a library's distributions or
/// transcendental functions.
///
/// - `uniform`: every score an independent uniform number (the E(1 - (1 - k/E)^n) model).
/// - `realistic`: per layer, an expert popularity that falls off with rank; per request,
///   a mixture of topics (domains) that shifts its experts; per token, noise that is
///   correlated between consecutive tokens of a request (AR(1) with `correlation`), so
///   a request's draft tokens agree more than strangers do; a temperature for sharpness.

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "moe_routing/io/trace.hpp"
#include "moe_routing/synthetic/random_bits.hpp"

namespace moe_routing::synthetic {

/// a * b rounded to double before any addition uses it: a volatile store keeps the
/// compiler from fusing it into an FMA (which -march=native builds would otherwise do),
/// so builds with and without FMA produce the same traces.
inline double rounded_product(double a, double b) {
  volatile double product = a * b;
  return product;
}

enum class trace_kind { uniform, realistic };

struct generator_config {
  trace_kind kind = trace_kind::realistic;
  int experts = 128;
  int top_k = 8;
  int layers = 1;
  int tokens_per_step = 16;  ///< n, the decode batch
  int steps = 16;            ///< decode steps (batches)
  int requests = 0;          ///< R requests sharing each step; 0 = one per token
  std::uint64_t seed = 1;
  // realistic knobs
  double popularity_skew = 0.0;  ///< logit drop per sqrt(popularity rank)
  int topics = 8;                ///< domains a request mixes
  double topic_strength = 1.0;   ///< spread of a topic's expert preferences
  double token_noise = 1.0;      ///< per-token spread
  double correlation = 0.7;      ///< AR(1) coefficient between a request's consecutive tokens
  double temperature = 1.0;      ///< divides every logit; below 1 sharpens the router
  /// Each request draws one topic (uniformly, once for every layer) instead of a mixture of
  /// all of them: requests form groups that prefer the same experts at every layer, which
  /// batch forming can find.
  bool single_topic = false;
  bool half = false;  ///< store float16 instead of float32
};

/// A named calibrated configuration and the published figure it reproduces.
struct preset {
  const char* name;
  generator_config config;
  const char* calibration;
};

/// The calibrated presets (see docs/traces.md for how each was fitted).
inline const std::vector<preset>& presets() {
  static const std::vector<preset> all = [] {
    std::vector<preset> list;
    generator_config uniform;
    uniform.kind = trace_kind::uniform;
    list.push_back({"uniform", uniform, "independent uniform scores: mean vanilla |active| = E(1 - (1 - k/E)^n)"});
    const auto realistic = [](int experts, int top_k, double popularity_skew, double topic_strength) {
      generator_config c;
      c.experts = experts;
      c.top_k = top_k;
      c.popularity_skew = popularity_skew;
      c.topic_strength = topic_strength;
      return c;
    };
    list.push_back({"qwen3-30b-a3b", realistic(128, 8, 0.295, 0.9),
                    "E = 128, k = 8; vanilla decode at batch 16 activates 48.8 experts on average "
                    "(OEA paper, Table 4, average over AIME24, GPQA, LiveCodeBench, MATH-500)"});
    list.push_back({"deepseek-r1", realistic(256, 8, 0.0, 0.1),
                    "E = 256, k = 8; about 57 active experts at batch 8 and 163 at batch 32 "
                    "(XShare paper, section 1: close to the uniform model)"});
    generator_config topics = realistic(256, 8, 0.0, 0.6);
    topics.topics = 16;
    topics.single_topic = true;
    topics.correlation = 0.95;
    list.push_back({"deepseek-topics", topics,
                    "E = 256, k = 8, requests of 16 topics that persist over their tokens; with 40 layers, "
                    "1,000 requests of 4 tokens in batches of 64, the oracle saves 21.4% of expert loads "
                    "against random batches (the co-activation study's 21.3%), while random batches keep "
                    "deepseek-r1's |active| (56.8 at batch 8, 157.8 at batch 32)"});
    return list;
  }();
  return all;
}

inline const preset* find_preset(std::string_view name) {
  for (const auto& p : presets()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

/// Generates a trace: `steps` decode steps of `tokens_per_step` tokens each, shared by
/// `requests` requests (each request's tokens consecutive within a step), `layers` layers.
namespace detail {

/// The trace's shape, steps and request segments, without scores.
inline io::trace trace_frame(const generator_config& config, int requests) {
  const int n = config.tokens_per_step, S = config.steps;
  io::trace t;
  t.layers = config.layers;
  t.tokens = n * S;
  t.experts = config.experts;
  t.top_k = config.top_k;
  t.mode = scoring::softmax;
  t.half = config.half;
  t.source = config.kind == trace_kind::uniform ? "moe-route gen uniform" : "moe-route gen realistic";
  for (int s = 0; s <= S; ++s) t.steps.push_back(s * n);
  for (int s = 0; s < S; ++s) {
    for (int r = 0; r < requests; ++r) {
      t.segments.push_back(s * n + static_cast<int>(static_cast<long long>(n) * r / requests));
    }
  }
  t.segments.push_back(S * n);
  return t;
}

/// Popularity: a random order of the experts, logits falling with sqrt(rank).
inline std::vector<double> popularity_logits(const generator_config& config, random_bits& rng) {
  const int E = config.experts;
  std::vector<int> order(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) order[static_cast<std::size_t>(e)] = e;
  for (int e = E - 1; e > 0; --e) {
    std::swap(order[static_cast<std::size_t>(e)], order[rng.below(static_cast<std::uint64_t>(e) + 1)]);
  }
  std::vector<double> popularity(static_cast<std::size_t>(E));
  for (int rank = 0; rank < E; ++rank) {
    popularity[static_cast<std::size_t>(order[static_cast<std::size_t>(rank)])] =
        -config.popularity_skew * std::sqrt(static_cast<double>(rank));
  }
  return popularity;
}

/// Topics and each request's mixture of them (concentrated: weights ~ u^4): [requests, E].
inline std::vector<double> request_topic_bias(const generator_config& config, int requests,
                                              const std::vector<int>& request_topics, random_bits& rng) {
  const int E = config.experts;
  std::vector<double> topic(static_cast<std::size_t>(config.topics) * E);
  for (auto& v : topic) v = config.topic_strength * rng.normal();
  std::vector<double> request_bias(static_cast<std::size_t>(requests) * E, 0.0);
  for (int r = 0; r < requests; ++r) {
    if (config.single_topic) {
      const auto chosen = static_cast<std::size_t>(request_topics[static_cast<std::size_t>(r)]);
      for (int e = 0; e < E; ++e) request_bias[static_cast<std::size_t>(r) * E + e] = topic[chosen * E + e];
      continue;
    }
    std::vector<double> weight(static_cast<std::size_t>(config.topics));
    double total = 0;
    for (auto& w : weight) {
      const double u = rng.uniform();
      w = u * u * u * u;
      total += w;
    }
    for (int c = 0; c < config.topics; ++c) {
      const double w = total > 0 ? weight[static_cast<std::size_t>(c)] / total : 1.0 / config.topics;
      for (int e = 0; e < E; ++e) {
        request_bias[static_cast<std::size_t>(r) * E + e] +=
            rounded_product(w, topic[static_cast<std::size_t>(c) * E + e]);
      }
    }
  }
  return request_bias;
}

/// One layer of a realistic trace: popularity plus the request's topics plus per-request
/// AR(1) noise, carried from token to token and step to step, over the temperature.
inline void fill_realistic_layer(const generator_config& config, int requests, const std::vector<int>& request_topics,
                                 float* layer, random_bits& rng) {
  const int E = config.experts, n = config.tokens_per_step;
  const std::vector<double> popularity = popularity_logits(config, rng);
  const std::vector<double> request_bias = request_topic_bias(config, requests, request_topics, rng);
  std::vector<double> state(static_cast<std::size_t>(requests) * E);
  for (auto& v : state) v = rng.normal();
  const double keep = config.correlation, fresh = std::sqrt(1.0 - config.correlation * config.correlation);
  for (int s = 0; s < config.steps; ++s) {
    for (int r = 0; r < requests; ++r) {
      const int begin = static_cast<int>(static_cast<long long>(n) * r / requests);
      const int end = static_cast<int>(static_cast<long long>(n) * (r + 1) / requests);
      for (int token = begin; token < end; ++token) {
        float* row = layer + (static_cast<std::size_t>(s) * n + token) * E;
        for (int e = 0; e < E; ++e) {
          double& z = state[static_cast<std::size_t>(r) * E + e];
          z = rounded_product(keep, z) + rounded_product(fresh, rng.normal());
          row[e] = static_cast<float>((popularity[static_cast<std::size_t>(e)] +
                                       request_bias[static_cast<std::size_t>(r) * E + e] +
                                       rounded_product(config.token_noise, z)) /
                                      config.temperature);
        }
      }
    }
  }
}

}  // namespace detail

inline io::trace generate_trace(const generator_config& config) {
  const int E = config.experts, L = config.layers, n = config.tokens_per_step, S = config.steps;
  const int R = config.requests > 0 ? config.requests : n;
  if (E < 2 || config.top_k < 1 || config.top_k > E || L < 1 || n < 1 || S < 1 || R > n) {
    throw io::trace_error("generator: need E >= 2, 1 <= k <= E, layers, tokens and steps >= 1, requests <= tokens");
  }
  io::trace t = detail::trace_frame(config, R);
  std::vector<float> values(static_cast<std::size_t>(L) * t.tokens * E);
  random_bits rng(config.seed);
  std::vector<int> request_topics;  // single-topic requests keep theirs at every layer
  for (int r = 0; r < R && config.single_topic; ++r) {
    request_topics.push_back(static_cast<int>(rng.below(static_cast<std::uint64_t>(config.topics))));
  }
  for (int l = 0; l < L; ++l) {
    float* layer = values.data() + static_cast<std::size_t>(l) * t.tokens * E;
    if (config.kind == trace_kind::uniform) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(t.tokens) * E; ++i)
        layer[i] = static_cast<float>(rng.uniform());
    } else {
      detail::fill_realistic_layer(config, R, request_topics, layer, rng);
    }
  }
  if (config.half) {
    t.scores_f16.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) t.scores_f16[i] = to_float16(values[i]);
  } else {
    t.scores_f32 = std::move(values);
  }
  return t;
}

}  // namespace moe_routing::synthetic

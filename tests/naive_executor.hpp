#pragma once
// A deliberately naive MoE layer for the executor tests (CPU and CUDA backends): every
// expert's matrices held in double as well, and a per-token loop in double that shares no
// code with the library's executors.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <moe_routing/executor/expert_weights.hpp>
#include <moe_routing/moe_routing.hpp>

#include "test_support.hpp"

namespace test {

/// v rounded to the nearest bfloat16 (ties to even), written out here rather than taken from
/// the library: what the executor's bf16-activation mode must apply to x and to SwiGLU.
inline double round_to_bf16(double v) {
  const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(v));
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  return std::bit_cast<float>(rounded);
}

/// E experts' matrices in one element type, plus the float values the naive loop uses.
template <class Weight>
struct expert_bank {
  int experts, d, h;
  std::vector<std::vector<Weight>> gate, up, down, gate_up;
  std::vector<std::vector<double>> gate_f, up_f, down_f;
  std::vector<const Weight*> gate_p, up_p, down_p, gate_up_p;

  expert_bank(int e_count, int hidden, int width, std::mt19937& rng) : experts(e_count), d(hidden), h(width) {
    std::normal_distribution<float> noise(0.0f, 0.08f);
    auto make = [&](std::vector<Weight>& m, std::vector<double>& f, std::size_t size) {
      m.resize(size);
      f.resize(size);
      for (std::size_t i = 0; i < size; ++i) {
        const float v = noise(rng);
        if constexpr (std::is_same_v<Weight, float>) m[i] = v;
        if constexpr (std::is_same_v<Weight, mr::bfloat16>) m[i] = mr::to_bfloat16(v);
        if constexpr (std::is_same_v<Weight, mr::float16>) m[i] = mr::to_float16(v);
        if constexpr (std::is_same_v<Weight, float>) f[i] = v;
        if constexpr (std::is_same_v<Weight, mr::bfloat16>) f[i] = test::decode_bf16(m[i].bits);
        if constexpr (std::is_same_v<Weight, mr::float16>) f[i] = test::decode_f16(m[i].bits);
      }
    };
    gate.resize(experts), up.resize(experts), down.resize(experts), gate_up.resize(experts);
    gate_f.resize(experts), up_f.resize(experts), down_f.resize(experts);
    for (int e = 0; e < experts; ++e) {
      make(gate[e], gate_f[e], static_cast<std::size_t>(h) * d);
      make(up[e], up_f[e], static_cast<std::size_t>(h) * d);
      make(down[e], down_f[e], static_cast<std::size_t>(d) * h);
      gate_up[e] = gate[e];
      gate_up[e].insert(gate_up[e].end(), up[e].begin(), up[e].end());
      gate_p.push_back(gate[e].data()), up_p.push_back(up[e].data()), down_p.push_back(down[e].data());
      gate_up_p.push_back(gate_up[e].data());
    }
  }

  /// down_e(silu(gate_e x) * up_e x), in double; `rounded`: x and the SwiGLU values
  /// rounded to bfloat16 first, as engines' bf16 GEMMs see them.
  std::vector<double> expert(int e, const float* x, bool rounded) const {
    std::vector<double> act(static_cast<std::size_t>(h)), out(static_cast<std::size_t>(d), 0.0), in(x, x + d);
    if (rounded) {
      for (auto& v : in) v = round_to_bf16(v);
    }
    for (int r = 0; r < h; ++r) {
      double g = 0, u = 0;
      for (int c = 0; c < d; ++c) {
        g += gate_f[e][static_cast<std::size_t>(r) * d + c] * in[static_cast<std::size_t>(c)];
        u += up_f[e][static_cast<std::size_t>(r) * d + c] * in[static_cast<std::size_t>(c)];
      }
      act[r] = g / (1.0 + std::exp(-g)) * u;
      if (rounded) act[r] = round_to_bf16(act[r]);
    }
    for (int c = 0; c < d; ++c) {
      for (int r = 0; r < h; ++r) out[c] += down_f[e][static_cast<std::size_t>(c) * h + r] * act[r];
    }
    return out;
  }
};

/// The naive loop: for each token, each assigned expert, weight times its output, plus shared.
template <class Weight>
std::vector<double> naive_forward(const std::vector<float>& x, const mr::routing_plan& plan,
                                  const expert_bank<Weight>& routed, const expert_bank<Weight>* shared,
                                  bool rounded = false) {
  const int n = plan.tokens(), d = routed.d;
  std::vector<double> y(static_cast<std::size_t>(n) * d, 0.0);
  for (int i = 0; i < n; ++i) {
    if (plan.count(i) == 0) continue;
    for (int j = 0; j < plan.count(i); ++j) {
      const auto out = routed.expert(plan.id(i, j), x.data() + static_cast<std::size_t>(i) * d, rounded);
      for (int c = 0; c < d; ++c) y[static_cast<std::size_t>(i) * d + c] += plan.weight(i, j) * out[c];
    }
    for (int s = 0; shared != nullptr && s < shared->experts; ++s) {
      const auto out = shared->expert(s, x.data() + static_cast<std::size_t>(i) * d, rounded);
      for (int c = 0; c < d; ++c) y[static_cast<std::size_t>(i) * d + c] += out[c];
    }
  }
  return y;
}

/// max |y - reference| / max |reference|: error relative to the output's scale; infinity when
/// either holds a NaN or an infinity (std::max would pass over a NaN difference) or the sizes
/// differ.
inline double relative_error(const std::vector<float>& y, const std::vector<double>& reference) {
  if (y.size() != reference.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i]) || !std::isfinite(reference[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(y[i] - reference[i]));
    scale = std::max(scale, std::fabs(reference[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

template <class Weight>
mr::expert_weights<Weight> view_of(const expert_bank<Weight>& bank, bool fused, const expert_bank<Weight>* shared) {
  mr::expert_weights<Weight> w;
  w.experts = bank.experts;
  w.hidden = bank.d;
  w.intermediate = bank.h;
  w.layout = fused ? mr::projection_layout::fused_gate_up : mr::projection_layout::separate;
  w.gate = bank.gate_p.data(), w.up = bank.up_p.data(), w.down = bank.down_p.data(), w.gate_up = bank.gate_up_p.data();
  if (shared != nullptr) {
    w.shared_experts = shared->experts;
    w.shared_intermediate = shared->h;
    w.shared_gate = shared->gate_p.data(), w.shared_up = shared->up_p.data(), w.shared_down = shared->down_p.data();
    w.shared_gate_up = shared->gate_up_p.data();
  }
  return w;
}

/// One layer's random inputs for n tokens: activations x [n x d], router logits [n x E],
/// token 2 masked out (when n > 3), requests of 3 tokens; `batch()` routes them.
struct layer_inputs {
  int n, experts;
  std::vector<float> x, logits;
  std::vector<std::uint8_t> mask;
  std::vector<std::int32_t> segments;

  layer_inputs(int tokens, int d, int expert_count, std::mt19937& rng)
      : n(tokens),
        experts(expert_count),
        x(static_cast<std::size_t>(tokens) * d),
        logits(static_cast<std::size_t>(tokens) * expert_count),
        mask(static_cast<std::size_t>(tokens), 1) {
    for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    for (auto& v : logits) v = std::normal_distribution<float>(0.0f, 2.0f)(rng);
    if (n > 3) mask[2] = 0;
    for (int o = 0; o < n; o += 3) segments.push_back(o);
    segments.push_back(n);
  }

  mr::routing_batch<float> batch() const {
    mr::routing_batch<float> b{mr::make_score_view(logits.data(), n, experts)};
    b.token_mask = mask.data();
    b.segments = segments.data();
    b.request_count = static_cast<int>(segments.size()) - 1;
    return b;
  }
};

}  // namespace test

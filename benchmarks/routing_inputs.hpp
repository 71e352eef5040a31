#pragma once
// The inputs every routing benchmark shares (CPU and CUDA suites): skewed synthetic logits
// cached per shape, and each preset's parameters for a given top-k.

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <moe_routing/moe_routing.hpp>

namespace bench {
namespace mr = moe_routing;

/// Softmax-like logits with a popularity skew (the examples' generator's idea), stored
/// as Score (float or bfloat16, rounded to nearest).
template <class Score>
std::vector<Score> generate_logits(int n, int experts, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> prior(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e)
    prior[static_cast<std::size_t>(e)] = -0.7f * std::log1p(static_cast<float>((e * 7919) % experts));
  std::vector<Score> logits(static_cast<std::size_t>(n) * static_cast<std::size_t>(experts));
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float v = prior[i % static_cast<std::size_t>(experts)] + noise(rng);
    if constexpr (std::is_same_v<Score, float>)
      logits[i] = v;
    else
      logits[i] = mr::to_bfloat16(v);
  }
  return logits;
}

/// The logits of one shape, generated once per process: Google Benchmark calls a benchmark
/// several times (iteration estimates, repetitions), and a prefill shape takes longer to
/// generate than to route.
template <class Score>
const std::vector<Score>& make_logits(int n, int experts, unsigned seed) {
  static std::map<std::tuple<int, int, unsigned>, std::vector<Score>> cache;
  auto [it, fresh] = cache.try_emplace({n, experts, seed});
  if (fresh) it->second = generate_logits<Score>(n, experts, seed);
  return it->second;
}

/// Each preset's parameters for top-k = k (k0 = k / 2 for OEA, as in the OEA paper's 8 -> 4).
std::string preset_text(const std::string& name, int k) {
  const std::string K = std::to_string(k), k0 = std::to_string(std::max(1, k / 2));
  if (name == "topk") return "topk(k=" + K + ")";
  if (name == "oea") return "oea(k0=" + k0 + ",k=" + K + ")";
  if (name == "xshare") return "xshare(k0=1,m=16,k=" + K + ")";
  if (name == "xshare_spec") return "xshare_spec(k0=1,m=0,m_r=4,k=" + K + ")";
  if (name == "lynx_lat") return "lynx_lat(d=16,k=" + K + ")";
  if (name == "lynx_acc") return "lynx_acc(conf=0.5,budget=24,k=" + K + ")";
  return "skip(beta=0.3,k=" + K + ")";
}

}  // namespace bench

// Vanilla routing as the engines compute it, written here the way their reference
// code reads: Qwen3/Mixtral softmax top-k with renormalisation, and DeepSeek-V3's
// sigmoid with e_score_correction_bias, n_group/topk_group and routed_scaling_factor.

#include <algorithm>
#include <numeric>
#include <random>

#include "plan_checks.hpp"

namespace {
namespace mr = test::mr;
}

TEST_CASE("softmax top-k with renormalisation (Qwen3 norm_topk_prob, Mixtral)") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 32)(rng);
    const int experts = 128, k = 8;
    std::vector<float> logits(static_cast<std::size_t>(n) * experts);
    for (auto& x : logits) x = std::normal_distribution<float>(0.0f, 2.0f)(rng);
    mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
    mr::cpu::workspace ws({n, experts, k});
    mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
    REQUIRE(mr::cpu::route(mr::presets::vanilla(k), batch, plan.view(), ws).ok());
    for (int i = 0; i < n; ++i) {
      const float* row = &logits[static_cast<std::size_t>(i) * experts];
      // Mixtral: top-k of the logits, then softmax over those k.
      std::vector<int> index(experts);
      std::iota(index.begin(), index.end(), 0);
      std::partial_sort(index.begin(), index.begin() + k, index.end(), [&](int a, int b) { return row[a] > row[b]; });
      double denominator = 0;
      for (int j = 0; j < k; ++j) denominator += std::exp(static_cast<double>(row[index[j]]));
      for (int j = 0; j < k; ++j) {
        REQUIRE(plan.id(i, j) == index[j]);
        CHECK(plan.weight(i, j) ==
              doctest::Approx(std::exp(static_cast<double>(row[index[j]])) / denominator).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("DeepSeek-V3: sigmoid, bias, n_group = 8, topk_group = 4, routed_scaling_factor = 2.5") {
  std::mt19937 rng(6);
  const int experts = 256, k = 8, n_group = 8, topk_group = 4;
  const float scaling = 2.5f;
  std::vector<float> bias(experts);
  for (auto& b : bias) b = std::normal_distribution<float>(0.0f, 0.1f)(rng);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 16)(rng);
    std::vector<float> logits(static_cast<std::size_t>(n) * experts);
    for (auto& x : logits) x = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    mr::routing_batch<float> batch{mr::make_score_view(logits.data(), n, experts)};
    batch.mode = mr::scoring::sigmoid;
    batch.bias = bias.data();
    batch.groups = {n_group, topk_group, mr::group_score::top2_sum};
    mr::cpu::workspace ws({n, experts, k});
    mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
    REQUIRE(
        mr::cpu::route(mr::presets::vanilla(k, {mr::weighting::renormalize, scaling}), batch, plan.view(), ws).ok());
    for (int i = 0; i < n; ++i) {
      const float* row = &logits[static_cast<std::size_t>(i) * experts];
      std::vector<double> scores(experts), choice(experts);
      for (int e = 0; e < experts; ++e) {
        scores[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(row[e])));
        choice[e] = scores[e] + bias[e];
      }
      // group score: sum of the two largest choice scores in each group of 32
      std::vector<std::pair<double, int>> groups;
      for (int g = 0; g < n_group; ++g) {
        std::vector<double> members(choice.begin() + g * 32, choice.begin() + (g + 1) * 32);
        std::sort(members.rbegin(), members.rend());
        groups.push_back({members[0] + members[1], g});
      }
      std::sort(groups.begin(), groups.end(), [](auto a, auto b) { return a.first > b.first; });
      std::vector<double> masked(experts, -1e30);
      for (int g = 0; g < topk_group; ++g) {
        for (int e = groups[g].second * 32; e < (groups[g].second + 1) * 32; ++e) masked[e] = choice[e];
      }
      std::vector<int> index(experts);
      std::iota(index.begin(), index.end(), 0);
      std::partial_sort(index.begin(), index.begin() + k, index.end(),
                        [&](int a, int b) { return masked[a] > masked[b]; });
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += scores[index[j]];
      for (int j = 0; j < k; ++j) {
        REQUIRE(plan.id(i, j) == index[j]);
        CHECK(plan.weight(i, j) == doctest::Approx(scores[index[j]] / sum * scaling).epsilon(1e-5));
      }
    }
  }
}

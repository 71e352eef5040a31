// rank_row, the rescoring of a single row: the keys score_row gives, computed from the input
// alone exactly when keys_from_input_alone says no p is needed.

#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "moe_routing/core/score_row.hpp"

namespace mr = moe_routing;

TEST_CASE("keys_from_input_alone: only without a bias and without a group limit") {
  const float bias[4] = {0, 0, 0, 0};
  const mr::group_limit off{};
  const mr::group_limit on{.n_group = 2, .topk_group = 1};
  CHECK(mr::keys_from_input_alone(nullptr, off));
  CHECK_FALSE(mr::keys_from_input_alone(bias, off));
  CHECK_FALSE(mr::keys_from_input_alone(nullptr, on));
  CHECK_FALSE(mr::keys_from_input_alone(bias, on));
  // The batch's form asks the same of its own bias and limit.
  mr::routing_batch<float> batch;
  CHECK(batch.keys_from_input_alone());
  batch.groups = on;
  CHECK_FALSE(batch.keys_from_input_alone());
  batch.groups = off;
  batch.bias = bias;
  CHECK_FALSE(batch.keys_from_input_alone());
}

TEST_CASE("rank_row gives score_row's keys, from the input alone only where no p is needed") {
  std::mt19937 random(5);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::uniform_real_distribution<float> small(-0.1f, 0.1f);
  constexpr int experts = 16;
  std::vector<float> bias(experts);
  for (float& b : bias) b = small(random);
  for (const mr::scoring mode : {mr::scoring::softmax, mr::scoring::sigmoid}) {
    for (const bool with_bias : {false, true}) {
      for (const bool with_groups : {false, true}) {
        CAPTURE(static_cast<int>(mode));
        CAPTURE(with_bias);
        CAPTURE(with_groups);
        const float* b = with_bias ? bias.data() : nullptr;
        const mr::group_limit groups = with_groups ? mr::group_limit{.n_group = 4, .topk_group = 2} : mr::group_limit{};
        for (int trial = 0; trial < 20; ++trial) {
          std::vector<float> row(experts);
          for (float& x : row) x = logit(random);
          std::vector<float> p(experts), scratch(experts);
          std::vector<mr::rank_key> want(experts), got(experts, mr::rank_key{});
          (void)mr::score_row(row.data(), experts, mode, b, groups, p.data(), want.data(), scratch.data());
          // rank_row's p: untouched where it takes the input alone, written (as score_row's)
          // otherwise. Its keys alone could not tell: it falls back to score_row itself.
          constexpr float untouched = -7.0f;  // no probability
          std::vector<float> rank_p(experts, untouched);
          mr::rank_row(row.data(), experts, mode, b, groups, rank_p.data(), got.data(), scratch.data());
          const bool alone = !with_bias && !with_groups;
          for (int e = 0; e < experts; ++e) CHECK(rank_p[e] == (alone ? untouched : p[e]));
          int excluded = 0;
          for (int e = 0; e < experts; ++e) {
            CAPTURE(e);
            CHECK(got[e] == want[e]);
            // Written out naively: without a bias or a limit, the key is the input value's.
            if (alone) CHECK(got[e] == mr::make_rank_key(row[e], e));
            excluded += got[e] == mr::excluded_rank_key(e) ? 1 : 0;
          }
          // Keeping 2 of the 4 groups of 4 experts leaves out the other two groups' 8.
          CHECK(excluded == (with_groups ? 8 : 0));
        }
      }
    }
  }
}

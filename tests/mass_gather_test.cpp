// The mass ranking's gather (`cpu/simd/mass_ranking.hpp`: experts outside S with positive
// mass, ascending) against a loop over every expert written here, at expert counts that end
// inside a 64-expert word after the first (65, 100, 1000) as well as on word boundaries.
// CTest also runs it with the kernels capped (`isa.*`), so the portable gather is checked on
// a machine whose default is the AVX-512 one. The ranking itself (the heaviest first) is
// checked against a sort written here, on every path the same way.

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/cpu/simd/mass_ranking.hpp>

namespace {
namespace mr = moe_routing;

std::vector<std::int32_t> naive_gather(const std::vector<std::int64_t>& mass, const mr::expert_set& selected) {
  std::vector<std::int32_t> experts;
  for (int e = 0; e < static_cast<int>(mass.size()); ++e) {
    if (!selected.contains(e) && mass[static_cast<std::size_t>(e)] > 0) experts.push_back(e);
  }
  return experts;
}

}  // namespace

TEST_CASE("mass gather equals a loop over every expert, whole and partial 64-expert words") {
  std::mt19937 random(64);
  for (const int experts : {1, 7, 63, 64, 65, 100, 128, 200, 256, 1000, 1023, 1024}) {
    CAPTURE(experts);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::int64_t> mass(static_cast<std::size_t>(experts));
      std::uniform_int_distribution<int> kind(0, 3);  // zero, negative or positive mass
      for (auto& m : mass) m = kind(random) == 0 ? -5 : kind(random) == 1 ? 0 : 1 + kind(random);
      mr::expert_set selected;
      std::uniform_int_distribution<int> expert(0, experts - 1);
      for (int i = 0; i < experts / 3; ++i) selected.insert(expert(random));
      std::vector<std::int32_t> order(static_cast<std::size_t>(experts), -1);
      const int count = mr::cpu::detail::gather_unselected_positive(mass, selected, order.data());
      order.resize(static_cast<std::size_t>(count));
      CHECK(order == naive_gather(mass, selected));
    }
  }
}

TEST_CASE("mass ranking puts the heaviest first, ties to the lower expert, against a sort written here") {
  // Pools (experts outside S with positive mass) of up to 32 experts (ranked at once), of 33
  // to 256 (picked one maximum at a time) and beyond (sorted), by the share of positive
  // masses; masses with many ties, and some too large to pack (sorted), among them one just
  // past the packing limit and 2^56 - 1 at the lowest position (a packed key of all ones
  // once, which the first pick's limit left out).
  std::mt19937 random(65);
  int pools_by_path[3] = {};
  for (const int experts : {1, 5, 31, 32, 33, 40, 64, 100, 256, 300, 600, 1024}) {
    CAPTURE(experts);
    for (int trial = 0; trial < 60; ++trial) {
      const double positive_share = trial % 3 == 0 ? 0.05 : trial % 3 == 1 ? 0.4 : 0.9;
      std::vector<std::int64_t> mass(static_cast<std::size_t>(experts));
      for (auto& m : mass) {
        const bool positive = std::bernoulli_distribution(positive_share)(random);
        m = positive ? 1 + std::uniform_int_distribution<int>(0, 3)(random)
                     : -std::uniform_int_distribution<int>(0, 2)(random);
      }
      if (trial % 10 == 7) mass[0] = (std::int64_t{1} << 56) - 1;
      if (trial % 10 == 8) mass[static_cast<std::size_t>(experts / 2)] = std::int64_t{1} << 55;
      mr::expert_set selected;
      std::uniform_int_distribution<int> expert(0, experts - 1);
      for (int i = 0; i < experts / 8; ++i) selected.insert(expert(random));
      std::vector<std::int32_t> want = naive_gather(mass, selected);
      std::stable_sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
        return mass[static_cast<std::size_t>(a)] > mass[static_cast<std::size_t>(b)];
      });
      const int needed = std::uniform_int_distribution<int>(0, 17)(random);
      CAPTURE(needed);
      const int pool = static_cast<int>(want.size());
      ++pools_by_path[pool <= 32 ? 0 : pool <= 256 ? 1 : 2];
      std::vector<std::int32_t> order(static_cast<std::size_t>(experts), -1);
      const int count = mr::cpu::detail::rank_unselected_by_mass(mass, selected, order.data(), needed);
      REQUIRE(count == pool);
      for (int j = 0; j < std::min(needed, count); ++j) {
        CAPTURE(j);
        CHECK(order[static_cast<std::size_t>(j)] == want[static_cast<std::size_t>(j)]);
      }
    }
  }
  // Every path had pools to rank.
  CHECK(pools_by_path[0] > 50);
  CHECK(pools_by_path[1] > 50);
  CHECK(pools_by_path[2] > 50);
}

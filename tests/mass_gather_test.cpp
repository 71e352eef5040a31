// The mass ranking's gather (`cpu/simd/mass_ranking.hpp`: experts outside S with positive
// mass, ascending) against a loop over every expert written here, at expert counts that end
// inside a 64-expert word after the first (65, 100, 1000) as well as on word boundaries.
// CTest also runs it with the kernels capped (`isa.*`), so the portable gather is checked on
// a machine whose default is the AVX-512 one.

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

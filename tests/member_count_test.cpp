// member_count (the CPU's run-time POPCNT count of an expert set) against a count of
// contains() written here, on sets of every density; CTest also runs it with the kernels
// capped to the portable level, where it is expert_set::size()'s SWAR.

#include <random>

#include <doctest/doctest.h>
#include <moe_routing/cpu/simd/member_count.hpp>

namespace {
namespace mr = moe_routing;

int naive_count(const mr::expert_set& set) {
  int total = 0;
  for (int e = 0; e < mr::max_experts; ++e) total += set.contains(e) ? 1 : 0;
  return total;
}

}  // namespace

TEST_CASE("member count equals a count of contains() for sets of every density") {
  std::mt19937 random(21);
  mr::expert_set set;
  CHECK(mr::cpu::detail::member_count(set) == 0);
  for (int trial = 0; trial < 200; ++trial) {
    set.clear();
    const int inserts = std::uniform_int_distribution<int>(0, 2 * mr::max_experts)(random);
    std::uniform_int_distribution<int> expert(0, mr::max_experts - 1);
    for (int i = 0; i < inserts; ++i) set.insert(expert(random));
    CHECK(mr::cpu::detail::member_count(set) == naive_count(set));
    CHECK(set.size() == naive_count(set));
  }
  for (int e = 0; e < mr::max_experts; ++e) set.insert(e);
  CHECK(mr::cpu::detail::member_count(set) == mr::max_experts);
}

static_assert(moe_routing::expert_set{}.empty(), "a new expert set is empty, also at compile time");

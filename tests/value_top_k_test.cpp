// top_k_of_values and top_k_of_listed (the CPU's row top-k by value, optionally within an
// expert subset)
// against a plain sort of (value, index) pairs written here. Run once per path the CPU has:
// CTest's isa.portable, isa.avx2 and isa.avx512 runs cap the run-time choice
// (MOE_ROUTING_CPU_ISA), so the expert-by-expert, AVX2 and AVX-512 paths are each checked;
// the native suite runs the best one inlined into -march=native code.

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/cpu/simd/group_score_avx2.hpp>
#include <moe_routing/cpu/simd/key_top_k.hpp>
#include <moe_routing/cpu/simd/value_top_k.hpp>

#include "test_support.hpp"

namespace {
namespace mr = moe_routing;

/// SPEC section 2's order, spelled out: larger values first, NaN below every number,
/// -0 equal to +0, ties to the lower index.
bool ranks_before(float a, int ia, float b, int ib) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

std::vector<int> naive_top(const std::vector<float>& values, int count, const std::vector<bool>& allowed) {
  std::vector<int> order;
  for (int e = 0; e < static_cast<int>(values.size()); ++e) {
    if (allowed[static_cast<std::size_t>(e)]) order.push_back(e);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return ranks_before(values[static_cast<std::size_t>(a)], a, values[static_cast<std::size_t>(b)], b);
  });
  order.resize(std::min<std::size_t>(order.size(), static_cast<std::size_t>(count)));
  return order;
}

/// Scores with many ties, signed zeros, infinities, NaN and subnormals.
float awkward_value(std::mt19937& rng) {
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0:
      return NAN;
    case 1:
      return std::uniform_int_distribution<int>(0, 1)(rng) ? INFINITY : -INFINITY;
    case 2:
      return std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0f : -0.0f;
    case 3:
      return static_cast<float>(std::uniform_int_distribution<int>(-3, 3)(rng));  // ties
    case 4:
      return std::ldexp(1.0f, -140) * static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(rng));
    default:
      return std::normal_distribution<float>(0.0f, 4.0f)(rng);
  }
}

/// Stores `values` as Element (followed by poison that must never be read) and returns
/// what each stored element decodes to, with the test's own decoders.
template <class Element>
std::vector<float> store(const std::vector<float>& values, std::vector<Element>& out) {
  out.clear();
  std::vector<float> seen;
  for (const float v : values) {
    if constexpr (std::is_same_v<Element, float>) {
      out.push_back(v);
      seen.push_back(v);
    } else if constexpr (std::is_same_v<Element, mr::bfloat16>) {
      out.push_back(mr::to_bfloat16(v));
      seen.push_back(test::decode_bf16(out.back().bits));
    } else {
      out.push_back(mr::to_float16(v));
      seen.push_back(test::decode_f16(out.back().bits));
    }
  }
  return seen;
}

template <class Element>
void check_random_rows(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const int sizes[] = {2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 128, 255, 256, 513, 1024};
  std::vector<Element> row;
  for (int trial = 0; trial < 3000; ++trial) {
    const int experts = sizes[std::uniform_int_distribution<int>(0, std::size(sizes) - 1)(rng)];
    const int count = std::uniform_int_distribution<int>(1, std::min(experts, mr::max_top_k))(rng);
    const bool awkward = trial % 3 == 0;
    std::vector<float> values(static_cast<std::size_t>(experts));
    for (auto& v : values) v = awkward ? awkward_value(rng) : std::normal_distribution<float>(0.0f, 2.0f)(rng);
    const std::vector<float> seen = store(values, row);
    // Only the row's own elements may be read: a copy of exactly that size under ASan.
    const std::vector<Element> exact(row.begin(), row.end());

    const int subset_kind = trial % 4;  // every expert, a random subset, a sparse subset, none
    mr::expert_set subset;
    std::vector<bool> allowed(static_cast<std::size_t>(experts), subset_kind == 0);
    if (subset_kind == 1 || subset_kind == 2) {
      const double chance = subset_kind == 1 ? 0.5 : 0.03;
      for (int e = 0; e < experts; ++e) {
        if (std::bernoulli_distribution(chance)(rng)) {
          subset.insert(e);
          allowed[static_cast<std::size_t>(e)] = true;
        }
      }
    }
    CAPTURE(trial);
    CAPTURE(experts);
    CAPTURE(count);
    CAPTURE(subset_kind);
    mr::rank_key keys[mr::max_top_k];
    const int got = mr::cpu::top_k_of_values(exact.data(), experts, count, keys, subset_kind == 0 ? nullptr : &subset);
    const std::vector<int> want = naive_top(seen, count, allowed);
    REQUIRE(got == static_cast<int>(want.size()));
    for (int j = 0; j < got; ++j) {
      CAPTURE(j);
      REQUIRE(mr::expert_of(keys[j]) == want[static_cast<std::size_t>(j)]);
    }
    // The same subset by list, where it is small enough.
    std::vector<std::int32_t> listed;
    for (int e = 0; e < experts; ++e) {
      if (allowed[static_cast<std::size_t>(e)]) listed.push_back(e);
    }
    if (subset_kind != 0 && static_cast<int>(listed.size()) <= mr::cpu::max_listed) {
      mr::rank_key listed_keys[mr::max_top_k];
      const int listed_got =
          mr::cpu::top_k_of_listed(exact.data(), listed.data(), static_cast<int>(listed.size()), count, listed_keys);
      REQUIRE(listed_got == static_cast<int>(want.size()));
      for (int j = 0; j < listed_got; ++j) {
        CAPTURE(j);
        REQUIRE(mr::expert_of(listed_keys[j]) == want[static_cast<std::size_t>(j)]);
      }
      // Only those ranked after a pivot expert (refine's search past a token's top-k).
      const int pivot = std::uniform_int_distribution<int>(0, experts - 1)(rng);
      std::vector<bool> after_pivot(allowed);
      for (int e = 0; e < experts; ++e) {
        after_pivot[static_cast<std::size_t>(e)] =
            after_pivot[static_cast<std::size_t>(e)] &&
            ranks_before(seen[static_cast<std::size_t>(pivot)], pivot, seen[static_cast<std::size_t>(e)], e);
      }
      const std::vector<int> want_after = naive_top(seen, count, after_pivot);
      const int after_got =
          mr::cpu::top_k_of_listed(exact.data(), listed.data(), static_cast<int>(listed.size()), count, listed_keys,
                                   mr::make_rank_key(seen[static_cast<std::size_t>(pivot)], pivot));
      REQUIRE(after_got == static_cast<int>(want_after.size()));
      for (int j = 0; j < after_got; ++j) {
        CAPTURE(j);
        REQUIRE(mr::expert_of(listed_keys[j]) == want_after[static_cast<std::size_t>(j)]);
      }
    }
  }
}

}  // namespace

TEST_CASE("value top-k matches a full sort of (value, index), float32") { check_random_rows<float>(11); }
TEST_CASE("value top-k matches a full sort of (value, index), bfloat16") { check_random_rows<mr::bfloat16>(12); }
TEST_CASE("value top-k matches a full sort of (value, index), float16") { check_random_rows<mr::float16>(13); }

TEST_CASE("value top-k, worked examples") {
  mr::rank_key keys[mr::max_top_k];
  const auto ids = [&](int n) {
    std::vector<int> out;
    for (int j = 0; j < n; ++j) out.push_back(mr::expert_of(keys[j]));
    return out;
  };
  // -0 ties +0 (lower index first); NaN last; +inf first.
  const std::vector<float> a = {0.0f, NAN, -0.0f, INFINITY, -1.0f};
  REQUIRE(mr::cpu::top_k_of_values(a.data(), 5, 5, keys) == 5);
  CHECK(ids(5) == std::vector<int>{3, 0, 2, 4, 1});
  // Asked for more than the row has: every expert, and the count says so on every path (the
  // expert-by-expert one said `count` until 2026-11-27).
  REQUIRE(mr::cpu::top_k_of_values(a.data(), 5, 8, keys) == 5);
  CHECK(ids(5) == std::vector<int>{3, 0, 2, 4, 1});
  // 17 experts: the best is the one past the first 16-wide block, and ties to index.
  std::vector<float> b(17, 1.0f);
  b[16] = 2.0f;
  REQUIRE(mr::cpu::top_k_of_values(b.data(), 17, 3, keys) == 3);
  CHECK(ids(3) == std::vector<int>{16, 0, 1});
  // Within {5, 40, 63}: ranks 40 (3.0), 5 (1.0), then 63 (NaN), although 0 and 1 are larger.
  std::vector<float> c(64, 9.0f);
  c[5] = 1.0f;
  c[40] = 3.0f;
  c[63] = NAN;
  mr::expert_set s;
  for (const int e : {5, 40, 63}) s.insert(e);
  REQUIRE(mr::cpu::top_k_of_values(c.data(), 64, 8, keys, &s) == 3);
  CHECK(ids(3) == std::vector<int>{40, 5, 63});
  // An empty subset finds nothing.
  const mr::expert_set none;
  REQUIRE(mr::cpu::top_k_of_values(c.data(), 64, 2, keys, &none) == 0);
}

TEST_CASE("value top-k of whole rows of rank keys (the scoring pass's) matches a sort, on every path") {
  // Keys as score_row writes them: rank keys of awkward values, some rows with whole groups
  // excluded, ranked by top_k_of_keys_dispatched (AVX2 where the CPU has it) and by the
  // one-by-one scan, each against a sort of the keys.
  std::mt19937 rng(31);
  for (int trial = 0; trial < 3000; ++trial) {
    const int experts = std::uniform_int_distribution<int>(1, 300)(rng);
    const int count = std::uniform_int_distribution<int>(1, std::min(experts, mr::max_top_k))(rng);
    std::vector<mr::rank_key> keys(static_cast<std::size_t>(experts));
    for (int e = 0; e < experts; ++e) keys[static_cast<std::size_t>(e)] = mr::make_rank_key(awkward_value(rng), e);
    if (trial % 3 == 0) {  // a group limit: every other block of 16 (or fewer) excluded
      for (int e = 0; e < experts; ++e) {
        if ((e / 16) % 2 == 1) keys[static_cast<std::size_t>(e)] = mr::excluded_rank_key(e);
      }
    }
    std::vector<mr::rank_key> sorted = keys;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    sorted.resize(static_cast<std::size_t>(count));
    mr::rank_key dispatched[mr::max_top_k], one_by_one[mr::max_top_k];
    mr::cpu::top_k_of_keys_dispatched(keys.data(), experts, count, dispatched);
    mr::top_k_of_keys(keys.data(), experts, count, one_by_one);
    for (int j = 0; j < count; ++j) {
      REQUIRE(dispatched[j] == sorted[static_cast<std::size_t>(j)]);
      REQUIRE(one_by_one[j] == sorted[static_cast<std::size_t>(j)]);
    }
  }
}

using group_scorer = float (*)(const float*, int, int, mr::group_score);

/// The group scorers this CPU runs: the scalar one, and the AVX2 one where the CPU (and
/// MOE_ROUTING_CPU_ISA) allows it.
std::vector<group_scorer> group_scorers() {
  std::vector<group_scorer> scorers = {[](const float* s, int begin, int end, mr::group_score kind) {
    return mr::detail::score_group(s, begin, end, kind);
  }};
#if MOE_ROUTING_X86_KERNELS
  if (mr::cpu::cpu_runs(mr::cpu::isa_level::avx2)) {
    scorers.push_back([](const float* s, int begin, int end, mr::group_score kind) {
      return mr::cpu::detail::score_group_avx2(s, begin, end, kind);
    });
  }
#endif
  return scorers;
}

TEST_CASE("group scores: the best s of a group, or its two best summed, as a sort of the members finds them") {
  // The scorers take the two best from the members' orders (8 lanes at a time on AVX2); here
  // the members are sorted by SPEC section 2's order and the first one or two are read back.
  std::mt19937 random(31);
  const float pool[] = {1.5f, -0.25f, 0.0f, -0.0f, 3.0f, -7.0f, NAN, HUGE_VALF, -HUGE_VALF, 0x1p-149f, 2.0f, 2.0f};
  std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(pool)) - 1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const auto scorers = group_scorers();
  int checked = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int size = 1 + trial % 40, begin = trial % 3;
    std::vector<float> s(static_cast<std::size_t>(begin + size));
    for (float& v : s) v = trial % 2 == 0 ? pool[pick(random)] : normal(random);
    std::vector<int> members(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) members[static_cast<std::size_t>(i)] = begin + i;
    std::sort(members.begin(), members.end(), [&](int a, int b) {
      return ranks_before(s[static_cast<std::size_t>(a)], a, s[static_cast<std::size_t>(b)], b);
    });
    const float best = s[static_cast<std::size_t>(members[0])];
    const float two = size == 1 ? best : best + s[static_cast<std::size_t>(members[1])];
    for (std::size_t scorer = 0; scorer < scorers.size(); ++scorer) {
      for (const mr::group_score kind : {mr::group_score::max, mr::group_score::top2_sum}) {
        const float expected = kind == mr::group_score::max ? best : two;
        const float got = scorers[scorer](s.data(), begin, begin + size, kind);
        CAPTURE(scorer);
        CAPTURE(trial);
        CAPTURE(size);
        CAPTURE(expected);
        CAPTURE(got);
        // Group keys compare scores by their order: -0 and +0 alike, every NaN alike.
        CHECK(mr::score_order(got) == mr::score_order(expected));
        ++checked;
      }
    }
  }
  CHECK(checked == 8000 * static_cast<int>(scorers.size()));
}

TEST_CASE("group scores, worked examples") {
  for (const group_scorer score : group_scorers()) {
    const float s[] = {0.5f, 2.0f, -1.0f, 2.0f, 0.25f, 1.0f, 0.0f, -3.0f, 0.75f, 1.75f};
    // Two members equal to the best (2.0 at 1 and 3): the sum takes both.
    CHECK(score(s, 0, 10, mr::group_score::top2_sum) == 4.0f);
    CHECK(score(s, 0, 10, mr::group_score::max) == 2.0f);
    CHECK(score(s, 2, 10, mr::group_score::top2_sum) == 3.75f);  // 8 members, one a lane: 2.0 + 1.75
    CHECK(score(s, 4, 10, mr::group_score::top2_sum) == 2.75f);  // 6, no whole lane: 1.75 + 1.0
    CHECK(score(s, 7, 8, mr::group_score::top2_sum) == -3.0f);   // one member
    // The best two in one lane of 8 (members 1 and 9 of 16), then the second in another lane.
    float lane[16];
    std::fill(std::begin(lane), std::end(lane), 1.0f);
    lane[1] = 5.0f;
    lane[9] = 4.0f;
    CHECK(score(lane, 0, 16, mr::group_score::top2_sum) == 9.0f);
    lane[15] = 4.5f;
    CHECK(score(lane, 0, 16, mr::group_score::top2_sum) == 9.5f);
    const float with_nan[] = {NAN, -HUGE_VALF, NAN};
    CHECK(score(with_nan, 0, 3, mr::group_score::max) == -HUGE_VALF);     // NaN ranks lowest
    CHECK(std::isnan(score(with_nan, 0, 3, mr::group_score::top2_sum)));  // -inf + NaN
    float all_nan[9];
    std::fill(std::begin(all_nan), std::end(all_nan), NAN);
    all_nan[8] = -0.0f;
    CHECK(mr::score_order(score(all_nan, 0, 9, mr::group_score::max)) == mr::score_order(0.0f));
  }
}

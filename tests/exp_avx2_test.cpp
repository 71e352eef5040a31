// The vector exp of the scoring pass (cpu/simd/exp_avx2.hpp) against the C library's
// std::exp, bit for bit: on a sweep of float bit patterns, at the edges of its range, and
// through score_row, whose p, keys and statistics must not change with it.

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/core/score_row.hpp>
#include <moe_routing/cpu/score_row_path.hpp>
#include <moe_routing/cpu/simd/cpu_features.hpp>
#include <moe_routing/cpu/simd/exp_avx2.hpp>

namespace {
namespace mr = moe_routing;

bool same_bits(float a, float b) {
  if (a != a && b != b) return true;  // any NaN for NaN
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

}  // namespace

#if MOE_ROUTING_X86_KERNELS
#define MOE_ROUTING_TEST_NEEDS_VECTOR_EXP                                                                         \
  doctest::skip(!mr::cpu::cpu_runs(mr::cpu::isa_level::avx2) || !mr::cpu::detail::vector_exp_matches_library()) * \
      doctest::description(                                                                                       \
          "skipped: no AVX2 here (or MOE_ROUTING_CPU_ISA), or this C library's expf is not "                      \
          "glibc's, and the vector exp is not used")

TEST_CASE("vector exp: glibc's expf (2.28 on) is the one it reproduces, so there the vector path is taken" *
          doctest::skip(!mr::cpu::cpu_runs(mr::cpu::isa_level::avx2)) *
          doctest::description("skipped: no AVX2 here (or MOE_ROUTING_CPU_ISA)")) {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 28)
  CHECK(mr::cpu::detail::vector_exp_matches_library());
#else
  MESSAGE("not glibc 2.28 or later: the vector exp is used only if it matched this C library's (it did: "
          << mr::cpu::detail::vector_exp_matches_library() << ")");
#endif
}

TEST_CASE("vector exp gives std::exp's bits over a sweep of every float's bit patterns" *
          MOE_ROUTING_TEST_NEEDS_VECTOR_EXP) {
  std::vector<float> inputs;
  // Every 4093rd bit pattern (a prime stride: every exponent, many mantissas), then the range
  // where exp is finite and non-zero more densely, then inputs that tell FMA and plain
  // evaluations of the same algorithm apart, and the edges.
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 4093) {
    const auto word = static_cast<std::uint32_t>(bits);
    float x;
    std::memcpy(&x, &word, sizeof x);
    inputs.push_back(x);
  }
  for (float x = -104.0f; x < 89.0f; x += 0.000977f) inputs.push_back(x);
  for (const float x : {0x1.04845ep+5f, -0x1.f8cbb2p+5f, 0.0f, -0.0f, HUGE_VALF, -HUGE_VALF, std::nanf(""),
                        0x1.62e42ep6f, std::nextafter(0x1.62e42ep6f, HUGE_VALF), -0x1.9fe368p6f,
                        std::nextafter(-0x1.9fe368p6f, -HUGE_VALF), -88.0f, 88.0f, -87.99999f, 0x1p-149f, -0x1p-149f})
    inputs.push_back(x);
  std::vector<float> vector = inputs;
  mr::cpu::detail::exp_in_place_avx2(vector.data(), static_cast<int>(vector.size()));
  int mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float library = std::exp(inputs[i]);
    if (!same_bits(library, vector[i])) {
      if (++mismatches <= 5) FAIL_CHECK("exp(" << inputs[i] << "): library " << library << ", vector " << vector[i]);
    }
  }
  CHECK(mismatches == 0);
  CHECK(inputs.size() > 1'200'000);
}

TEST_CASE("vector exp leaves a row's tail and everything past it as they were" * MOE_ROUTING_TEST_NEEDS_VECTOR_EXP) {
  for (int count = 0; count <= 19; ++count) {
    std::vector<float> row(static_cast<std::size_t>(count) + 4, 7.0f);
    for (int i = 0; i < count; ++i) row[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i) - 2.0f;
    mr::cpu::detail::exp_in_place_avx2(row.data(), count);
    for (int i = 0; i < count; ++i) {
      CHECK(same_bits(row[static_cast<std::size_t>(i)], std::exp(0.25f * static_cast<float>(i) - 2.0f)));
    }
    for (std::size_t i = static_cast<std::size_t>(count); i < row.size(); ++i) CHECK(row[i] == 7.0f);
  }
}

TEST_CASE("score_row with the vector exp: the same p, keys and statistics as with the library's" *
          MOE_ROUTING_TEST_NEEDS_VECTOR_EXP) {
  std::mt19937 random(21);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  using mr::cpu::isa_level;
  std::vector<mr::cpu::detail::score_row_path> paths = {{isa_level::portable, false}};
  for (const isa_level width : {isa_level::avx2, isa_level::avx512}) {
    if (!mr::cpu::cpu_runs(width)) continue;
    paths.push_back({width, false});
    paths.push_back({width, true});
  }
  for (const int experts : {7, 64, 256}) {
    std::vector<float> bias(static_cast<std::size_t>(experts));
    for (float& b : bias) b = small(random);
    for (const mr::scoring mode : {mr::scoring::softmax, mr::scoring::sigmoid}) {
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> row(static_cast<std::size_t>(experts));
        for (float& x : row) x = logit(random);
        if (trial % 4 == 1) row[3] = NAN;
        if (trial % 4 == 2) row[5] = -HUGE_VALF;
        if (trial % 8 == 3) row[1] = -250.0f;  // exp(-x) past its overflow for the sigmoid, 0 for the softmax
        const bool with_bias = trial % 2 == 0 && mode == mr::scoring::sigmoid;
        mr::group_limit groups;
        if (experts % 8 == 0 && trial % 3 == 0) groups = {.n_group = 8, .topk_group = 4};
        const auto n = static_cast<std::size_t>(experts);
        std::vector<float> p_library(n), p_vector(n), s_library(n), s_vector(n);
        std::vector<mr::rank_key> keys_library(n), keys_vector(n);
        const mr::row_stats a =
            mr::score_row(row.data(), experts, mode, with_bias ? bias.data() : nullptr, groups, p_library.data(),
                          keys_library.data(), s_library.data(), mr::library_exp{});
        // The vector exp as such, and then every compiled path the scoring pass can take here.
        for (int path = -1; path < static_cast<int>(paths.size()); ++path) {
          CAPTURE(path);
          const mr::row_stats b =
              path < 0
                  ? mr::score_row(row.data(), experts, mode, with_bias ? bias.data() : nullptr, groups, p_vector.data(),
                                  keys_vector.data(), s_vector.data(), mr::cpu::detail::vector_exp{})
                  : mr::cpu::detail::score_row_on(paths[static_cast<std::size_t>(path)], row.data(), experts, mode,
                                                  with_bias ? bias.data() : nullptr, groups, p_vector.data(),
                                                  keys_vector.data(), s_vector.data());
          for (std::size_t e = 0; e < n; ++e) {
            CHECK(same_bits(p_library[e], p_vector[e]));
            CHECK(keys_library[e] == keys_vector[e]);
          }
          CHECK(same_bits(a.max_logit, b.max_logit));
          CHECK(same_bits(a.denominator, b.denominator));
          CHECK(same_bits(a.candidate_total, b.candidate_total));
          CHECK(same_bits(a.max_candidate_p, b.max_candidate_p));
          // And what probability_of recomputes later, from the statistics, is the pass's p.
          for (std::size_t e = 0; e < n; ++e) {
            CHECK(same_bits(mr::probability_of(mode, row[e], b), p_vector[e]));
          }
        }
      }
    }
  }
}

TEST_CASE("the scoring pass's path: the widest the CPU runs, with the vector exps only when rounding to nearest" *
          MOE_ROUTING_TEST_NEEDS_VECTOR_EXP) {
  using mr::cpu::isa_level;
  const isa_level widest = mr::cpu::cpu_runs(isa_level::avx512) ? isa_level::avx512 : isa_level::avx2;
  const mr::cpu::detail::score_row_path nearest = mr::cpu::detail::choose_score_row_path();
  CHECK(nearest.width == widest);
  CHECK(nearest.vector_exp);
  const int mode = std::fegetround();
  for (const int other : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    REQUIRE(std::fesetround(other) == 0);
    const mr::cpu::detail::score_row_path path = mr::cpu::detail::choose_score_row_path();
    std::fesetround(mode);
    CAPTURE(other);
    CHECK(path.width == widest);
    CHECK_FALSE(path.vector_exp);  // glibc's expf rounds its overflow and underflow by the mode
  }
}
#endif

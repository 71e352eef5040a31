// The row kernels' epilogue (`cpu/simd/four_lane_sums.hpp`): four accumulators' lane sums at
// once, against a loop over the 16 lanes written here. Small integers are exact in float in
// any order of addition, so those sums must match exactly; random values within the rounding
// any order of 16 float additions may give (16 ulp of the sum of magnitudes).

#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <random>

#include <doctest/doctest.h>
#include <moe_routing/cpu/simd/cpu_features.hpp>
#include <moe_routing/cpu/simd/four_lane_sums.hpp>

#if MOE_ROUTING_X86_KERNELS
namespace {
namespace mr = moe_routing;

using lanes = std::array<float, 16>;

float naive_sum(const lanes& v) {
  double sum = 0;
  for (const float x : v) sum += x;
  return static_cast<float>(sum);
}

float magnitude_sum(const lanes& v) {
  float sum = 0;
  for (const float x : v) sum += std::fabs(x);
  return sum;
}

MOE_ROUTING_TARGET_AVX512 std::array<float, 4> four_sums(const std::array<lanes, 4>& v) {
  std::array<float, 4> out{};
  _mm_storeu_ps(out.data(),
                mr::cpu::detail::four_lane_sums(_mm512_loadu_ps(v[0].data()), _mm512_loadu_ps(v[1].data()),
                                                _mm512_loadu_ps(v[2].data()), _mm512_loadu_ps(v[3].data())));
  return out;
}

MOE_ROUTING_TARGET_AVX512 void tile_of_three(const std::array<std::array<lanes, 3>, 4>& v, float (&sums)[4][6]) {
  __m512 acc[4][3];
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 3; ++t) acc[i][t] = _mm512_loadu_ps(v[i][t].data());
  }
  mr::cpu::detail::store_lane_sums(acc, sums);
}

}  // namespace

#define MOE_ROUTING_TEST_NEEDS_AVX512                             \
  doctest::skip(!mr::cpu::cpu_runs(mr::cpu::isa_level::avx512)) * \
      doctest::description("skipped: this CPU (or MOE_ROUTING_CPU_ISA) runs no AVX-512")
#else
#define MOE_ROUTING_TEST_NEEDS_AVX512 \
  doctest::skip() * doctest::description("skipped: the AVX-512 kernels are built for x86-64 only")
#endif

TEST_CASE("four lane sums equal a loop over the lanes, each in its own place" * MOE_ROUTING_TEST_NEEDS_AVX512) {
#if MOE_ROUTING_X86_KERNELS
  std::mt19937 random(4);
  std::uniform_int_distribution<int> small(-1000, 1000);
  std::normal_distribution<float> wide(0.0f, 100.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const bool exact = trial % 2 == 0;
    std::array<lanes, 4> v{};
    for (auto& vector : v) {
      for (float& x : vector) x = exact ? static_cast<float>(small(random)) : wide(random);
    }
    const auto sums = four_sums(v);
    for (int i = 0; i < 4; ++i) {
      CAPTURE(i);
      if (exact) {
        CHECK(sums[static_cast<std::size_t>(i)] == naive_sum(v[static_cast<std::size_t>(i)]));
      } else {
        const lanes& row = v[static_cast<std::size_t>(i)];
        CHECK(std::fabs(sums[static_cast<std::size_t>(i)] - naive_sum(row)) <= 16 * FLT_EPSILON * magnitude_sum(row));
      }
    }
  }
#endif
}

TEST_CASE("a tile's lane sums land at [row][token], the rest of the sums untouched" * MOE_ROUTING_TEST_NEEDS_AVX512) {
#if MOE_ROUTING_X86_KERNELS
  std::array<std::array<lanes, 3>, 4> v{};
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 3; ++t) {
      for (int l = 0; l < 16; ++l) v[i][t][l] = static_cast<float>(100 * i + 10 * t + (l == 5 ? 1 : 0));
    }
  }
  float sums[4][6];
  for (auto& row : sums) {
    for (float& s : row) s = -1.0f;
  }
  tile_of_three(v, sums);
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 6; ++t) {
      CAPTURE(i);
      CAPTURE(t);
      // Hand-worked: 16 lanes of 100i + 10t, plus 1 in lane 5.
      CHECK(sums[i][t] == (t < 3 ? static_cast<float>(16 * (100 * i + 10 * t) + 1) : -1.0f));
    }
  }
#endif
}

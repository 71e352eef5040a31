// The CPU executor's SwiGLU (`cpu/executor/swiglu.hpp`): its e^v against std::exp in double
// over the whole range it promises (every 1/64 from -87 to 88, and random values), within the
// 2 ulp it states; its argument's clamp (every float class); silu's limits and NaN; and a few
// values worked by hand.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <doctest/doctest.h>
#include <moe_routing/cpu/executor/swiglu.hpp>

namespace {
namespace mr = moe_routing;

/// |approximate - exact| in units of the float spacing at `exact`.
double ulps_from(float approximate, double exact) {
  const double spacing =
      std::nextafter(static_cast<float>(exact), std::numeric_limits<float>::infinity()) - static_cast<float>(exact);
  return std::fabs(static_cast<double>(approximate) - exact) / spacing;
}

}  // namespace

TEST_CASE("exp_for_silu is within 2 ulp of e^v over [-87, 88]") {
  double worst = 0;
  float worst_at = 0;
  const auto check = [&](float v) {
    const double error = ulps_from(mr::cpu::exp_for_silu(v), std::exp(static_cast<double>(v)));
    if (!(error <= worst)) worst = error, worst_at = v;  // a NaN error counts as the worst
  };
  for (int i = -87 * 64; i <= 88 * 64; ++i) check(static_cast<float>(i) / 64);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> any(-87.0f, 88.0f), small(-1.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) check(i % 2 == 0 ? any(rng) : small(rng));
  CAPTURE(worst_at);
  CHECK(worst <= 2.0);
}

TEST_CASE("exp_for_silu by hand: e^0, e^1, e^ln2, and the clamped ends") {
  CHECK(mr::cpu::exp_for_silu(0.0f) == 1.0f);
  CHECK(ulps_from(mr::cpu::exp_for_silu(1.0f), 2.718281828459045) <= 1.0);
  CHECK(ulps_from(mr::cpu::exp_for_silu(0.6931471805599453f), 2.0) <= 1.0);
  // Beyond [-87, 88] the argument is the range's end: finite, never 0 or infinity.
  CHECK(mr::cpu::exp_for_silu(1000.0f) == mr::cpu::exp_for_silu(88.0f));
  CHECK(std::isfinite(mr::cpu::exp_for_silu(std::numeric_limits<float>::infinity())));
  CHECK(mr::cpu::exp_for_silu(-1000.0f) > 0.0f);
  CHECK(mr::cpu::exp_for_silu(-1000.0f) == mr::cpu::exp_for_silu(-87.0f));
  CHECK(mr::cpu::exp_for_silu(-std::numeric_limits<float>::infinity()) == mr::cpu::exp_for_silu(-87.0f));
  CHECK(std::isnan(mr::cpu::exp_for_silu(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("clamp_for_exp keeps [-87, 88] and NaN bit for bit and takes the ends beyond") {
  const auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  constexpr float subnormal = std::numeric_limits<float>::denorm_min();
  const float payload_nan = std::bit_cast<float>(0x7fa00001u);
  for (const float v : {0.0f, -0.0f, subnormal, -subnormal, 1e-30f, -1e-30f, 1.5f, -87.0f, 88.0f, -86.99999f, 87.99999f,
                        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(), payload_nan}) {
    CHECK(bits(mr::cpu::clamp_for_exp(v)) == bits(v));
  }
  CHECK(mr::cpu::clamp_for_exp(-87.00001f) == -87.0f);
  CHECK(mr::cpu::clamp_for_exp(88.00001f) == 88.0f);
  CHECK(mr::cpu::clamp_for_exp(-std::numeric_limits<float>::infinity()) == -87.0f);
  CHECK(mr::cpu::clamp_for_exp(std::numeric_limits<float>::infinity()) == 88.0f);
  CHECK(mr::cpu::clamp_for_exp(std::numeric_limits<float>::max()) == 88.0f);
  CHECK(mr::cpu::clamp_for_exp(-std::numeric_limits<float>::max()) == -87.0f);
}

TEST_CASE("swiglu: silu(gate) x up against the formula in double, its limits, and NaN") {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> value(-30.0f, 30.0f);
  for (int i = 0; i < 100000; ++i) {
    const float gate = value(rng), up = value(rng);
    const double exact = gate / (1.0 + std::exp(-static_cast<double>(gate))) * up;
    CHECK(std::fabs(mr::cpu::swiglu(gate, up) - exact) <= 4e-7 * std::fabs(exact) + 1e-30);
  }
  // silu(0) = 0; silu(2) = 2 / (1 + e^-2) = 1.7615941559557649 (worked by hand).
  CHECK(mr::cpu::swiglu(0.0f, 5.0f) == 0.0f);
  CHECK(mr::cpu::swiglu(2.0f, 1.0f) == doctest::Approx(1.7615941559557649).epsilon(1e-7));
  // Far out: silu(v) -> v for large v, -> 0 for very negative v.
  CHECK(mr::cpu::swiglu(100.0f, 1.0f) == 100.0f);
  CHECK(std::fabs(mr::cpu::swiglu(-100.0f, 1.0f)) < 1e-35f);
  // Beyond -88, e^-gate is e^88: gate x 6.1e-39 (documented), not the formula's 0.
  CHECK(std::fabs(mr::cpu::swiglu(-200.0f, 1.0f)) <= 200 * 6.1e-39f);
  CHECK(mr::cpu::swiglu(std::numeric_limits<float>::infinity(), 1.0f) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(mr::cpu::swiglu(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
  CHECK(std::isnan(mr::cpu::swiglu(1.0f, std::numeric_limits<float>::quiet_NaN())));
}

// The sums that only scale weights (softmax denominator, candidate total; SPEC preamble)
// are `weight_sum`s: double precision, rounded once. Issue #22: at E = 1024 a float sum
// moves with its order by more than the 1e-6 the backends must agree within, so the
// CUDA warp (32 lane partials and a tree) and the CPU (serial) gave different raw weights.
// These tests replay that shape (seed 11, topk(k=6,weights=raw), n = 38, E = 1024, bf16)
// on the CPU against a softmax computed here in double precision, and emulate the warp's
// order on the host to show that the order no longer matters.

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <moe_routing/core/weight_sum.hpp>
#include <moe_routing/cpu.hpp>
#include <moe_routing/moe_routing.hpp>

#include "naive_router.hpp"
#include "plan_checks.hpp"
#include "test_support.hpp"

namespace {

namespace mr = moe_routing;

/// The issue's shape: n = 38 rows of E = 1024 bf16 logits, normal with `spread`, seed 11.
test::problem issue_problem(float spread) {
  std::mt19937 rng(11);
  std::vector<float> values(38 * 1024);
  for (float& v : values) v = std::normal_distribution<float>(0.0f, spread)(rng);
  test::problem p = test::problem_from_rows(values, 1024, 6);
  p.type = test::element::bf16;
  test::store_scores(p, values);  // again, now rounded to bf16 (p.ref.x holds what the rows hold)
  return p;
}

/// Softmax of one row in double precision, written here: exp and sum in double.
std::vector<double> softmax_in_double(const float* x, int experts) {
  double m = -INFINITY;
  for (int e = 0; e < experts; ++e) m = std::max(m, static_cast<double>(x[e]));
  std::vector<double> p(static_cast<std::size_t>(experts));
  double sum = 0;
  for (int e = 0; e < experts; ++e) sum += p[static_cast<std::size_t>(e)] = std::exp(static_cast<double>(x[e]) - m);
  for (double& v : p) v /= sum;
  return p;
}

double relative_difference(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b)); }

/// A row's exp(x - max) terms as float, as every backend computes them.
std::vector<float> exp_terms(const float* x, int experts) {
  const float m = *std::max_element(x, x + experts);
  std::vector<float> terms(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) terms[static_cast<std::size_t>(e)] = std::exp(x[e] - m);
  return terms;
}

/// The CUDA warp's order (warp_row.cuh): lane l sums experts l, l + 32, ..., then a
/// butterfly over the 32 lane partials (what __shfl_xor_sync leaves in lane 0).
template <class Accumulator, class Add, class Merge>
Accumulator warp_order_sum(const std::vector<float>& terms, Add add, Merge merge) {
  std::vector<Accumulator> lanes(32);
  for (std::size_t e = 0; e < terms.size(); ++e) add(lanes[e % 32], terms[e]);
  for (int offset = 16; offset > 0; offset /= 2) {
    std::vector<Accumulator> next = lanes;
    for (int l = 0; l < 32; ++l) merge(next[static_cast<std::size_t>(l)], lanes[static_cast<std::size_t>(l ^ offset)]);
    lanes = next;
  }
  return lanes[0];
}

}  // namespace

TEST_CASE("raw softmax weights at E = 1024 equal a double-precision softmax within 1e-6 relative (issue #22)") {
  // With a float denominator summed serially (the CPU before issue #22) rows of spread 1
  // and 2 miss by up to 1.5e-6.
  const mr::runtime_policy policy = mr::parse_policy_or_throw("topk(k=6,weights=raw)");
  for (const float spread : {0.25f, 1.0f, 2.0f}) {
    const test::problem p = issue_problem(spread);
    const mr::routing_plan plan = test::route_problem(p, policy);
    double worst = 0;
    for (int i = 0; i < p.ref.n; ++i) {
      const std::vector<double> exact = softmax_in_double(&p.ref.x[static_cast<std::size_t>(i) * 1024], 1024);
      REQUIRE(plan.count(i) == 6);
      for (int j = 0; j < 6; ++j) {
        const double expected = exact[static_cast<std::size_t>(plan.id(i, j))];
        worst = std::max(worst, relative_difference(plan.weight(i, j), expected));
      }
    }
    CAPTURE(spread);
    CHECK(worst <= 1e-6);
  }
}

TEST_CASE("raw softmax weights at E = 1024 are the naive router's (written from SPEC alone)") {
  const mr::runtime_policy policy = mr::parse_policy_or_throw("topk(k=6,weights=raw)");
  for (const float spread : {0.25f, 1.0f, 2.0f}) {
    CAPTURE(spread);
    const test::problem p = issue_problem(spread);
    test::check_against_naive(test::route_problem(p, policy), naive::route(p.ref, test::to_naive(policy), p.top_k),
                              "topk(k=6,weights=raw)");
  }
}

TEST_CASE("a weight_sum gives the same float, or the next one, in the CPU's order and the CUDA warp's") {
  // Float sums of these very rows differ by more than 1e-6 between the two orders (the
  // issue's finding, checked here so that the case stays one that can fail); weight_sums
  // agree to one float rounding step.
  double float_worst = 0, double_worst = 0;
  for (const float spread : {0.25f, 1.0f, 2.0f}) {
    const test::problem p = issue_problem(spread);
    for (int i = 0; i < p.ref.n; ++i) {
      const std::vector<float> terms = exp_terms(&p.ref.x[static_cast<std::size_t>(i) * 1024], 1024);
      float serial_float = 0;
      mr::weight_sum serial;
      for (const float t : terms) {
        serial_float += t;
        serial.add(t);
      }
      const float warp_float = warp_order_sum<float>(
          terms, [](float& a, float t) { a += t; }, [](float& a, float b) { a += b; });
      const mr::weight_sum warp = warp_order_sum<mr::weight_sum>(
          terms, [](mr::weight_sum& a, float t) { a.add(t); },
          [](mr::weight_sum& a, const mr::weight_sum& b) { a.merge(b); });
      const auto ulps = std::bit_cast<std::int32_t>(serial.rounded()) - std::bit_cast<std::int32_t>(warp.rounded());
      CHECK(std::abs(ulps) <= 1);
      float_worst = std::max(float_worst, relative_difference(serial_float, warp_float));
      double_worst = std::max(double_worst, relative_difference(serial.rounded(), warp.rounded()));
    }
  }
  CHECK(float_worst > 1e-6);
  CHECK(double_worst < 1.2e-7);
}

TEST_CASE("a weight_sum rounds once: hand-worked sums") {
  // 2^24 + 1 + 1: a float accumulator loses both ones (each lands on a tie, rounded to
  // even); the double keeps them and rounds 2^24 + 2 once, exactly.
  mr::weight_sum sum;
  float naive_sum = 0;
  for (const float t : {16777216.0f, 1.0f, 1.0f}) {
    sum.add(t);
    naive_sum += t;
  }
  CHECK(naive_sum == 16777216.0f);
  CHECK(sum.rounded() == 16777218.0f);
  mr::weight_sum left, right;
  left.add(0.1f);
  right.add(0.2f);
  left.merge(right);
  CHECK(left.value == static_cast<double>(0.1f) + static_cast<double>(0.2f));
  CHECK(mr::weight_sum{}.rounded() == 0.0f);
}

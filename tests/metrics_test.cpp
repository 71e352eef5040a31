// Plan metrics against figures computed by hand on the hand-example table.

#include <moe_routing/metrics/plan_metrics.hpp>

#include "plan_checks.hpp"

TEST_CASE("metrics of OEA(k0=1) on the hand-example table") {
  namespace mr = test::mr;
  const std::vector<float> table = {0.50f, 0.30f, 0.10f, 0.05f, 0.03f, 0.02f,  //
                                    0.05f, 0.40f, 0.35f, 0.10f, 0.06f, 0.04f,  //
                                    0.02f, 0.03f, 0.05f, 0.60f, 0.20f, 0.10f};
  const std::vector<std::int32_t> placement = {0, 0, 0, 1, 1, 1};
  mr::routing_batch<float> batch{mr::make_score_view(table.data(), 3, 6)};
  batch.mode = mr::scoring::probabilities;
  batch.placement = placement.data();
  batch.device_count = 2;
  mr::cpu::workspace ws({3, 6, 3});
  mr::routing_plan vanilla({.tokens = 3, .experts = 6, .top_k = 3, .devices = 2}),
      oea({.tokens = 3, .experts = 6, .top_k = 3, .devices = 2});
  REQUIRE(mr::cpu::route(mr::presets::vanilla(3), batch, vanilla.view(), ws).ok());
  REQUIRE(mr::cpu::route(mr::presets::oea(1, 3), batch, oea.view(), ws).ok());
  // OEA rows: {0,1,3} {1,3,0} {3,1,0}; vanilla rows {0,1,2} {1,2,3} {3,4,5}.
  const mr::plan_metrics m = mr::measure_plan(batch, oea, vanilla, {2.0, 0.5});
  CHECK(m.valid_tokens == 3);
  CHECK(m.active == 3);
  CHECK(m.vanilla_active == 6);
  CHECK(m.selected == 3);
  // retained: t0 .85/.9, t1 .55/.85, t2 .65/.9
  CHECK(m.mean_retained_mass == doctest::Approx((0.85 / 0.9 + 0.55 / 0.85 + 0.65 / 0.9) / 3).epsilon(1e-5));
  CHECK(m.min_retained_mass == doctest::Approx(0.55 / 0.85).epsilon(1e-5));
  REQUIRE(m.retained_mass.size() == 3);
  CHECK(m.retained_mass[0] == doctest::Approx(0.85 / 0.9).epsilon(1e-5));
  CHECK(m.retained_mass[2] == doctest::Approx(0.65 / 0.9).epsilon(1e-5));
  // recall: t0 {0,1} of {0,1,2}; t1 {1,3}; t2 {3}
  CHECK(m.mean_recall == doctest::Approx((2.0 / 3 + 2.0 / 3 + 1.0 / 3) / 3));
  CHECK(m.guarantees_held);
  CHECK(m.max_device_load == 2);  // {0,1} on device 0, {3} on device 1
  CHECK(m.assignments == 9);
  // T = 3 * 2 + 9 * 0.5 = 10.5; vanilla 6 * 2 + 9 * 0.5 = 16.5
  CHECK(m.modelled_latency == doctest::Approx(10.5));
  CHECK(m.modelled_latency_ratio == doctest::Approx(10.5 / 16.5));
}

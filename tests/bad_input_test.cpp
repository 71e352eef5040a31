// Bad input gets a status (or, in the convenience layer, an exception) whose message
// names the parameter and its value; non-finite scores never produce a bad weight.

#include <limits>

#include "backends/cpu_backend_runner.hpp"
#include "bodies/bad_input_table.hpp"
#include "plan_checks.hpp"

namespace {
namespace mr = test::mr;
}  // namespace

// The table of broken calls and their messages (tests/bodies/bad_input_table.hpp), shared
// with the CUDA backend (tests/cuda/backend_bodies_test.cu).
MOE_ROUTING_BAD_INPUT_TESTS(test::cpu_backend_runner)

TEST_CASE("an error about an array entry names the entry: its index letters replaced by the indices") {
  const auto message = [](const char* parameter, const char* bound_name, std::int32_t first, std::int32_t second) {
    return mr::to_string(
        mr::fail(mr::errc::invalid_input, parameter, 4, "breaks a rule", bound_name, 2).at(first, second));
  };
  CHECK(message("plan.ids[i][j]", nullptr, 3, 1) == "invalid input: plan.ids[3][1] = 4: breaks a rule");
  // A letter in the bound's name that the parameter has reads the same number.
  CHECK(message("table[e][r]", "counts[e]", 7, 0) == "invalid input: table[7][0] = 4: breaks a rule counts[7] = 2");
  // Letters are given their indices in the order they are met, the bound's name last.
  CHECK(message("a[r]", "b[e]", 5, 9) == "invalid input: a[5] = 4: breaks a rule b[9] = 2");
  // An offset after the letter is added to its index.
  CHECK(message("segments[r+1]", "segments[r]", 2, -1) ==
        "invalid input: segments[3] = 4: breaks a rule segments[2] = 2");
  CHECK(message("a[k-1]", nullptr, 2, -1) == "invalid input: a[1] = 4: breaks a rule");
  // Letters without a recorded index, and brackets that hold no letter, stay as written.
  CHECK(message("plan.ids[i][j]", nullptr, 3, -1) == "invalid input: plan.ids[3][j] = 4: breaks a rule");
  CHECK(message("segments[R]", "x[0]", 3, -1) == "invalid input: segments[R] = 4: breaks a rule x[0] = 2");
  CHECK(mr::to_string(mr::fail(mr::errc::invalid_input, "placement[e]", 4, "breaks a rule")) ==
        "invalid input: placement[e] = 4: breaks a rule");
}

TEST_CASE("the convenience router throws routing_error with the same message") {
  CHECK_THROWS_WITH_AS(
      mr::cpu::router(mr::presets::oea(6, 4), {4, 16, 4}),
      "invalid parameter: prune.k0 = 6: must be at most the experts each token is assigned, refine.k = 4",
      mr::routing_error);
  CHECK_THROWS_WITH_AS(mr::cpu::router(mr::presets::oea(2, 4), {4, 16, 40}),
                       "invalid parameter: top_k = 40: must be in [1, max_top_k] max_top_k = 32", mr::routing_error);
  mr::cpu::router router(mr::presets::oea(2, 4), {4, 16, 4});
  std::vector<float> scores(5 * 16, 0.1f);
  mr::routing_batch<float> too_many{mr::make_score_view(scores.data(), 5, 16)};
  CHECK_THROWS_WITH_AS(router.route(too_many),
                       "workspace too small: workspace.max_tokens = 4: must be at least batch.n = 5",
                       mr::routing_error);
  mr::routing_batch<float> fine{mr::make_score_view(scores.data(), 4, 16)};
  CHECK(router.route(fine).summary().active_count >= 1);
}

TEST_CASE("sizes are refused before anything is allocated for them") {
  CHECK_THROWS_WITH_AS(mr::routing_plan({.tokens = -1, .experts = 16, .top_k = 4}),
                       "invalid parameter: routing_plan.tokens = -1: must be in [0, max_tokens] max_tokens = 16384",
                       mr::routing_error);
  CHECK_THROWS_WITH_AS(mr::routing_plan({.tokens = 4, .experts = 16, .top_k = 0}),
                       "invalid parameter: routing_plan.top_k = 0: must be in [1, max_top_k] max_top_k = 32",
                       mr::routing_error);
  CHECK_THROWS_WITH_AS(
      mr::routing_plan({.tokens = 4, .experts = 1 << 30, .top_k = 4}),
      "invalid parameter: routing_plan.experts = 1073741824: must be in [2, max_experts] max_experts = 1024",
      mr::routing_error);
  CHECK_THROWS_WITH_AS(mr::routing_plan({.tokens = 4, .experts = 16, .top_k = 4, .devices = -2}),
                       "invalid parameter: routing_plan.devices = -2: must be in [0, max_experts] max_experts = 1024",
                       mr::routing_error);
  CHECK_THROWS_WITH_AS(mr::cpu::workspace({-1, 16, 4}),
                       "invalid parameter: workspace.max_tokens = -1: must be in [0, max_tokens] max_tokens = 16384",
                       mr::routing_error);
  CHECK_THROWS_WITH_AS(mr::cpu::workspace({4, 16, -3}),
                       "invalid parameter: workspace.top_k = -3: must be in [1, max_top_k] max_top_k = 32",
                       mr::routing_error);
  CHECK_THROWS_WITH_AS(mr::cpu::workspace({4, 2000, 4}),
                       "invalid parameter: workspace.experts = 2000: must be in [2, max_experts] max_experts = 1024",
                       mr::routing_error);
}

TEST_CASE("a plan's sizes come in the workspace's order, and the 0.1 order (n, k, E) still builds the same plan") {
  const mr::routing_plan plan(mr::plan_shape{5, 16, 4, 2});  // n, E, k, G: as cpu::workspace({n, E, k})
  CHECK(plan.tokens() == 5);
  CHECK(plan.experts() == 16);
  CHECK(plan.top_k() == 4);
  CHECK(plan.devices() == 2);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const mr::routing_plan old(5, 4, 16, 2);  // deprecated: n, k, E, G
#pragma GCC diagnostic pop
  CHECK(old.tokens() == 5);
  CHECK(old.experts() == 16);
  CHECK(old.top_k() == 4);
  CHECK(old.devices() == 2);
}

TEST_CASE("a router re-binds to a batch of another expert count, or refuses it") {
  std::vector<float> scores(4 * 64);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>((i * 37) % 101) / 10.0f;
  mr::cpu::router router(mr::presets::oea(2, 4), {4, 64, 4});
  // Fewer experts than when built: the policy is bound again, and the owned plan follows E.
  mr::routing_batch<float> narrow{mr::make_score_view(scores.data(), 4, 16, 64)};
  const mr::routing_plan& plan = router.route(narrow);
  CHECK(plan.experts() == 16);
  mr::routing_plan expected({.tokens = 4, .experts = 16, .top_k = 4});
  mr::cpu::workspace ws({4, 16, 4});
  REQUIRE(mr::cpu::route(mr::presets::oea(2, 4), narrow, expected.view(), ws).ok());
  CHECK(test::identical(plan, expected));
  // k = 4 over 3 experts: refused by name, not routed past the row.
  mr::routing_batch<float> tiny{mr::make_score_view(scores.data(), 4, 3, 64)};
  CHECK_THROWS_WITH_AS(router.route(tiny), "invalid parameter: k = 4: must be at most the expert count E = 3",
                       mr::routing_error);
  // More experts than its workspace holds: refused.
  std::vector<float> wide(4 * 128, 1.0f);
  mr::routing_batch<float> wider{mr::make_score_view(wide.data(), 4, 128)};
  CHECK_THROWS_WITH_AS(router.route(wider),
                       "workspace too small: workspace.experts = 64: must be at least batch.E = 128",
                       mr::routing_error);
  // And back to the full width: the same plan as a fresh router's.
  mr::routing_batch<float> full{mr::make_score_view(scores.data(), 4, 64)};
  mr::cpu::router fresh(mr::presets::oea(2, 4), {4, 64, 4});
  CHECK(test::identical(router.route(full), fresh.route(full)));
}

TEST_CASE("empty batches and fully masked batches route to nothing") {
  for (const char* text : {"topk(k=4)", "oea(k0=2,k=4)", "xshare(k0=1,m=3,k=4)", "lynx_acc(conf=0.5,budget=3,k=4)",
                           "xshare_spec(k0=1,m=1,m_r=2,k=4)", "lynx_lat(d=3,k=4)"}) {
    CAPTURE(text);
    const auto policy = mr::parse_policy_or_throw(text);
    std::vector<float> scores(3 * 16, 1.0f);
    mr::cpu::workspace ws({3, 16, 4});
    mr::routing_plan empty({.tokens = 0, .experts = 16, .top_k = 4});
    mr::routing_batch<float> none{mr::make_score_view(scores.data(), 0, 16)};
    REQUIRE(mr::cpu::route(policy, none, empty.view(), ws).ok());
    CHECK(empty.summary().active_count == 0);

    const std::vector<std::uint8_t> mask(3, 0);
    mr::routing_batch<float> masked{mr::make_score_view(scores.data(), 3, 16)};
    masked.token_mask = mask.data();
    mr::routing_plan plan(
        {.tokens = 3, .experts = 16, .top_k = 4, .devices = 0, .pad = {mr::padding_kind::repeat, -1}});
    REQUIRE(mr::cpu::route(policy, masked, plan.view(), ws).ok());
    CHECK(plan.summary().active_count == 0);
    CHECK(plan.ids() == std::vector<std::int32_t>(12, -1));  // no active expert to repeat
    CHECK(plan.weights() == std::vector<float>(12, 0.0f));
  }
}

TEST_CASE("non-finite scores: every row still gets a valid, finite, non-negative assignment") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int experts = 8, k = 3;
  const std::vector<std::vector<float>> rows = {
      std::vector<float>(experts, nan),
      std::vector<float>(experts, inf),
      std::vector<float>(experts, -inf),
      {nan, inf, -inf, 1.0f, nan, inf, 0.0f, -1.0f},
      {1e38f, 3e38f, -3e38f, 1e-45f, -0.0f, 0.0f, nan, 2.0f},
      {-5.0f, -1.0f, -2.0f, -3.0f, nan, nan, nan, nan},
  };
  std::vector<float> scores;
  for (const auto& row : rows) scores.insert(scores.end(), row.begin(), row.end());
  const int n = static_cast<int>(rows.size());
  for (const auto mode :
       {mr::scoring::softmax, mr::scoring::sigmoid, mr::scoring::sqrtsoftplus, mr::scoring::probabilities}) {
    for (const char* text :
         {"topk(k=3)", "oea(k0=1,top_p=0.5,k=3)", "xshare(k0=1,m=2,k=3,gate=dense)", "lynx_acc(conf=0.9,budget=2,k=3)",
          "skip(beta=0.5,k=3)", "topk(k=3,weights=raw,scale=3)"}) {
      CAPTURE(static_cast<int>(mode));
      CAPTURE(text);
      const auto policy = mr::parse_policy_or_throw(text);
      mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
      batch.mode = mode;
      mr::cpu::workspace ws({n, experts, k});
      mr::routing_plan plan({.tokens = n, .experts = experts, .top_k = k});
      REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());
      for (int i = 0; i < n; ++i) {
        REQUIRE(plan.count(i) >= 1);
        float sum = 0;
        for (int j = 0; j < k; ++j) {
          REQUIRE(std::isfinite(plan.weight(i, j)));
          REQUIRE(plan.weight(i, j) >= 0.0f);
          sum += plan.weight(i, j);
        }
        if (policy.assignment.weights == mr::weighting::renormalize)
          REQUIRE(sum == doctest::Approx(1.0f).epsilon(1e-5));
      }
      // +inf ranks first, NaN last (SPEC section 2): row 3 in a mode that keeps +inf.
      if (mode == mr::scoring::probabilities) {
        mr::routing_plan top({.tokens = n, .experts = experts, .top_k = k});
        REQUIRE(mr::cpu::route(mr::presets::vanilla(3), batch, top.view(), ws).ok());
        CHECK(top.id(3, 0) == 1);
        CHECK(top.id(3, 1) == 5);
        CHECK(top.id(3, 2) == 3);
        CHECK(top.id(0, 0) == 0);  // all NaN: ties to the lower index
      }
    }
  }
}

TEST_CASE("edge shapes: n = 1, E = k, k = 1, E = 1024, one request for the batch, empty devices, m_g = 0") {
  std::mt19937 rng(606);
  struct shape {
    const char* what;
    int n, experts, k;
    bool one_request, sparse_devices;
  };
  const shape shapes[] = {{"n = 1", 1, 64, 8, false, false},
                          {"E = k", 12, 8, 8, false, false},
                          {"k = 1", 20, 64, 1, false, false},
                          {"E = 1024", 24, 1024, 8, false, false},
                          {"one request holds the batch", 30, 64, 4, true, false},
                          {"devices with no expert", 16, 32, 4, false, true}};
  for (const auto& sh : shapes) {
    CAPTURE(sh.what);
    test::problem p;
    p.ref.n = sh.n;
    p.ref.E = sh.experts;
    p.top_k = sh.k;
    p.stride = sh.experts;
    std::vector<float> values(static_cast<std::size_t>(sh.n) * sh.experts);
    for (auto& v : values) v = std::normal_distribution<float>(0.0f, 1.5f)(rng);
    test::store_scores(p, values);
    if (sh.one_request) p.segments = {0, sh.n};
    p.ref.segments.assign(p.segments.begin(), p.segments.end());
    p.ref.G = sh.sparse_devices ? 8 : 2;
    p.placement.resize(static_cast<std::size_t>(sh.experts));
    for (int e = 0; e < sh.experts; ++e)
      p.placement[static_cast<std::size_t>(e)] = sh.sparse_devices ? (e % 2) * 5 : e % 2;  // devices 1-4, 6, 7 empty
    p.ref.placement.assign(p.placement.begin(), p.placement.end());
    const std::string K = std::to_string(sh.k);
    for (const std::string text : {"topk(k=" + K + ")", "oea(k0=1,k=" + K + ")", "xshare_ep(k0=1,m_g=0,k=" + K + ")",
                                   "xshare_ep(k0=1,m_g=3,k=" + K + ")", "xshare_spec(k0=1,m=1,m_r=2,k=" + K + ")",
                                   "lynx_lat(d=5,k=" + K + ")", "lynx_acc(conf=0.2,budget=3,k=" + K + ")"}) {
      CAPTURE(text);
      const auto policy = mr::parse_policy_or_throw(text);
      const auto got = test::route_problem(p, policy);
      test::check_against_naive(got, naive::route(p.ref, test::to_naive(policy), p.top_k), text);
      if (text.find("m_g=0") != std::string::npos) {
        CHECK(got.summary().selected_count ==
              test::route_problem(p, mr::presets::oea(1, sh.k)).summary().selected_count);
      }
    }
  }
}

TEST_CASE("route without a workspace argument uses a per-thread workspace and gives the same plan") {
  std::mt19937 rng(707);
  for (int trial = 0; trial < 30; ++trial) {
    const test::problem p = test::random_problem(rng);
    const auto policy = mr::parse_policy_or_throw(test::random_policy_text(rng, p));
    const auto expected = test::route_problem(p, policy);
    mr::routing_plan plan({.tokens = p.ref.n, .experts = p.ref.E, .top_k = p.top_k, .devices = p.ref.G});
    const mr::status s = p.type == test::element::f32 ? mr::cpu::route(policy, p.batch<float>(), plan.view())
                         : p.type == test::element::f16
                             ? mr::cpu::route(policy, p.batch<mr::float16>(), plan.view(), std::execution::par)
                             : mr::cpu::route(policy, p.batch<mr::bfloat16>(), plan.view());
    REQUIRE(s.ok());
    REQUIRE(test::identical(plan, expected));
  }
  // A bad shape is reported, not allocated for.
  std::vector<float> scores(16);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), 1, 1)};
  mr::routing_plan plan({.tokens = 1, .experts = 2, .top_k = 1});
  CHECK(mr::to_string(mr::cpu::route(mr::presets::vanilla(1), batch, plan.view())).find("batch.E = 1") !=
        std::string::npos);
}

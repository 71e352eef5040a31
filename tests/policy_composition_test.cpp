// Compile-time composition: what `|` accepts and refuses, the concept profile of
// stages and pipelines, and a user-written stage composed with built-in ones.

#include <type_traits>

#include "plan_checks.hpp"
#include "resident_experts.hpp"

namespace {
namespace mr = test::mr;

template <class A, class B>
concept composable = requires(A a, B b) {
  a | b;
};

template <class Policy>
concept routable_on_cpu = requires(const Policy& policy, const mr::routing_batch<float>& batch,
                                   const mr::plan_view& plan, mr::cpu::workspace& ws) {
  mr::cpu::route(policy, batch, plan, ws);
};

// Stages and views are small trivially copyable values (kernel parameters).
static_assert(std::is_trivially_copyable_v<mr::prune>);
static_assert(std::is_trivially_copyable_v<decltype(mr::presets::xshare_speculative(1, 2, 3, 8))>);
static_assert(std::is_trivially_copyable_v<mr::runtime_policy>);
static_assert(std::is_trivially_copyable_v<mr::routing_batch<mr::bfloat16>>);
static_assert(mr::set_stage<mr::prune> && !mr::assignment_stage<mr::prune>);
static_assert(mr::assignment_stage<mr::refine> && !mr::set_stage<mr::refine>);
static_assert(mr::set_stage<examples::resident_experts>);

// Legal compositions.
static_assert(composable<mr::prune, mr::refine>);
static_assert(composable<mr::prune, mr::greedy_mass>);
static_assert(composable<mr::pipeline<mr::prune, mr::greedy_mass>, mr::refine>);
static_assert(composable<mr::prune, mr::pipeline<mr::greedy_mass, mr::refine>>);
static_assert(composable<mr::pipeline<mr::prune>, examples::resident_experts>);
static_assert(mr::compiled_policy<mr::pipeline<mr::prune, mr::refine>>);
static_assert(mr::compiled_policy<decltype(mr::presets::lynx_latency(4, 8))>);
static_assert(routable_on_cpu<mr::pipeline<mr::prune, mr::refine>>);
static_assert(routable_on_cpu<mr::runtime_policy>);

// Illegal: the assignment stage must be last, so nothing follows it.
static_assert(!composable<mr::refine, mr::prune>);
static_assert(!composable<mr::refine, mr::refine>);
static_assert(!composable<mr::pipeline<mr::prune, mr::refine>, mr::greedy_mass>);
static_assert(!composable<mr::pipeline<mr::prune, mr::refine>, mr::refine>);
// Illegal: no assignment stage, no set stage, or an assignment stage not last.
static_assert(!mr::compiled_policy<mr::pipeline<mr::prune, mr::greedy_mass>>);
static_assert(!mr::compiled_policy<mr::pipeline<mr::refine>>);
static_assert(!mr::compiled_policy<mr::pipeline<mr::refine, mr::prune>>);
static_assert(!mr::compiled_policy<mr::pipeline<mr::prune, mr::refine, mr::refine>>);
static_assert(!routable_on_cpu<mr::pipeline<mr::prune, mr::greedy_mass>>);
static_assert(!routable_on_cpu<mr::pipeline<mr::refine>>);
static_assert(!routable_on_cpu<mr::prune>);
// Not stages at all.
static_assert(!composable<int, mr::refine>);
static_assert(!mr::set_stage<int>);
}  // namespace

TEST_CASE("a user-written stage composes with built-in ones and does what it says") {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 100; ++trial) {
    test::problem p = test::random_problem(rng);
    examples::resident_experts cache;
    std::vector<bool> resident(p.ref.E);
    for (int e = 0; e < p.ref.E; ++e) {
      resident[e] = std::bernoulli_distribution(0.3)(rng);
      if (resident[e]) cache.resident.insert(e);
    }
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const auto policy = mr::prune{.k0 = k0} | cache | mr::refine{.k = p.top_k};
    REQUIRE(mr::validate_policy(policy).ok());
    const auto plan = test::route_problem(p, policy);
    // S must be OEA's S plus exactly the resident experts some valid token has in its top-k.
    const auto oea =
        naive::route(p.ref, naive::policy{.sets = {naive::stage{.kind = "prune", .k0 = k0}}, .k = p.top_k}, p.top_k);
    p.ref.prefill = false;
    std::vector<bool> expected = oea.S;
    for (int i = 0; i < p.ref.n; ++i) {
      if (!p.ref.valid(i)) continue;
      const auto info = naive::score_token(p.ref, i);
      for (int j = 0; j < p.top_k; ++j) {
        if (resident[info.order[j]]) expected[info.order[j]] = true;
      }
    }
    for (int e = 0; e < p.ref.E; ++e) REQUIRE(plan.summary().selected.contains(e) == static_cast<bool>(expected[e]));
  }
}

TEST_CASE("a stage that cannot seed S is refused as a policy's first stage") {
  examples::resident_experts cache;
  const mr::status s = mr::validate_policy(cache | mr::refine{.k = 8});
  CHECK(s.code == mr::errc::invalid_parameter);
  CHECK(mr::to_string(s).find("resident_experts") != std::string::npos);
  CHECK_FALSE(mr::validate_policy(mr::vote_drop{.d = 2} | mr::refine{.k = 8}).ok());
  CHECK_FALSE(mr::validate_policy(mr::greedy_mass{.add = 4, .gate = mr::column_mass::dense} | mr::refine{.k = 8}).ok());
  CHECK(mr::validate_policy(mr::greedy_mass{.add = 4} | mr::refine{.k = 8}).ok());
}

namespace {
/// A user stage that (wrongly) empties S; it claims to seed S so that it passes validation.
struct forget_everything {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
  void apply(auto& context) const { context.selected.clear(); }
};
}  // namespace

TEST_CASE("a user stage that empties S while tokens are valid is reported before any row is assigned") {
  std::vector<float> scores(3 * 8, 1.0f);
  mr::routing_batch<float> batch{mr::make_score_view(scores.data(), 3, 8)};
  mr::cpu::workspace ws({3, 8, 2});
  mr::routing_plan plan(3, 2, 8);
  const auto policy = mr::prune{.k0 = 1} | forget_everything{} | mr::refine{.k = 2};
  const mr::status s = mr::cpu::route(policy, batch, plan.view(), ws);
  CHECK(
      mr::to_string(s) ==
      "invalid parameter: selected set size = 0: must not be 0 while valid tokens exist: a custom set stage emptied S");
  CHECK(plan.ids() == std::vector<std::int32_t>(6, 0));  // untouched: no half-assigned rows
  const std::vector<std::uint8_t> none(3, 0);
  batch.token_mask = none.data();
  CHECK(mr::cpu::route(policy, batch, plan.view(), ws).ok());  // nothing valid: an empty S is right
}

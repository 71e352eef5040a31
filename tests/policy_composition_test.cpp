// Compile-time composition: what `|` accepts and refuses, the concept profile of
// stages and pipelines, and a user-written stage composed with built-in ones.

#include <type_traits>
#include <vector>

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
// cpu::route takes them only to say why in a static_assert (tests/compile_fail/).
static_assert(!mr::routing_policy<mr::pipeline<mr::prune, mr::greedy_mass>>);
static_assert(!mr::routing_policy<mr::pipeline<mr::refine>>);
static_assert(!mr::routing_policy<mr::prune>);
// Not stages at all.
static_assert(!composable<int, mr::refine>);
static_assert(!mr::set_stage<int>);

// The common mistakes in writing a stage are not stages: `|` meets them with a sentence
// (tests/compile_fail/stage_*.cpp) and nothing routes them.
struct no_role {};
struct role_as_data_member {
  mr::stage_role role = mr::stage_role::set;
};
struct assignment_role {
  static constexpr mr::stage_role role = mr::stage_role::assignment;
};
struct owns_memory {
  static constexpr mr::stage_role role = mr::stage_role::set;
  std::vector<int> experts;
};
static_assert(!mr::routing_stage<no_role> && !mr::routing_stage<role_as_data_member>);
static_assert(!mr::routing_stage<assignment_role> && !mr::routing_stage<owns_memory>);
static_assert(mr::mistaken_stage<no_role> && mr::mistaken_stage<owns_memory>);
static_assert(std::is_same_v<decltype(mr::prune{} | owns_memory{} | mr::refine{}), mr::rejected_policy>);
static_assert(!mr::routing_policy<mr::rejected_policy>);
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
  mr::routing_plan plan({.tokens = 3, .experts = 8, .top_k = 2});
  // topk_union guarantees nothing, so clearing S leaves it empty.
  const auto policy = mr::topk_union{} | forget_everything{} | mr::refine{.k = 2};
  const mr::status s = mr::cpu::route(policy, batch, plan.view(), ws);
  CHECK(
      mr::to_string(s) ==
      "invalid parameter: selected set size = 0: must not be 0 while valid tokens exist: a custom set stage emptied S");
  CHECK(plan.ids() == std::vector<std::int32_t>(6, 0));  // untouched: no half-assigned rows
  const std::vector<std::uint8_t> none(3, 0);
  batch.token_mask = none.data();
  CHECK(mr::cpu::route(policy, batch, plan.view(), ws).ok());  // nothing valid: an empty S is right
}

TEST_CASE("selected_set: erase, clear and assignment keep the guaranteed experts") {
  mr::expert_set guaranteed;
  guaranteed.insert(3);
  guaranteed.insert(70);
  mr::selected_set selected(guaranteed);
  for (const int e : {1, 3, 5, 70}) selected.insert(e);
  CHECK(selected.size() == 4);
  CHECK_FALSE(selected.erase(3));  // guaranteed: stays
  CHECK(selected.erase(5));
  CHECK_FALSE(selected.erase(6));  // not a member
  CHECK(selected.contains(3));
  CHECK_FALSE(selected.contains(5));
  CHECK(selected.size() == 3);  // {1, 3, 70}
  selected.clear();
  CHECK(selected.experts() == guaranteed);  // {3, 70}
  mr::expert_set other;
  other.insert(9);
  selected = other;
  CHECK(selected.size() == 3);  // {3, 9, 70}
  CHECK((selected.contains(3) && selected.contains(9) && selected.contains(70)));
}

namespace {
/// A careless user stage: it empties S and keeps only expert 0, guaranteed experts included
/// if it could. S must keep the experts prune guaranteed.
struct keep_only_expert_zero {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
  static constexpr const char* name = "keep_only_expert_zero";
  void apply(auto& context) const {
    for (int e = 0; e < context.experts(); ++e) context.selected.erase(e);
    context.selected.insert(0);
  }
};
}  // namespace

TEST_CASE("a user stage cannot remove the experts an earlier stage guaranteed") {
  std::mt19937 rng(57);
  for (int trial = 0; trial < 60; ++trial) {
    test::problem p = test::random_problem(rng);
    const int k0 = std::uniform_int_distribution<int>(1, p.top_k)(rng);
    const auto plan = test::route_problem(p, mr::prune{.k0 = k0} | keep_only_expert_zero{} | mr::refine{.k = p.top_k});
    // Naive reference: prune's baselines (k0 ranks, fewer where a row's p runs out), each in
    // its token's row; S = those experts and expert 0.
    const auto oea =
        naive::route(p.ref, naive::policy{.sets = {naive::stage{.kind = "prune", .k0 = k0}}, .k = p.top_k}, p.top_k);
    std::vector<bool> expected(p.ref.E, false);
    expected[0] = true;
    for (int i = 0; i < p.ref.n; ++i) {
      if (!p.ref.valid(i)) continue;
      INFO("trial " << trial << ", token " << i);
      const auto info = naive::score_token(p.ref, i);
      CHECK(plan.guaranteed(i) == oea.guaranteed[i]);
      for (int j = 0; j < oea.guaranteed[i]; ++j) {
        expected[info.order[j]] = true;
        bool assigned = false;
        for (int slot = 0; slot < plan.count(i); ++slot) assigned = assigned || plan.id(i, slot) == info.order[j];
        CHECK_MESSAGE(assigned, "rank " << j << " (expert " << info.order[j] << ") was guaranteed");
      }
    }
    for (int e = 0; e < p.ref.E; ++e) REQUIRE(plan.summary().selected.contains(e) == static_cast<bool>(expected[e]));
  }
}

namespace {
/// docs/custom_stages.md's worked example, verbatim: drops from S the experts that fewer than
/// `min` valid tokens have in their top-k. A guaranteed expert stays, whatever its votes.
struct min_votes {
  static constexpr moe_routing::stage_role role = moe_routing::stage_role::set;
  static constexpr moe_routing::set_effect effect = moe_routing::set_effect::removes;
  static constexpr const char* name = "min_votes";
  static constexpr bool runs_on_device = true;  // apply uses only set_stage_context
  int min = 2;

  MOE_ROUTING_HOST_DEVICE_TEMPLATE void apply(moe_routing::set_stage_context auto& context) const {
    const auto votes = context.votes();
    for (int e = 0; e < context.experts(); ++e) {
      if (context.selected.contains(e) && votes[e] < min) context.selected.erase(e);  // refused if guaranteed
    }
  }
  /// It only removes, so it cannot open a policy.
  constexpr bool seeds_selection() const noexcept { return false; }
  constexpr moe_routing::status validate() const noexcept {
    return min < 1 ? moe_routing::fail(moe_routing::errc::invalid_parameter, "min_votes.min", min, "must be at least 1")
                   : moe_routing::status{};
  }
};
static_assert(moe_routing::set_stage<min_votes>);
}  // namespace

TEST_CASE("docs/custom_stages.md's min_votes keeps the guaranteed experts and the voted ones") {
  CHECK(mr::to_string(mr::validate_policy(mr::prune{.k0 = 1} | min_votes{.min = 0} | mr::refine{.k = 4})) ==
        "invalid parameter: min_votes.min = 0: must be at least 1");
  std::mt19937 rng(91);
  for (int trial = 0; trial < 60; ++trial) {
    test::problem p = test::random_problem(rng);
    const int min = std::uniform_int_distribution<int>(1, 4)(rng);
    const auto policy = mr::prune{.k0 = 1} | mr::topk_union{} | min_votes{.min = min} | mr::refine{.k = p.top_k};
    const auto plan = test::route_problem(p, policy);
    // Naive reference: S = every valid token's best expert, plus the experts at least `min`
    // valid tokens have in their top-k.
    std::vector<int> votes(p.ref.E, 0);
    std::vector<bool> expected(p.ref.E, false);
    for (int i = 0; i < p.ref.n; ++i) {
      if (!p.ref.valid(i)) continue;
      const auto info = naive::score_token(p.ref, i);
      expected[info.order[0]] = true;
      for (int j = 0; j < p.top_k; ++j) ++votes[info.order[j]];
    }
    for (int e = 0; e < p.ref.E; ++e) {
      INFO("trial " << trial << ", expert " << e << ", votes " << votes[e]);
      REQUIRE(plan.summary().selected.contains(e) == (expected[e] || votes[e] >= min));
    }
  }
}

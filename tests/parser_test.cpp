// The runtime policy text: what parses into which stages, and what each mistake says.

#include <string>
#include <type_traits>

#include "plan_checks.hpp"

namespace {
namespace mr = test::mr;

std::string error_of(const std::string& text) {
  const mr::parse_result r = mr::parse_policy(text);
  REQUIRE_FALSE(r.outcome.ok());
  return mr::describe(r, text);
}
}  // namespace

TEST_CASE("stages and their parameters parse into the runtime form") {
  const auto policy = mr::parse_policy_or_throw(
      " prune(k0=3, top_p=0.9, skip_ratio=0.25) | greedy_mass(mass=0.75, gate=dense) |"
      " ep_fill(m_g=4) | vote_drop(d=2) | refine(k=6, max_rank=12, weights=raw, scale=2.5) ");
  REQUIRE(policy.set_stage_count == 4);
  CHECK(policy.set_stages[0].holds<mr::prune>());
  CHECK(policy.set_stages[0].get<mr::prune>().k0 == 3);
  CHECK(policy.set_stages[0].get<mr::prune>().top_p == doctest::Approx(0.9f));
  CHECK(policy.set_stages[0].get<mr::prune>().skip_ratio == doctest::Approx(0.25f));
  CHECK(policy.set_stages[1].get<mr::greedy_mass>().mass == doctest::Approx(0.75f));
  CHECK(policy.set_stages[1].get<mr::greedy_mass>().gate == mr::column_mass::dense);
  CHECK(policy.set_stages[2].get<mr::ep_fill>().m_g == 4);
  CHECK(policy.set_stages[3].get<mr::vote_drop>().d == 2);
  CHECK(policy.assignment.k == 6);
  CHECK(policy.assignment.max_rank == 12);
  CHECK(policy.assignment.weights == mr::weighting::raw);
  CHECK(policy.assignment.scale == doctest::Approx(2.5f));
}

TEST_CASE("every preset name of the issue parses") {
  for (const char* text :
       {"oea(k0=4,k=8)", "xshare(k0=1,m=16,k=8)", "xshare_spec(k0=1,m=0,m_r=4,k=8)", "xshare_ep(k0=1,m_g=5,k=8)",
        "lynx_lat(d=32,k=8)", "lynx_acc(conf=0.5,budget=24,k=8)", "skip(beta=0.3,k=8)", "topk(k=8)", "pruned(k0=2,k=8)",
        "oea(k0=2,top_p=0.8,max_rank=12,k=8)"}) {
    CAPTURE(text);
    const mr::parse_result r = mr::parse_policy(text);
    CHECK(r.outcome.ok());
    CHECK(mr::preferred_top_k(r.policy) == 8);
  }
}

TEST_CASE("syntax errors say where and what was expected") {
  CHECK(error_of("prune(k0=4) | refine(k=8") ==
        "syntax error in policy at column 25: expected ',' or ')' after an argument\n"
        "  prune(k0=4) | refine(k=8\n"
        "                          ^");
  CHECK(error_of("prune(k0=4) refine(k=8)").find("column 13: expected '|' between stages") != std::string::npos);
  CHECK(error_of("prune(k0=4)").find("expected '| refine(...)'") != std::string::npos);
  CHECK(error_of("prune(k0 4) | refine(k=8)").find("column 10: expected '=' after the argument name") !=
        std::string::npos);
  CHECK(error_of("prune(k0=) | refine(k=8)").find("column 10: expected a value") != std::string::npos);
  CHECK(error_of("prune(k0=four) | refine(k=8)").find("column 7: expected an integer value") != std::string::npos);
  CHECK(error_of("prune(k0=4, colour=3) | refine(k=8)").find("column 13: expected an argument this stage") !=
        std::string::npos);
  CHECK(error_of("shuffle(k=3) | refine(k=8)").find("column 1: expected a stage name") != std::string::npos);
  CHECK(error_of("refine(k=8)").find("expected a set stage before refine") != std::string::npos);
  CHECK(error_of("prune(k0=1) | refine(k=8) | greedy_mass(add=1)").find("refine must be the last stage") !=
        std::string::npos);
  CHECK(error_of("oea(k=8)").find("(k0)") != std::string::npos);
  CHECK(error_of("").find("column 1: expected a stage or preset name") != std::string::npos);
  CHECK(error_of("greedy_mass(add=1, gate=heavy) | refine(k=2)").find("expected gate=sparse or gate=dense") !=
        std::string::npos);
}

TEST_CASE("nothing the text says is ignored or silently overridden") {
  // Junk after a preset is placed where it starts, not at column 1.
  CHECK(error_of("oea(k0=4,k=8) junk")
            .find("column 15: expected the end of the policy: a preset call is a whole policy") != std::string::npos);
  CHECK(error_of("topk(k=8) | refine(k=8)").find("column 11: expected the end of the policy") != std::string::npos);
  // An argument twice, and two names of one parameter together.
  CHECK(error_of("topk(k=4,k=8)").find("column 10: expected each argument once") != std::string::npos);
  CHECK(error_of("prune(k0=2,beta=0.1,skip_ratio=0.2) | refine(k=8)")
            .find("expected only one of two names for the same parameter (beta)") != std::string::npos);
  CHECK(error_of("prune(k0=2) | greedy_mass(add=2,m=3) | refine(k=8)")
            .rfind("syntax error in policy at column 33: expected only one of two names for the same parameter (m)",
                   0) == 0);
  CHECK(error_of("prune(k0=2) | greedy_mass(mass=0.5,tau=0.6) | refine(k=8)")
            .rfind("syntax error in policy at column 36: expected only one of two names for the same parameter (tau)",
                   0) == 0);
  CHECK(error_of("confidence_keep(min_confidence=0.5,conf=0.6,budget=2) | refine(k=8)")
            .rfind("syntax error in policy at column 36: expected only one of two names for the same parameter (conf)",
                   0) == 0);
  // gate= means something only to the XShare presets.
  CHECK(error_of("topk(k=8,gate=dense)").find("column 10: expected an argument this stage or preset takes") !=
        std::string::npos);
  CHECK(error_of("oea(k0=2,k=8,gate=dense)").find("expected an argument this stage or preset takes") !=
        std::string::npos);
  CHECK(mr::parse_policy("xshare(k0=1,m=4,k=8,gate=dense)").outcome.ok());
  // A negative count names the parameter instead of reading as "not given".
  CHECK(error_of("xshare(k0=1,m=-1,k=8)") == "invalid parameter: greedy_mass.add = -1: must be at least 0");
  CHECK(error_of("prune(k0=1) | greedy_mass(size=-3) | refine(k=8)") ==
        "invalid parameter: greedy_mass.size = -3: must be at least 0");
  CHECK(error_of("prune(k0=1) | greedy_mass(mass=-0.5) | refine(k=8)") ==
        "invalid parameter: greedy_mass.mass = -0.5: must be in (0, 1]");
  CHECK(error_of("prune(k0=1) | greedy_mass(gate=dense) | refine(k=8)") ==
        "invalid parameter: greedy_mass: needs a target: add, size or mass");
}

TEST_CASE("parameter errors name the parameter and its value") {
  CHECK(error_of("oea(k0=9,k=8)") ==
        "invalid parameter: prune.k0 = 9: must be at most the experts each token is assigned, refine.k = 8");
  CHECK(error_of("oea(k0=4,top_p=1.5,k=8)") == "invalid parameter: prune.top_p = 1.5: must be in (0, 1]");
  CHECK(error_of("oea(k0=4,top_p=0,k=8)") == "invalid parameter: prune.top_p = 0: must be in (0, 1]");
  CHECK(error_of("oea(k0=4,max_rank=3,k=8)") ==
        "invalid parameter: refine.max_rank = 3: must reach every guaranteed expert: at least prune.k0 = 4");
  CHECK(error_of("skip(beta=1.5,k=8)") == "invalid parameter: prune.skip_ratio = 1.5: must be in [0, 1]");
  CHECK(error_of("prune(k0=0) | refine(k=8)") == "invalid parameter: prune.k0 = 0: must be at least 1");
  CHECK(error_of("lynx_acc(conf=2,budget=4,k=8)") ==
        "invalid parameter: confidence_keep.min_confidence = 2: must be in [0, 1]");
  CHECK(error_of("lynx_lat(d=-1,k=8)") == "invalid parameter: vote_drop.d = -1: must not be negative");
  CHECK(error_of("xshare_ep(k0=1,m_g=-2,k=8)") == "invalid parameter: ep_fill.m_g = -2: must not be negative");
  CHECK(error_of("prune(k0=2) | greedy_mass(add=1,size=3) | refine(k=8)") ==
        "invalid parameter: greedy_mass: takes one target of add, size and mass, not several");
  CHECK(error_of("topk(k=8,scale=0)") == "invalid parameter: refine.scale = 0: must be finite and positive");
  CHECK(error_of("prune(k0=2) | confidence_keep(conf=0.5,budget=3) | refine(k=8)").find("confidence_keep") !=
        std::string::npos);
  CHECK(error_of("vote_drop(d=1) | refine(k=8)").find("vote_drop: cannot open a policy") != std::string::npos);
}

TEST_CASE("binding errors: k > E, stage k above the model's, ep_fill without placement") {
  const auto oea = mr::parse_policy_or_throw("oea(k0=2,k=8)");
  CHECK(mr::to_string(mr::bind_policy(oea, {6, 8, false})) ==
        "invalid parameter: k = 8: must be at most the expert count E = 6");
  CHECK(mr::to_string(mr::bind_policy(oea, {64, 4, false})) ==
        "invalid parameter: refine.k = 8: must be at most the model's top_k = 4");
  CHECK(mr::to_string(mr::bind_policy(oea, {64, 40, false})) ==
        "invalid parameter: top_k = 40: must be in [1, max_top_k] max_top_k = 32");
  const auto ep = mr::parse_policy_or_throw("xshare_ep(k0=1,m_g=2,k=8)");
  CHECK(mr::to_string(mr::bind_policy(ep, {64, 8, false})).find("ep_fill.m_g = 2: needs an expert placement") !=
        std::string::npos);
  CHECK(mr::bind_policy(ep, {64, 8, true}).ok());
}

namespace {

/// Policy text for `Stage` with every required parameter 1, every other given one left out,
/// and `parameter` set to `value`.
template <class Stage>
std::string call_with(const mr::stage_parameter<Stage>& tested, const std::string& value) {
  std::string text = std::string(Stage::name) + "(";
  bool first = true;
  for (const auto& parameter : Stage::parameters()) {
    const bool is_tested = std::string(parameter.name) == tested.name;
    if (!parameter.required && !is_tested) continue;
    text += (first ? "" : ",") + std::string(parameter.name) + "=" + (is_tested ? value : "1");
    first = false;
  }
  return text + ")";
}

/// A value just outside the range (its open end, or one below the closed low end); the
/// range's high end is finite only for fractions, where 2 is outside.
std::string outside(const mr::value_range& range) {
  if (range.low_open) return std::to_string(range.low);
  return std::to_string(range.low - 1);
}

template <class Stage>
void check_each_range(const std::string& pipeline_of_stage_start, const std::string& pipeline_end) {
  for (const auto& parameter : Stage::parameters()) {
    if (parameter.range.rule == nullptr) continue;
    const std::string text = pipeline_of_stage_start + call_with(parameter, outside(parameter.range)) + pipeline_end;
    CAPTURE(text);
    const mr::parse_result result = mr::parse_policy(text);
    CHECK(result.outcome.code == mr::errc::invalid_parameter);
    CHECK(std::string(result.outcome.parameter) == parameter.qualified);
    CHECK(std::string(result.outcome.requirement) == parameter.range.rule);
  }
}

template <class... Stages>
void check_every_stage(mr::stage_types<Stages...>) {
  (check_each_range<Stages>("", " | refine(k=8)"), ...);
}

}  // namespace

TEST_CASE("every built-in stage's parameter ranges reach the parser's messages from its parameters()") {
  check_every_stage(mr::builtin_set_stages{});
  check_each_range<mr::refine>("topk_union(k=8) | ", "");
}

TEST_CASE("the runtime form holds each built-in stage and gives it back") {
  const auto round_trip = [](const auto& stage) {
    using stage_type = std::remove_cvref_t<decltype(stage)>;
    const mr::any_set_stage held(stage);
    CHECK(held.holds<stage_type>());
    for (const auto& parameter : stage_type::parameters()) {
      if (parameter.kind == mr::parameter_kind::gate) {
        CHECK(held.get<stage_type>().*parameter.gate == stage.*parameter.gate);
      } else if (parameter.kind != mr::parameter_kind::weighting) {
        CHECK(parameter.given(held.get<stage_type>()) == parameter.given(stage));
        if (parameter.given(stage)) CHECK(parameter.value_of(held.get<stage_type>()) == parameter.value_of(stage));
      }
    }
    int visits = 0;
    held.visit([&](const auto& seen) {
      ++visits;
      CHECK(std::is_same_v<std::remove_cvref_t<decltype(seen)>, stage_type>);
    });
    CHECK(visits == 1);
  };
  round_trip(mr::topk_union{.k = 3});
  round_trip(mr::prune{.k0 = 2, .top_p = 0.5f, .skip_ratio = 0.25f});
  round_trip(mr::greedy_mass{.add = 4});
  round_trip(mr::per_request{.k0 = 1, .m_r = 2});
  round_trip(mr::ep_fill{.m_g = 3});
  round_trip(mr::vote_drop{.d = 2});
  round_trip(mr::confidence_keep{.min_confidence = 0.5f, .budget = 7});
}

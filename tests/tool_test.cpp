// `moe-route route` on files, against the library called directly; exit statuses.

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <moe_routing/io/npy.hpp>

#include "plan_checks.hpp"

#ifndef MOE_ROUTE_BINARY
#error "the build passes the moe-route path"
#endif

namespace {
namespace mr = test::mr;
namespace fs = std::filesystem;

int run(const std::string& arguments) {
  const std::string command = std::string(MOE_ROUTE_BINARY) + " " + arguments + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string run_output(const std::string& arguments, const fs::path& dir) {
  const fs::path out = dir / "stderr.txt";
  const std::string command = std::string(MOE_ROUTE_BINARY) + " " + arguments + " > /dev/null 2> " + out.string();
  (void)std::system(command.c_str());
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  return line;
}

struct scratch_dir {
  fs::path path = fs::temp_directory_path() / ("moe_route_test_" + std::to_string(::getpid()));
  scratch_dir() { fs::create_directories(path); }
  ~scratch_dir() { fs::remove_all(path); }
  std::string file(const char* name) const { return (path / name).string(); }
};
}  // namespace

TEST_CASE("moe-route route writes the plan the library computes") {
  scratch_dir dir;
  std::mt19937 rng(11);
  const int n = 24, experts = 64, k = 6;
  for (const bool half : {false, true}) {
    std::vector<float> scores(static_cast<std::size_t>(n) * experts);
    for (auto& s : scores) s = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    std::vector<mr::float16> halves;
    for (float s : scores) halves.push_back(mr::to_float16(s));
    std::vector<float> bias(experts);
    for (auto& b : bias) b = std::normal_distribution<float>(0.0f, 0.1f)(rng);
    std::vector<std::uint8_t> mask(n, 1);
    mask[3] = mask[17] = 0;
    const std::vector<std::int64_t> segments = {0, 4, 8, 20, 24};
    std::vector<std::int32_t> placement(experts);
    for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e % 4;
    if (half) mr::npy::write(dir.file("s.npy"), mr::npy::dtype::float16, {std::size_t(n), std::size_t(experts)}, halves.data());
    else mr::npy::write(dir.file("s.npy"), mr::npy::dtype::float32, {std::size_t(n), std::size_t(experts)}, scores.data());
    mr::npy::write(dir.file("b.npy"), mr::npy::dtype::float32, {std::size_t(experts)}, bias.data());
    mr::npy::write(dir.file("m.npy"), mr::npy::dtype::boolean, {std::size_t(n)}, mask.data());
    mr::npy::write(dir.file("o.npy"), mr::npy::dtype::int64, {segments.size()}, segments.data());
    mr::npy::write(dir.file("p.npy"), mr::npy::dtype::int32, {std::size_t(experts)}, placement.data());

    const std::string policy_text = "per_request(k0=2,m_r=2) | ep_fill(m_g=6) | refine(k=6)";
    const std::string args = "route --scores " + dir.file("s.npy") + " --policy '" + policy_text +
                             "' --scoring sigmoid --bias " + dir.file("b.npy") + " --groups 8:4 --group-score max --mask " +
                             dir.file("m.npy") + " --segments " + dir.file("o.npy") + " --placement " + dir.file("p.npy") +
                             " --padding repeat --scale 2.5 --ids " + dir.file("i.npy") + " --weights " + dir.file("w.npy");
    REQUIRE(run(args) == 0);

    std::vector<std::int32_t> segments32(segments.begin(), segments.end());
    mr::routing_batch<float> batch{mr::make_score_view(scores.data(), n, experts)};
    std::vector<float> widened;
    for (auto h : halves) widened.push_back(mr::to_float(h));
    if (half) batch.scores.data = widened.data();  // the same values the tool read
    batch.mode = mr::scoring::sigmoid;
    batch.bias = bias.data();
    batch.groups = {8, 4, mr::group_score::max};
    batch.token_mask = mask.data();
    batch.segments = segments32.data();
    batch.request_count = 4;
    batch.placement = placement.data();
    batch.device_count = 4;
    auto policy = mr::parse_policy_or_throw(policy_text);
    policy.assignment.scale = 2.5f;
    mr::routing_plan plan(n, k, experts, 4, {mr::padding_kind::repeat, -1});
    mr::cpu::workspace ws({n, experts, k});
    REQUIRE(mr::cpu::route(policy, batch, plan.view(), ws).ok());

    const auto ids = mr::npy::read(dir.file("i.npy"));
    const auto weights = mr::npy::read(dir.file("w.npy"));
    REQUIRE(ids.type == mr::npy::dtype::int32);
    REQUIRE(weights.type == mr::npy::dtype::float32);
    REQUIRE(ids.shape == std::vector<std::size_t>{std::size_t(n), std::size_t(k)});
    CHECK(std::vector<std::int32_t>(ids.data<std::int32_t>(), ids.data<std::int32_t>() + n * k) == plan.ids());
    CHECK(std::vector<float>(weights.data<float>(), weights.data<float>() + n * k) == plan.weights());
  }
}

TEST_CASE("moe-route exit statuses: 2 for bad arguments, 1 for bad input") {
  scratch_dir dir;
  const std::vector<float> scores(4 * 16, 0.25f);
  mr::npy::write(dir.file("s.npy"), mr::npy::dtype::float32, {4, 16}, scores.data());
  const std::vector<std::int32_t> ints(4, 1);
  mr::npy::write(dir.file("int.npy"), mr::npy::dtype::int32, {4, 1}, ints.data());
  std::ofstream(dir.file("junk.npy")) << "definitely not numpy";
  const std::string out = " --ids " + dir.file("i.npy") + " --weights " + dir.file("w.npy");
  const std::string s = " --scores " + dir.file("s.npy");

  CHECK(run("route" + s + " --policy 'oea(k0=2,k=4)'" + out) == 0);
  CHECK(run("") == 2);
  CHECK(run("frobnicate") == 2);
  CHECK(run("route" + s + out) == 2);                                        // no --policy
  CHECK(run("route" + s + " --policy 'oea(k0=2,k=4' " + out) == 2);          // syntax error
  CHECK(run("route" + s + " --policy 'oea(k0=6,k=4)'" + out) == 2);          // k0 > k
  CHECK(run("route" + s + " --policy 'topk(k=20)'" + out) == 2);             // k > E
  CHECK(run("route" + s + " --policy 'topk(k=2)' --scoring cubic" + out) == 2);
  CHECK(run("route" + s + " --policy 'topk(k=2)' --frob 1" + out) == 2);
  CHECK(run("route" + s + " --policy 'topk(k=2)' --sentinel x" + out) == 2);
  CHECK(run("route --scores /nonexistent.npy --policy 'topk(k=2)'" + out) == 1);
  CHECK(run("route --scores " + dir.file("junk.npy") + " --policy 'topk(k=2)'" + out) == 1);
  CHECK(run("route --scores " + dir.file("int.npy") + " --policy 'topk(k=1)'" + out) == 1);   // int scores
  CHECK(run("route" + s + " --policy 'topk(k=2)' --mask " + dir.file("int.npy") + out) == 1);  // mask dtype
  CHECK(run("route --help") == 0);

  CHECK(run_output("route" + s + " --policy 'oea(k0=2,k=4' " + out, dir.path) ==
        "moe-route: syntax error in policy at column 13: expected ',' or ')' after an argument");
  CHECK(run_output("route" + s + " --policy 'oea(k0=6,k=4)'" + out, dir.path) ==
        "moe-route: invalid parameter: prune.k0 = 6: must be at most the experts each token is assigned, refine.k = 4");
}

// `moe-route route` on files, against the library called directly; exit statuses.

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <moe_routing/batching/expert_parallel_batches.hpp>
#include <moe_routing/batching/form_batches.hpp>
#include <moe_routing/batching/online_admission.hpp>
#include <moe_routing/cpu/trace_replay.hpp>
#include <moe_routing/io/npy.hpp>
#include <moe_routing/io/trace.hpp>

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
    if (half)
      mr::npy::write(dir.file("s.npy"), mr::npy::dtype::float16, {std::size_t(n), std::size_t(experts)}, halves.data());
    else
      mr::npy::write(dir.file("s.npy"), mr::npy::dtype::float32, {std::size_t(n), std::size_t(experts)}, scores.data());
    mr::npy::write(dir.file("b.npy"), mr::npy::dtype::float32, {std::size_t(experts)}, bias.data());
    mr::npy::write(dir.file("m.npy"), mr::npy::dtype::boolean, {std::size_t(n)}, mask.data());
    mr::npy::write(dir.file("o.npy"), mr::npy::dtype::int64, {segments.size()}, segments.data());
    mr::npy::write(dir.file("p.npy"), mr::npy::dtype::int32, {std::size_t(experts)}, placement.data());

    const std::string policy_text = "per_request(k0=2,m_r=2) | ep_fill(m_g=6) | refine(k=6)";
    const std::string args =
        "route --scores " + dir.file("s.npy") + " --policy '" + policy_text + "' --scoring sigmoid --bias " +
        dir.file("b.npy") + " --groups 8:4 --group-score max --mask " + dir.file("m.npy") + " --segments " +
        dir.file("o.npy") + " --placement " + dir.file("p.npy") + " --padding repeat --scale 2.5 --ids " +
        dir.file("i.npy") + " --weights " + dir.file("w.npy");
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
    mr::routing_plan plan(
        {.tokens = n, .experts = experts, .top_k = k, .devices = 4, .pad = {mr::padding_kind::repeat, -1}});
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
  CHECK(run("route" + s + out) == 2);                                // no --policy
  CHECK(run("route" + s + " --policy 'oea(k0=2,k=4' " + out) == 2);  // syntax error
  CHECK(run("route" + s + " --policy 'oea(k0=6,k=4)'" + out) == 2);  // k0 > k
  CHECK(run("route" + s + " --policy 'topk(k=20)'" + out) == 2);     // k > E
  CHECK(run("route" + s + " --policy 'topk(k=2)' --scoring cubic" + out) == 2);
  CHECK(run("route" + s + " --policy 'topk(k=2)' --frob 1" + out) == 2);
  CHECK(run("route" + s + " --policy 'topk(k=2)' --sentinel x" + out) == 2);
  CHECK(run("route --scores /nonexistent.npy --policy 'topk(k=2)'" + out) == 1);
  CHECK(run("route --scores " + dir.file("junk.npy") + " --policy 'topk(k=2)'" + out) == 1);
  CHECK(run("route --scores " + dir.file("int.npy") + " --policy 'topk(k=1)'" + out) == 1);    // int scores
  CHECK(run("route" + s + " --policy 'topk(k=2)' --mask " + dir.file("int.npy") + out) == 1);  // mask dtype
  CHECK(run("route --help") == 0);

  CHECK(run_output("route" + s + " --policy 'oea(k0=2,k=4' " + out, dir.path) ==
        "moe-route: syntax error in policy at column 13: expected ',' or ')' after an argument in 'oea(k0=2,k=4'");
  CHECK(run_output("route" + s + " --policy 'oea(k0=6,k=4)'" + out, dir.path) ==
        "moe-route: invalid parameter: prune.k0 = 6: must be at most the experts each token is assigned, refine.k = 4 "
        "in 'oea(k0=6,k=4)'");
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// The number after `"key": ` following position `from` in a JSON text.
double json_number(const std::string& json, const std::string& key, std::size_t from) {
  const std::size_t at = json.find("\"" + key + "\": ", from);
  REQUIRE(at != std::string::npos);
  return std::stod(json.substr(at + key.size() + 4));
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

}  // namespace

TEST_CASE("moe-route gen writes a trace that route and replay read, and replay's figures match a recount") {
  scratch_dir dir;
  const std::string trace_dir = dir.file("trace");
  REQUIRE(run("gen --preset qwen3-30b-a3b --experts 64 --top-k 4 --layers 2 --tokens 8 --steps 5 --requests 2 --seed 5 "
              "--out " +
              trace_dir) == 0);
  const mr::io::trace trace = mr::io::load_trace(trace_dir);
  REQUIRE(trace.layers == 2);
  REQUIRE(trace.tokens == 40);
  REQUIRE(trace.experts == 64);

  // route on the generator's files equals the library on the same batch
  REQUIRE(run("route --trace " + trace_dir + " --layer 1 --step 2 --policy 'oea(k0=2,k=4)' --ids " + dir.file("i.npy") +
              " --weights " + dir.file("w.npy")) == 0);
  std::vector<std::int32_t> segments;
  const auto batch = trace.batch<float>(1, 2, segments);
  mr::routing_plan plan({.tokens = 8, .experts = 64, .top_k = 4});
  mr::cpu::workspace ws({8, 64, 4});
  REQUIRE(mr::cpu::route(mr::presets::oea(2, 4), batch, plan.view(), ws).ok());
  const auto ids = mr::npy::read(dir.file("i.npy"));
  CHECK(std::vector<std::int32_t>(ids.data<std::int32_t>(), ids.data<std::int32_t>() + 32) == plan.ids());

  // replay --json against figures recounted here: |active| from the ids, retained mass
  // from a softmax computed here, recall against vanilla's rows.
  const std::string out = dir.file("replay.json");
  REQUIRE(std::system((std::string(MOE_ROUTE_BINARY) + " replay --trace " + trace_dir +
                       " --policy 'topk(k=4)' --policy 'oea(k0=2,k=4)' --json > " + out + " 2>/dev/null")
                          .c_str()) == 0);
  const std::string json = read_file(out);
  double active = 0, retained = 0, recall = 0;
  int samples = 0;
  for (int layer = 0; layer < 2; ++layer) {
    for (int s = 0; s < 5; ++s) {
      const auto b = trace.batch<float>(layer, s, segments);
      mr::routing_plan oea({.tokens = 8, .experts = 64, .top_k = 4}), vanilla({.tokens = 8, .experts = 64, .top_k = 4});
      REQUIRE(mr::cpu::route(mr::presets::oea(2, 4), b, oea.view(), ws).ok());
      REQUIRE(mr::cpu::route(mr::presets::vanilla(4), b, vanilla.view(), ws).ok());
      std::vector<bool> used(64, false);
      double step_retained = 0, step_recall = 0;
      for (int i = 0; i < 8; ++i) {
        const float* x = b.scores.row(i);
        double denominator = 0;
        for (int e = 0; e < 64; ++e) denominator += std::exp(static_cast<double>(x[e]));
        double kept = 0, full = 0;
        int shared = 0;
        for (int j = 0; j < oea.count(i); ++j) {
          used[static_cast<std::size_t>(oea.id(i, j))] = true;
          kept += std::exp(static_cast<double>(x[oea.id(i, j)])) / denominator;
        }
        for (int j = 0; j < 4; ++j) {
          full += std::exp(static_cast<double>(x[vanilla.id(i, j)])) / denominator;
          for (int q = 0; q < oea.count(i); ++q) shared += oea.id(i, q) == vanilla.id(i, j);
        }
        step_retained += kept / full / 8;
        step_recall += shared / 4.0 / 8;
      }
      active += static_cast<double>(std::count(used.begin(), used.end(), true));
      retained += step_retained;
      recall += step_recall;
      ++samples;
    }
  }
  const std::size_t oea_at = json.find("\"policy\": \"oea(k0=2,k=4)\"");
  REQUIRE(oea_at != std::string::npos);
  CHECK(json_number(json, "mean_active", oea_at) == doctest::Approx(active / samples).epsilon(1e-5));
  CHECK(json_number(json, "mean_retained_mass", oea_at) == doctest::Approx(retained / samples).epsilon(1e-5));
  CHECK(json_number(json, "mean_recall", oea_at) == doctest::Approx(recall / samples).epsilon(1e-5));
  CHECK(json_number(json, "modelled_latency_ratio", json.find("\"policy\": \"topk(k=4)\"")) == doctest::Approx(1.0));
  CHECK(count_of(json, "\"layer\": ") == 4);  // two layers for each of two policies

  REQUIRE(std::system((std::string(MOE_ROUTE_BINARY) + " replay --trace " + trace_dir +
                       " --policy 'oea(k0=2,k=4)' --csv > " + out + " 2>/dev/null")
                          .c_str()) == 0);
  CHECK(count_of(read_file(out), "\n") == 1 + 3);  // header, all, layer 0, layer 1
}

TEST_CASE("moe-route sweep writes one CSV row and one SVG point per configuration") {
  scratch_dir dir;
  const std::string trace_dir = dir.file("trace");
  REQUIRE(run("gen --preset uniform --experts 32 --top-k 4 --tokens 8 --steps 4 --out " + trace_dir) == 0);
  REQUIRE(run("sweep --trace " + trace_dir + " --grid 'oea(k0=1..6,k=4)' --grid 'skip(beta=0.1..0.5:0.2,k=4)' --csv " +
              dir.file("s.csv") + " --svg " + dir.file("s.svg")) == 0);
  // k0 = 5 and 6 do not fit k = 4 and are skipped: 4 + 3 configurations.
  const std::string csv = read_file(dir.file("s.csv")), svg = read_file(dir.file("s.svg"));
  CHECK(count_of(csv, "\n") == 1 + 7);
  CHECK(count_of(svg, "class=\"point\"") == 7);
  CHECK(count_of(svg, "class=\"frontier\"") == 1);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(count_of(csv, ",1\n") >= 1);  // some configuration is on the Pareto frontier
}

TEST_CASE("every subcommand has --help, and trace commands exit 2 for arguments, 1 for files") {
  scratch_dir dir;
  for (const char* command : {"route", "gen", "replay", "sweep"}) {
    CAPTURE(command);
    CHECK(run(std::string(command) + " --help") == 0);
  }
  CHECK(run("--help") == 0);
  CHECK(run("gen --preset nonesuch --out " + dir.file("t")) == 2);
  CHECK(run("gen --tokens 0 --out " + dir.file("t")) == 2);
  CHECK(run("gen --preset uniform") == 2);  // no --out
  CHECK(run("replay --trace " + dir.file("missing") + " --policy 'topk(k=2)'") == 1);
  REQUIRE(run("gen --preset uniform --experts 16 --top-k 2 --tokens 4 --steps 2 --out " + dir.file("t")) == 0);
  CHECK(run("replay --trace " + dir.file("t")) == 2);                                // no --policy
  CHECK(run("replay --trace " + dir.file("t") + " --policy 'topk(k=2'") == 2);       // syntax
  CHECK(run("replay --trace " + dir.file("t") + " --policy 'topk(k=8)'") == 2);      // k above the trace's
  CHECK(run("sweep --trace " + dir.file("t") + " --grid 'oea(k0=3..1,k=2)'") == 2);  // empty range
  CHECK(run("sweep --trace " + dir.file("t") + " --grid 'oea(k0=5..6,k=2)'") == 2);  // nothing fits
  CHECK(run("route --trace " + dir.file("t") + " --step 9 --policy 'topk(k=2)' --ids " + dir.file("i") + " --weights " +
            dir.file("w")) == 2);
}

TEST_CASE("moe-route outputs are all or nothing, and never land on another file") {
  scratch_dir dir;
  std::vector<float> scores(4 * 16);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i % 7);
  mr::npy::write(dir.file("s.npy"), mr::npy::dtype::float32, {4, 16}, scores.data());
  const std::string route = "route --scores " + dir.file("s.npy") + " --policy 'oea(k0=2,k=4)'";
  const std::string outputs = " --ids " + dir.file("i.npy") + " --weights " + dir.file("w.npy");
  auto write_text = [](const std::string& path, const std::string& text) { std::ofstream(path) << text; };

  SUBCASE("a write that fails (file size limit) exits 1 and leaves the earlier outputs as they were") {
    write_text(dir.file("i.npy"), "old ids");
    write_text(dir.file("w.npy"), "old weights");
    std::vector<float> many(4096 * 64, 1.0f);  // 1 MiB of scores: ids and weights of 64 KiB each
    mr::npy::write(dir.file("big.npy"), mr::npy::dtype::float32, {4096, 64}, many.data());
    // `ulimit -f 16` stops writes at 16 KiB with EFBIG, as a full disk stops them (SIGXFSZ ignored).
    const std::string command = "trap '' XFSZ; ulimit -f 16; exec " + std::string(MOE_ROUTE_BINARY) +
                                " route --scores " + dir.file("big.npy") + " --policy 'topk(k=8)'" + outputs +
                                " > /dev/null 2> " + dir.file("err.txt");
    const int status = std::system(("sh -c \"" + command + "\"").c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(read_file(dir.file("err.txt")).find("moe-route: cannot write " + dir.file("i.npy")) == 0);
    CHECK(read_file(dir.file("i.npy")) == "old ids");
    CHECK(read_file(dir.file("w.npy")) == "old weights");
    for (const auto& entry : fs::directory_iterator(dir.path))
      CHECK(entry.path().string().find(".tmp") == std::string::npos);
  }
  SUBCASE("two outputs naming one file, in any spelling, are refused") {
    CHECK(run(route + " --ids " + dir.file("o.npy") + " --weights " + dir.file("o.npy")) == 2);
    CHECK(run(route + " --ids " + dir.file("o.npy") + " --weights " + (dir.path / "." / "o.npy").string()) == 2);
    CHECK(run(route + " --ids " + dir.file("s.npy") + " --weights " + dir.file("w.npy")) == 2);  // over the input
    CHECK(run_output(route + " --ids " + dir.file("o.npy") + " --weights " + dir.file("w.npy") + " --counts " +
                         dir.file("o.npy"),
                     dir.path)
              .find("--ids and --counts name the same file") != std::string::npos);
    CHECK_FALSE(fs::exists(dir.file("o.npy")));
  }
  SUBCASE("an output inside the trace being read is refused") {
    const std::string trace_dir = dir.file("t");
    REQUIRE(run("gen --preset uniform --experts 16 --top-k 2 --tokens 4 --steps 2 --out " + trace_dir) == 0);
    const std::string scores_before = read_file(trace_dir + "/scores.npy");
    CHECK(run("route --trace " + trace_dir + " --policy 'topk(k=2)' --ids " + trace_dir + "/scores.npy --weights " +
              dir.file("w.npy")) == 2);
    CHECK(run("sweep --trace " + trace_dir + " --grid 'oea(k0=1..2,k=2)' --csv " + trace_dir + "/steps.npy --svg " +
              dir.file("s.svg")) == 2);
    CHECK(read_file(trace_dir + "/scores.npy") == scores_before);
  }
  SUBCASE("placement ids are checked before the device count is taken from them") {
    for (const std::int32_t bad : {-2, 1024, 2147483647}) {
      std::vector<std::int32_t> placement(16, 0);
      placement[3] = bad;
      mr::npy::write(dir.file("p.npy"), mr::npy::dtype::int32, {16}, placement.data());
      CHECK(run_output(route + " --placement " + dir.file("p.npy") + outputs, dir.path) ==
            "moe-route: " + dir.file("p.npy") + ": placement[3] = " + std::to_string(bad) + " must be in [0, 1023]");
    }
  }
  SUBCASE("an option given twice is refused, except the repeatable ones") {
    CHECK(run_output(route + " --top-k 4 --top-k 8" + outputs, dir.path) == "moe-route: option '--top-k' given twice");
    CHECK(run(route + outputs + " --ids " + dir.file("other.npy")) == 2);
  }
  SUBCASE("standard output that cannot be written fails the run") {
    REQUIRE(run("gen --preset uniform --experts 16 --top-k 2 --tokens 4 --steps 2 --out " + dir.file("t")) == 0);
    const int status = std::system((std::string(MOE_ROUTE_BINARY) + " replay --trace " + dir.file("t") +
                                    " --policy 'topk(k=2)' --json > /dev/full 2> /dev/null")
                                       .c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
  }
  SUBCASE("a device or a directory is never replaced by an output") {
    fs::create_directory(dir.file("d"));
    CHECK(run(route + " --ids " + dir.file("d") + " --weights " + dir.file("w.npy")) == 1);
    // A FIFO of our own stands for a device: a test must not risk replacing /dev/null.
    REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
    CHECK(run(route + " --ids " + dir.file("fifo") + " --weights " + dir.file("w.npy")) == 1);
    CHECK(fs::is_fifo(dir.file("fifo")));
    CHECK_FALSE(fs::exists(dir.file("w.npy")));
  }
  SUBCASE("-h as an option's value is that value, not a request for help") {
    CHECK(run(route + " --top-k -h" + outputs) == 2);
    CHECK(run("route --scores " + dir.file("s.npy") + " --policy -h" + outputs) == 2);
    CHECK(run(route + outputs + " --help") == 0);  // where an option name belongs it is help
  }
  SUBCASE("integers do not wrap, take no junk, and are not truncated from fractions") {
    CHECK(run(route + " --top-k 4294967298" + outputs) == 2);
    CHECK(run_output(route + " --top-k 4294967298" + outputs, dir.path) ==
          "moe-route: --top-k = 4294967298: must be in [1, 32]");
    CHECK(run(route + " --top-k 4.5" + outputs) == 2);
    CHECK(run(route + " --sentinel 2147483648" + outputs) == 2);
    CHECK(run(route + " --groups 4:2junk" + outputs) == 2);
    CHECK(run(route + " --scale nan" + outputs) == 2);
    CHECK(run(route + " --top-k 4" + outputs) == 0);
  }
}

TEST_CASE("moe-route gen replaces an earlier trace whole, and nothing else") {
  scratch_dir dir;
  const std::string out = dir.file("t");
  REQUIRE(run("gen --preset uniform --experts 16 --top-k 2 --tokens 4 --steps 2 --out " + out) == 0);
  std::vector<std::uint8_t> mask(8, 1);
  mr::npy::write(out + "/mask.npy", mr::npy::dtype::boolean, {8}, mask.data());  // a stale optional file
  REQUIRE(run("gen --preset uniform --experts 16 --top-k 2 --tokens 4 --steps 3 --out " + out) == 0);
  CHECK_FALSE(fs::exists(out + "/mask.npy"));
  CHECK(mr::io::load_trace(out).tokens == 12);

  fs::create_directory(dir.file("notes"));
  std::ofstream(dir.file("notes") + "/todo.txt") << "keep me";
  CHECK(run("gen --preset uniform --out " + dir.file("notes")) == 1);
  CHECK(read_file(dir.file("notes") + "/todo.txt") == "keep me");
  std::ofstream(dir.file("file")) << "x";
  CHECK(run("gen --preset uniform --out " + dir.file("file") + "/below") == 1);  // parent is a file
  CHECK(run("gen --preset uniform --layers 100000 --tokens 16384 --steps 100000 --out " + dir.file("huge")) == 2);
  // More tokens than int32 offsets hold (checked first: the score count could then overflow).
  CHECK(run_output("gen --preset uniform --tokens 16384 --steps 1000000000 --layers 4096 --experts 1024 --out " +
                       dir.file("huge"),
                   dir.path)
            .find("a trace holds at most 1073741824 tokens") != std::string::npos);
  // Few enough tokens, but 2^39 scores: refused before the generator allocates them.
  CHECK(
      run_output("gen --preset uniform --layers 4096 --tokens 16384 --steps 8 --experts 1024 --out " + dir.file("huge"),
                 dir.path)
          .find("scores: at most 268435456") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("huge")));
  for (const auto& entry : fs::directory_iterator(dir.path))
    CHECK(entry.path().string().find(".tmp") == std::string::npos);
}

TEST_CASE("moe-route batch reports the loads the library's batch forming gives the trace's requests") {
  scratch_dir dir;
  const std::string trace_dir = dir.file("t");
  REQUIRE(run("gen --preset qwen3-30b-a3b --experts 64 --top-k 4 --layers 2 --tokens 8 --requests 2 --steps 6 --out " +
              trace_dir) == 0);
  const std::string out = dir.file("batch.csv");
  REQUIRE(std::system((std::string(MOE_ROUTE_BINARY) + " batch --trace " + trace_dir +
                       " --batch-size 4 --method fifo --method oracle --csv > " + out + " 2>/dev/null")
                          .c_str()) == 0);
  // The same requests (2 per step, 4 tokens each) and their vanilla experts, gathered here.
  const mr::io::trace trace = mr::io::load_trace(trace_dir);
  moe_routing::batching::request_signatures signatures(12, 2, 64);
  std::vector<std::int32_t> segments;
  mr::cpu::workspace ws({8, 64, 4});
  for (int layer = 0; layer < 2; ++layer) {
    for (int s = 0; s < 6; ++s) {
      mr::routing_plan plan({.tokens = 8, .experts = 64, .top_k = 4});
      REQUIRE(mr::cpu::route(mr::presets::vanilla(4), trace.batch<float>(layer, s, segments), plan.view(), ws).ok());
      for (int token = 0; token < 8; ++token) {
        for (int j = 0; j < 4; ++j) signatures.add(2 * s + token / 4, layer, plan.id(token, j));
      }
    }
  }
  const std::string csv = read_file(out);
  for (const auto& formed : {std::pair{"fifo", moe_routing::batching::fifo_batches(12, 4)},
                             std::pair{"oracle", moe_routing::batching::greedy_batches(signatures, 4)}}) {
    const std::string method = formed.first;  // a named copy: clang 14 cannot capture a structured binding
    CAPTURE(method);
    const std::string row =
        method + ",3," + std::to_string(moe_routing::batching::expert_loads(signatures, formed.second)) + ",";
    CHECK(csv.find(row) != std::string::npos);
  }
  // Online admission and the expert-parallel oracle, with 4 devices of 16 contiguous experts.
  const std::string placed = dir.file("placed.csv");
  REQUIRE(std::system((std::string(MOE_ROUTE_BINARY) + " batch --trace " + trace_dir +
                       " --batch-size 4 --method online --method ep-oracle --max-wait 2 --devices 4 --csv > " + placed +
                       " 2>/dev/null")
                          .c_str()) == 0);
  std::vector<std::int32_t> blocks(64);
  for (int e = 0; e < 64; ++e) blocks[static_cast<std::size_t>(e)] = e / 16;
  const moe_routing::batching::device_masks masks(signatures, blocks, 4);
  const auto online = moe_routing::batching::online_batches(signatures, 4, 2);
  const auto ep = moe_routing::batching::greedy_ep_batches(signatures, masks, 4);
  const std::string placed_csv = read_file(placed);
  CHECK(placed_csv.find("busiest_device_loads") != std::string::npos);
  CHECK(placed_csv.find("online," + std::to_string(online.size()) + "," +
                        std::to_string(moe_routing::batching::expert_loads(signatures, online)) + ",") !=
        std::string::npos);
  CHECK(placed_csv.find("," + std::to_string(moe_routing::batching::busiest_device_loads(signatures, masks, ep)) +
                        ",") != std::string::npos);
  // --then: vanilla routing of the formed batches fetches exactly their signatures' union (the
  // signatures are vanilla's experts); OEA fetches no more than that.
  const auto routed_row = [&](const std::string& policy) {
    const std::string out_csv = dir.file("then.csv");
    REQUIRE(std::system((std::string(MOE_ROUTE_BINARY) + " batch --trace " + trace_dir +
                         " --batch-size 4 --method oracle --then '" + policy + "' --csv > " + out_csv + " 2>/dev/null")
                            .c_str()) == 0);
    const std::string text = read_file(out_csv);
    REQUIRE(text.find("routed_loads") != std::string::npos);
    std::vector<std::string> fields;
    std::string field;
    for (const char c : text.substr(text.find("\noracle,") + 1)) {
      if (c == ',' || c == '\n')
        fields.push_back(field), field.clear();
      else
        field += c;
      if (c == '\n') break;
    }
    REQUIRE(fields.size() == 7);  // method, batches, loads, saving, routed, routed saving, ms
    return std::pair{std::stoll(fields[2]), std::stoll(fields[4])};
  };
  const auto [vanilla_loads, vanilla_routed] = routed_row("topk(k=4)");
  CHECK(vanilla_loads ==
        moe_routing::batching::expert_loads(signatures, moe_routing::batching::greedy_batches(signatures, 4)));
  CHECK(vanilla_routed == vanilla_loads);
  const auto [oea_loads, oea_routed] = routed_row("oea(k0=1,k=4)");
  CHECK(oea_loads == vanilla_loads);
  CHECK(oea_routed <= vanilla_loads);
  CHECK(routed_row("topk(k=2)").second < vanilla_loads);  // the policy decides what is routed
  CHECK(run("batch --trace " + trace_dir + " --batch-size 4 --then 'prune(k0=1)'") == 2);  // not a policy
  CHECK(run("batch --trace " + trace_dir + " --batch-size 4 --method ep-oracle") == 2);    // no placement
  CHECK(run("batch --trace " + trace_dir + " --batch-size 4 --devices 65") == 2);
  CHECK(run("batch --trace " + trace_dir + " --batch-size 0") == 2);
  CHECK(run("batch --trace " + trace_dir + " --batch-size 4 --method psychic") == 2);
  CHECK(run("batch --trace " + dir.file("missing") + " --batch-size 4") == 1);
}

namespace {

/// Runs the tool with standard output and standard error in files (neither a terminal),
/// and returns its exit status and both texts.
struct tool_run {
  int status = -1;
  std::string out, err;
};
tool_run run_captured(const std::string& arguments, const fs::path& dir) {
  const fs::path out = dir / "captured_out.txt", err = dir / "captured_err.txt";
  const int status = std::system(
      (std::string(MOE_ROUTE_BINARY) + " " + arguments + " > " + out.string() + " 2> " + err.string()).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out.string()), read_file(err.string())};
}

/// A set stage of our own that does what the built-in `prune(k0)` does: each valid
/// token's best k0 experts are guaranteed (and so join S).
struct my_baseline {
  static constexpr mr::stage_role role = mr::stage_role::set;
  static constexpr const char* name = "my_baseline";
  int k0 = 1;
  void apply(mr::set_stage_context auto& context) const {
    for (int token = 0; token < context.tokens(); ++token) {
      if (context.is_valid(token)) context.guarantee(token, k0);
    }
  }
};
static_assert(mr::set_stage<my_baseline>);

/// Every figure of `report` equals the tool's JSON object at `from` (6 significant digits).
void check_same_figures(const std::string& json, std::size_t from, const mr::replay_figures& f) {
  CHECK(json_number(json, "mean_active", from) == doctest::Approx(f.active.mean).epsilon(1e-5));
  CHECK(json_number(json, "spread_active", from) == doctest::Approx(f.active.spread).epsilon(1e-5));
  CHECK(json_number(json, "mean_selected", from) == doctest::Approx(f.selected.mean).epsilon(1e-5));
  CHECK(json_number(json, "mean_retained_mass", from) == doctest::Approx(f.retained_mass.mean).epsilon(1e-5));
  CHECK(json_number(json, "spread_retained_mass", from) == doctest::Approx(f.retained_mass.spread).epsilon(1e-5));
  CHECK(json_number(json, "mean_recall", from) == doctest::Approx(f.recall.mean).epsilon(1e-5));
  CHECK(json_number(json, "max_device_load", from) == doctest::Approx(f.max_device_load.mean).epsilon(1e-5));
  CHECK(json_number(json, "modelled_latency_ratio", from) == doctest::Approx(f.latency_ratio.mean).epsilon(1e-5));
  CHECK(json_number(json, "steps", from) == f.steps);
}

}  // namespace

TEST_CASE("moe-route gen --devices writes a contiguous or round-robin placement that replay reads") {
  scratch_dir dir;
  const std::string base = "gen --preset uniform --experts 10 --top-k 2 --tokens 4 --steps 2 --devices 4";
  REQUIRE(run(base + " --out " + dir.file("c")) == 0);  // contiguous by default
  REQUIRE(run(base + " --placement contiguous --out " + dir.file("c2")) == 0);
  REQUIRE(run(base + " --placement round-robin --out " + dir.file("r")) == 0);
  // E = 10 over 4 devices: blocks of floor(e * 4 / 10), and e mod 4.
  CHECK(mr::io::load_trace(dir.file("c")).placement == std::vector<std::int32_t>{0, 0, 0, 1, 1, 2, 2, 2, 3, 3});
  CHECK(mr::io::load_trace(dir.file("c2")).placement == std::vector<std::int32_t>{0, 0, 0, 1, 1, 2, 2, 2, 3, 3});
  const mr::io::trace round_robin = mr::io::load_trace(dir.file("r"));
  CHECK(round_robin.placement == std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1});
  CHECK(round_robin.devices == 4);
  // The same scores as without a placement: --devices adds a file and changes nothing else.
  REQUIRE(run("gen --preset uniform --experts 10 --top-k 2 --tokens 4 --steps 2 --out " + dir.file("none")) == 0);
  CHECK(mr::io::load_trace(dir.file("none")).scores_f32 == round_robin.scores_f32);
  CHECK_FALSE(fs::exists(dir.file("none") + "/placement.npy"));

  const tool_run replayed = run_captured("replay --trace " + dir.file("r") + " --policy 'topk(k=2)' --json", dir.path);
  REQUIRE(replayed.status == 0);
  CHECK(replayed.out.find("\"max_device_load\": null") == std::string::npos);
  CHECK(run("gen --preset uniform --placement round-robin --out " + dir.file("x")) == 2);  // no --devices
  CHECK(run("gen --preset uniform --devices 4 --placement striped --out " + dir.file("x")) == 2);
  CHECK(run("gen --preset uniform --experts 16 --devices 17 --out " + dir.file("x")) == 2);
}

TEST_CASE("moe-route gen warns when --experts or --top-k overrides a calibrated preset's shape") {
  scratch_dir dir;
  const std::string sizes = " --tokens 4 --steps 2 --out " + dir.file("t");
  const tool_run wider = run_captured("gen --preset qwen3-30b-a3b --experts 256" + sizes, dir.path);
  CHECK(wider.status == 0);  // a warning, not a refusal: the shape is still useful
  CHECK(wider.err.find("moe-route: warning: --experts 256 (preset E = 128) overrides preset qwen3-30b-a3b") == 0);
  CHECK(wider.err.find("48.8 experts") != std::string::npos);  // says which calibration no longer holds
  const tool_run both = run_captured("gen --preset deepseek-r1 --experts 128 --top-k 4" + sizes, dir.path);
  CHECK(both.err.find("--experts 128 (preset E = 256) and --top-k 4 (preset k = 8)") != std::string::npos);
  // The preset's own shape, or the uniform preset (whose formula holds for any E and k): silent.
  CHECK(run_captured("gen --preset qwen3-30b-a3b --experts 128 --top-k 8" + sizes, dir.path).err.empty());
  CHECK(run_captured("gen --preset uniform --experts 256 --top-k 4" + sizes, dir.path).err.empty());
}

TEST_CASE("progress goes nowhere when stderr is not a terminal") {
  scratch_dir dir;
  REQUIRE(run("gen --preset uniform --experts 32 --top-k 4 --layers 2 --tokens 8 --steps 8 --devices 2 --out " +
              dir.file("t")) == 0);
  for (const std::string& command :
       {"replay --trace " + dir.file("t") + " --policy 'topk(k=4)' --policy 'oea(k0=1,k=4)'",
        "sweep --trace " + dir.file("t") + " --grid 'oea(k0=1..4,k=4)' --csv " + dir.file("s.csv") + " --svg " +
            dir.file("s.svg"),
        "batch --trace " + dir.file("t") + " --batch-size 2"}) {
    CAPTURE(command);
    const tool_run result = run_captured(command, dir.path);
    CHECK(result.status == 0);
    CHECK(result.err.empty());
  }
}

TEST_CASE("replay's latency under expert parallelism waits for the busiest device (a hand-worked example)") {
  // E = 8 on 2 devices (experts 0-3, 4-7), k = 2, one step of 2 tokens: token 0 prefers
  // experts 0 then 1, token 1 experts 2 then 4.
  //   vanilla top-2: {0, 1}, {2, 4}; device 0 fetches 3 experts and computes 3 assignments,
  //     device 1 fetches 1 and computes 1: T = max(3 + 3 x 0.5, 1 + 1 x 0.5) = 4.5
  //   topk(k=1): {0}, {2}, both on device 0: T = max(2 + 2 x 0.5, 0) = 3; ratio 3 / 4.5 = 2/3
  //   (the single-device model, 4 experts against 2, would claim (2 + 1) / (4 + 2) = 1/2).
  scratch_dir dir;
  const std::string trace = dir.file("t");
  fs::create_directories(trace);
  std::vector<float> scores(2 * 8, 0.0f);
  scores[0] = 5, scores[1] = 4, scores[8 + 2] = 5, scores[8 + 4] = 4;
  mr::npy::write(trace + "/scores.npy", mr::npy::dtype::float32, {1, 2, 8}, scores.data());
  const std::vector<std::int32_t> steps = {0, 2}, placement = {0, 0, 0, 0, 1, 1, 1, 1};
  mr::npy::write(trace + "/steps.npy", mr::npy::dtype::int32, {2}, steps.data());
  mr::npy::write(trace + "/placement.npy", mr::npy::dtype::int32, {8}, placement.data());
  std::ofstream(trace + "/trace.json") << "{\"top_k\": 2}";
  const std::string replay = "replay --trace " + trace + " --policy 'topk(k=2)' --policy 'topk(k=1)' --t-token 0.5";

  const tool_run placed = run_captured(replay + " --json", dir.path);
  REQUIRE(placed.status == 0);
  const std::size_t vanilla_at = placed.out.find("\"policy\": \"topk(k=2)\"");
  const std::size_t top1_at = placed.out.find("\"policy\": \"topk(k=1)\"");
  CHECK(json_number(placed.out, "max_device_load", vanilla_at) == 3);
  CHECK(json_number(placed.out, "modelled_latency_ratio", vanilla_at) == doctest::Approx(1.0));
  CHECK(json_number(placed.out, "max_device_load", top1_at) == 2);
  CHECK(json_number(placed.out, "modelled_latency_ratio", top1_at) == doctest::Approx(2.0 / 3.0).epsilon(1e-5));

  // Without the placement: the single-device model, and no busiest device to report.
  fs::remove(trace + "/placement.npy");
  const tool_run single = run_captured(replay + " --json", dir.path);
  REQUIRE(single.status == 0);
  CHECK(json_number(single.out, "modelled_latency_ratio", single.out.find("\"policy\": \"topk(k=1)\"")) ==
        doctest::Approx(0.5));
  CHECK(count_of(single.out, "\"max_device_load\": null") == 4);  // each policy, overall and its one layer
  const tool_run table = run_captured(replay, dir.path);
  CHECK(count_of(table.out, "          - ") == 4);  // max/device: "-", not a made-up 0.00
}

TEST_CASE("moe-route sweep labels each point with its parameters in the SVG itself") {
  scratch_dir dir;
  REQUIRE(run("gen --preset uniform --experts 32 --top-k 4 --tokens 8 --steps 4 --out " + dir.file("t")) == 0);
  REQUIRE(run("sweep --trace " + dir.file("t") +
              " --grid 'oea(k0=1..4,k=4)' --grid 'xshare(k0=1,m=0..4:4,k=4)' --grid 'topk(k=3)' --csv " +
              dir.file("s.csv") + " --svg " + dir.file("s.svg")) == 0);
  const std::string svg = read_file(dir.file("s.svg"));
  CHECK(count_of(svg, "class=\"label\"") == count_of(svg, "class=\"point\""));
  std::string labels;  // the label elements only (the legend repeats the grids' texts)
  for (std::size_t at = svg.find("<text class=\"label\""); at != std::string::npos;
       at = svg.find("<text class=\"label\"", at + 1)) {
    labels += svg.substr(at, svg.find('\n', at) - at + 1);
  }
  for (const char* label : {">k0=1</text>", ">k0=4</text>", ">m=0</text>", ">m=4</text>", ">topk(k=3)</text>"}) {
    CAPTURE(label);
    CHECK(count_of(labels, label) == 1);
  }
}

TEST_CASE("replay from C++ with a compiled policy, or a stage of one's own, gives the tool's figures") {
  scratch_dir dir;
  const std::string trace_dir = dir.file("t");
  REQUIRE(run("gen --preset qwen3-30b-a3b --layers 2 --tokens 8 --requests 4 --steps 6 --devices 4 --placement "
              "round-robin --out " +
              trace_dir) == 0);
  const tool_run tool = run_captured("replay --trace " + trace_dir + " --policy 'oea(k0=2,k=8)' --json", dir.path);
  REQUIRE(tool.status == 0);
  const mr::io::trace trace = mr::io::load_trace(trace_dir);
  const mr::trace_replay_report builtin = mr::cpu::replay_trace(trace, mr::prune{.k0 = 2} | mr::refine{.k = 8});
  const mr::trace_replay_report own = mr::cpu::replay_trace(trace, my_baseline{.k0 = 2} | mr::refine{.k = 8});
  REQUIRE(builtin.layers.size() == 2);
  for (const mr::trace_replay_report* report : {&builtin, &own}) {
    check_same_figures(tool.out, 0, report->overall);
    check_same_figures(tool.out, tool.out.find("\"layer\": 1"), report->layers[1]);
  }
  CHECK(own.overall.retained_mass.mean < 1.0);  // it did route, and lost mass as OEA does
  long long last = 0, total = 0;
  (void)mr::cpu::replay_trace(trace, mr::presets::vanilla(8), {}, [&](long long done, long long all) {
    CHECK(done == last + 1);
    last = done;
    total = all;
  });
  CHECK(last == 12);
  CHECK(total == 12);
  // A policy that does not fit the trace is refused before anything is routed.
  CHECK_THROWS_AS((void)mr::cpu::replay_trace(trace, mr::presets::vanilla(16)), mr::routing_error);
}

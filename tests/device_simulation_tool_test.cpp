// `moe-route replay --devices G [--replicas R]` on a trace small enough to work out by
// hand (E = 4, k = 2, G = 2, probabilities), and its usage errors.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/io/trace.hpp>

#ifndef MOE_ROUTE_BINARY
#error "the build passes the moe-route path"
#endif

namespace {
namespace mr = moe_routing;
namespace fs = std::filesystem;

struct simulation_dir {
  fs::path path = fs::temp_directory_path() / ("moe_route_devices_" + std::to_string(::getpid()));
  simulation_dir() { fs::create_directories(path); }
  ~simulation_dir() { fs::remove_all(path); }
};

/// stdout of `moe-route ARGS` as lines, and its exit status.
struct tool_result {
  int status = -1;
  std::vector<std::string> lines;
};
tool_result run_tool(const std::string& arguments, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt";
  const std::string command = std::string(MOE_ROUTE_BINARY) + " " + arguments + " > " + out.string() + " 2>&1";
  const int status = std::system(command.c_str());
  tool_result result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, {}};
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) result.lines.push_back(line);
  return result;
}

/// Two identical steps of two tokens: t0 ranks 0 1 2 3, t1 ranks 0 2 1 3 (top-2 {0,1} and
/// {0,2}).
std::string write_tiny_trace(const fs::path& dir) {
  mr::io::trace t;
  t.layers = 1;
  t.tokens = 4;
  t.experts = 4;
  t.top_k = 2;
  t.mode = mr::scoring::probabilities;
  t.source = "device simulation test";
  const std::vector<float> step = {0.60f, 0.30f, 0.08f, 0.02f, 0.50f, 0.10f, 0.35f, 0.05f};
  t.scores_f32 = step;
  t.scores_f32.insert(t.scores_f32.end(), step.begin(), step.end());
  t.steps = {0, 2, 4};
  const std::string where = (dir / "tiny").string();
  mr::io::save_trace(t, where);
  return where;
}

/// The CSV row of `policy` (quoted as the tool writes it), without the policy column.
std::string row_of(const tool_result& result, const std::string& policy) {
  const std::string start = "\"" + policy + "\",";
  for (const auto& line : result.lines) {
    if (line.rfind(start, 0) == 0) return line.substr(start.size());
  }
  return "missing: " + policy;
}

}  // namespace

TEST_CASE("replay --devices: contiguous layout, loads and straggler worked by hand") {
  simulation_dir dir;
  const std::string trace = write_tiny_trace(dir.path);
  const tool_result r = run_tool("replay --trace " + trace +
                                     " --devices 2 --csv --policy 'prune(k0=1)|refine(k=2)'"
                                     " --policy 'prune(k0=1)|ep_level()|refine(k=2)'",
                                 dir.path);
  REQUIRE(r.status == 0);
  CHECK(r.lines.at(0) ==
        "policy,devices,layout,dispatch,steps,active,mean_load,max_load,worst_max_load,straggler,max_tokens,"
        "token_straggler");
  // Devices {e0,e1} {e2,e3}. Vanilla: active {0,1,2}, loads {2,1}: max/mean 2/1.5; of the
  // four assignments device 0 takes three (max/mean 3/2).
  CHECK(row_of(r, "vanilla") == "2,contiguous,modulo,2,3.0000,1.5000,2.0000,2,1.3333,3.0000,1.5000");
  // OEA: S = {0}, loads {1,0}, straggler 2.
  CHECK(row_of(r, "prune(k0=1)|refine(k=2)") == "2,contiguous,modulo,2,1.0000,0.5000,1.0000,1,2.0000,2.0000,2.0000");
  // ep_level: device 1 takes e2 (t1's second choice) up to the busiest load 1: level.
  CHECK(row_of(r, "prune(k0=1)|ep_level()|refine(k=2)") ==
        "2,contiguous,modulo,2,2.0000,1.0000,1.0000,1,1.0000,2.0000,1.0000");
}

TEST_CASE("replay --devices --replicas: EPLB layout from the calibration step, both dispatch rules") {
  simulation_dir dir;
  const std::string trace = write_tiny_trace(dir.path);
  // Calibration (step 0) vanilla loads e0 2, e1 1, e2 1, e3 0: both extra slots go to e0.
  // Packed heaviest first: device 0 = slots {e1, e0, e0}, device 1 = {e2, e0, e3}.
  // Modulo: t0's e0 -> slot 1, e1 -> slot 0; t1's e0 -> slot 2, e2 -> slot 3: loads {3, 1}.
  tool_result r = run_tool(
      "replay --trace " + trace + " --devices 2 --replicas 2 --csv --policy 'prune(k0=1)|refine(k=2)'", dir.path);
  REQUIRE(r.status == 0);
  CHECK(row_of(r, "vanilla") == "2,eplb+2,modulo,1,3.0000,2.0000,3.0000,3,1.5000,3.0000,1.5000");
  // Least loaded: t1's e0 goes to the replica on device 1 (no assignment yet): loads {2, 2}.
  r = run_tool("replay --trace " + trace +
                   " --devices 2 --replicas 2 --dispatch least-loaded --csv --policy 'prune(k0=1)|refine(k=2)'",
               dir.path);
  REQUIRE(r.status == 0);
  CHECK(row_of(r, "vanilla") == "2,eplb+2,least-loaded,1,3.0000,2.0000,2.0000,2,1.0000,2.0000,1.0000");
}

TEST_CASE("replay --devices: usage errors name the option and value") {
  simulation_dir dir;
  const std::string trace = write_tiny_trace(dir.path);
  tool_result r = run_tool("replay --trace " + trace + " --devices 3 --policy 'prune(k0=1)|refine(k=2)'", dir.path);
  CHECK(r.status == 2);
  CHECK(r.lines.at(0).find("--devices = 3: must divide the 4 physical expert slots") != std::string::npos);
  r = run_tool("replay --trace " + trace + " --devices 2 --dispatch random --policy 'prune(k0=1)|refine(k=2)'",
               dir.path);
  CHECK(r.status == 2);
  CHECK(r.lines.at(0).find("--dispatch = random") != std::string::npos);
}

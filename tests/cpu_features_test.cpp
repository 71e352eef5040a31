// The run-time kernel selection against the CPU's own account of itself (/proc/cpuinfo's
// flags, which Linux clears for state it does not enable): this suite is built without
// -march, as a consumer builds it, so these checks say the fast paths are taken on a
// machine that has them.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <execution>
#include <fstream>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

#include <doctest/doctest.h>
#include <moe_routing/cpu.hpp>
#include <moe_routing/cpu/executor/environment_choice.hpp>
#include <moe_routing/cpu/executor/run_ahead.hpp>
#include <moe_routing/cpu/executor/stream_cache.hpp>
#include <moe_routing/cpu/executor/sweep_order.hpp>
#include <moe_routing/cpu/parallel_backend.hpp>
#include <moe_routing/cpu/simd/cpu_features.hpp>

namespace {
namespace mr = moe_routing;

/// The first processor's flags in /proc/cpuinfo (empty where there is none).
std::set<std::string> cpuinfo_flags() {
  std::ifstream info("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string flag; words >> flag;) flags.insert(flag);
    break;
  }
  return flags;
}

/// The value of the first processor's `key` line in /proc/cpuinfo ("" where there is none).
std::string cpuinfo_value(const std::string& key) {
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind(key, 0) != 0 || line.find(':') == std::string::npos) continue;
    if (line.find_first_not_of(" \t", key.size()) != line.find(':')) continue;  // "model" is not "model name"
    const std::size_t start = line.find_first_not_of(' ', line.find(':') + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

/// The level the flags allow, by the same rule as `detect_isa` but from another source.
mr::cpu::isa_level level_from_flags(const std::set<std::string>& f) {
  using mr::cpu::isa_level;
  const auto has = [&](std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if (!f.contains(name)) return false;
    }
    return true;
  };
  if (!has({"avx2", "fma", "f16c", "bmi1", "bmi2", "popcnt"})) return isa_level::portable;
  if (!has({"avx512f", "avx512bw", "avx512vl", "avx512dq"})) return isa_level::avx2;
  if (!has({"avx512_bf16"})) return isa_level::avx512;
  if (!has({"amx_tile", "amx_bf16"})) return isa_level::avx512_bf16;
  return isa_level::amx;
}

/// Whether /proc/cpuinfo's vendor, family and flags name Zen 4 (`is_zen4`).
bool cpuinfo_says_zen4() {
  const bool amd = cpuinfo_value("vendor_id") == "AuthenticAMD";
  const int family = std::stoi(cpuinfo_value("cpu family"));
  return mr::cpu::detail::is_zen4(amd, family, level_from_flags(cpuinfo_flags()) >= mr::cpu::isa_level::avx512);
}

bool isa_capped() {
  const char* cap = std::getenv("MOE_ROUTING_CPU_ISA");
  return cap != nullptr && *cap != '\0';
}

}  // namespace

TEST_CASE("built without -march, the kernels chosen are the best /proc/cpuinfo allows" *
          doctest::skip(cpuinfo_flags().empty() || isa_capped()) *
          doctest::description("skipped: no /proc/cpuinfo flags, or MOE_ROUTING_CPU_ISA caps the level")) {
  const auto flags = cpuinfo_flags();
  const mr::cpu::isa_level expected = level_from_flags(flags);
  const std::string report = mr::cpu::kernel_report();
  CAPTURE(report);
  CHECK(mr::cpu::name_of(mr::cpu::cpu_isa()) == std::string(mr::cpu::name_of(expected)));
  if (expected >= mr::cpu::isa_level::avx512) {
    CHECK(report.find("routing top-k and mass ranking: avx512") != std::string::npos);
  } else if (expected == mr::cpu::isa_level::avx2) {
    CHECK(report.find("routing top-k and mass ranking: avx2") != std::string::npos);
  }
  if (expected >= mr::cpu::isa_level::avx512_bf16) {  // amx where Linux grants the tiles
    const std::string executor = std::string("executor: ") + mr::cpu::name_of(mr::cpu::best_projection_level());
    CHECK(report.find(executor + " for bfloat16") != std::string::npos);
    CHECK(static_cast<int>(mr::cpu::best_projection_level()) >= static_cast<int>(mr::cpu::isa_level::avx512_bf16));
  } else if (expected == mr::cpu::isa_level::avx512) {  // Skylake-SP to Ice Lake: no bfloat16 instructions
    CHECK(report.find("executor: avx512_pairs for bfloat16 weights, avx512 otherwise") != std::string::npos);
  }
}

TEST_CASE("MOE_ROUTING_CPU_ISA caps the level (run by CTest with each cap)" * doctest::skip(!isa_capped()) *
          doctest::description("skipped: MOE_ROUTING_CPU_ISA is not set in this run")) {
  const char* cap = std::getenv("MOE_ROUTING_CPU_ISA");
  const auto capped = static_cast<mr::cpu::isa_level>(
      std::min(static_cast<int>(level_from_flags(cpuinfo_flags())), static_cast<int>(mr::cpu::detail::isa_cap())));
  CHECK(mr::cpu::name_of(mr::cpu::cpu_isa()) == std::string(mr::cpu::name_of(capped)));
  CHECK(mr::cpu::name_of(mr::cpu::detail::isa_cap()) == std::string(cap));
}

// Which CPUs the executor's tuning treats as Zen 4 (`cpu/simd/cpu_features.hpp`), worked out by
// hand, and the words the stream cache's override takes (`cpu/executor/stream_cache.hpp`).
TEST_CASE("Zen 4 by vendor, family and AVX-512, and the stream cache override's two words") {
  using mr::cpu::detail::is_zen4;
  CHECK(is_zen4(true, 25, true));         // Zen 4: family 19h with AVX-512
  CHECK_FALSE(is_zen4(true, 25, false));  // Zen 3: the same family, AVX2 only
  CHECK_FALSE(is_zen4(true, 26, true));   // Zen 5
  CHECK_FALSE(is_zen4(false, 6, true));   // Intel Xeon
  CHECK_FALSE(is_zen4(false, 25, true));  // family 25 of another vendor
  using mr::cpu::stream_cache;
  using mr::cpu::detail::parse_stream_cache;
  CHECK(parse_stream_cache("l1") == stream_cache::l1);
  CHECK(parse_stream_cache("l2") == stream_cache::l2);
  CHECK_FALSE(parse_stream_cache("L2").has_value());
  CHECK_FALSE(parse_stream_cache("l3").has_value());
  CHECK_FALSE(parse_stream_cache("").has_value());
  CHECK(std::string(mr::cpu::name_of(stream_cache::l2)) == "l2");
}

// The same choice on this machine, from /proc/cpuinfo's vendor, family and flags rather than
// CPUID; CTest runs it again with each override (stream_cache.l1, stream_cache.l2).
TEST_CASE("the weight rows stream where this CPU's default or MOE_ROUTING_STREAM_CACHE says" *
          doctest::skip(cpuinfo_value("cpu family").empty()) *
          doctest::description("skipped: /proc/cpuinfo names no CPU family")) {
  const char* text = std::getenv("MOE_ROUTING_STREAM_CACHE");
  mr::cpu::stream_cache expected{};
  if (text != nullptr && *text != '\0') {
    expected = std::string(text) == "l2" ? mr::cpu::stream_cache::l2 : mr::cpu::stream_cache::l1;
  } else {
    expected = cpuinfo_says_zen4() ? mr::cpu::stream_cache::l2 : mr::cpu::stream_cache::l1;
  }
  CAPTURE(cpuinfo_value("vendor_id"));
  CAPTURE(cpuinfo_value("cpu family"));
  CHECK(mr::cpu::weight_stream_cache() == expected);
#if MOE_ROUTING_X86_KERNELS
  // CPUID's vendor and family as Linux reads them, on any x86 machine (not only where they
  // change the default).
  const mr::cpu::detail::vendor_family cpu = mr::cpu::detail::cpu_vendor_family();
  CHECK(cpu.amd == (cpuinfo_value("vendor_id") == "AuthenticAMD"));
  CHECK(cpu.family == std::stoi(cpuinfo_value("cpu family")));
#endif
  const std::string report = mr::cpu::kernel_report();
  CAPTURE(report);
  CHECK(report.find(std::string("weight rows streamed into ") +
                    (expected == mr::cpu::stream_cache::l2 ? "L2" : "L1")) != std::string::npos);
}

// The one way the executor's switches read the environment (`cpu/executor/environment_choice.hpp`),
// on a variable of the test's own: unset or empty gives nothing (the CPU's default), a known word
// its setting. (An unknown word stops the program; the overrides' own tests run each known word.)
TEST_CASE("an environment switch: unset or empty leaves the default, a known word picks its setting") {
  const char* name = "MOE_ROUTING_TEST_SWITCH";
  const auto parse = [](const char* text) -> std::optional<int> {
    if (std::string(text) == "one") return 1;
    if (std::string(text) == "two") return 2;
    return std::nullopt;
  };
  unsetenv(name);
  CHECK_FALSE(mr::cpu::detail::environment_choice(name, "one or two", parse).has_value());
  setenv(name, "", 1);
  CHECK_FALSE(mr::cpu::detail::environment_choice(name, "one or two", parse).has_value());
  setenv(name, "two", 1);
  CHECK(mr::cpu::detail::environment_choice(name, "one or two", parse) == std::optional<int>(2));
  setenv(name, "one", 1);
  CHECK(mr::cpu::detail::environment_choice(name, "one or two", parse) == std::optional<int>(1));
  unsetenv(name);
}

// How the later passes run ahead on each vendor's CPUs, worked out by hand from what was measured
// (`cpu/executor/run_ahead.hpp`), and the override's two words.
TEST_CASE("run-ahead: a whole block on AMD's CPUs, one row per later pass on the others") {
  using mr::cpu::default_run_ahead;
  using mr::cpu::run_ahead_style;
  CHECK(default_run_ahead(true) == run_ahead_style::whole_block);        // Zen 3 to Zen 5
  CHECK(default_run_ahead(false) == run_ahead_style::one_row_per_pass);  // Intel Xeon
  using mr::cpu::detail::parse_run_ahead;
  CHECK(parse_run_ahead("block") == run_ahead_style::whole_block);
  CHECK(parse_run_ahead("row") == run_ahead_style::one_row_per_pass);
  CHECK_FALSE(parse_run_ahead("Row").has_value());
  CHECK_FALSE(parse_run_ahead("rows").has_value());
  CHECK_FALSE(parse_run_ahead("").has_value());
  CHECK(std::string(mr::cpu::name_of(run_ahead_style::whole_block)) == "block");
  CHECK(std::string(mr::cpu::name_of(run_ahead_style::one_row_per_pass)) == "row");
}

// The same on this machine, from /proc/cpuinfo's vendor rather than CPUID, as the report says it;
// CTest runs it again with each override (run_ahead.block, run_ahead.row).
TEST_CASE("the later passes run ahead as this CPU's default or MOE_ROUTING_RUN_AHEAD says" *
          doctest::skip(cpuinfo_value("vendor_id").empty()) *
          doctest::description("skipped: /proc/cpuinfo names no vendor")) {
  const char* text = std::getenv("MOE_ROUTING_RUN_AHEAD");
  const bool forced = text != nullptr && *text != '\0';
  const bool amd = cpuinfo_value("vendor_id") == "AuthenticAMD";
  CAPTURE(amd);
  const bool one_row = forced ? std::string(text) == "row" : !amd;
  CHECK(mr::cpu::weight_run_ahead() ==
        (one_row ? mr::cpu::run_ahead_style::one_row_per_pass : mr::cpu::run_ahead_style::whole_block));
  const std::string report = mr::cpu::kernel_report();
  CAPTURE(report);
  CHECK(report.find(one_row ? "run-ahead: one row per later pass" : "run-ahead: a whole block") != std::string::npos);
}

// The sweep order of each kernel on the CPUs it distinguishes, worked out by hand from what was
// measured (`cpu/executor/sweep_order.hpp`), and the override's two words.
TEST_CASE("sweep orders: blocks first for avx2_bf16, and for the AVX-512 kernels on Zen 4 alone") {
  using mr::cpu::default_sweep_order;
  using mr::cpu::sweep_order;
  for (const bool zen4 : {false, true}) {
    CAPTURE(zen4);
    CHECK(default_sweep_order(mr::cpu::avx2_bf16_kernel{}, zen4) == sweep_order::blocks_first);
    CHECK(default_sweep_order(mr::cpu::portable_kernel{}, zen4) == sweep_order::groups_first);
    CHECK(default_sweep_order(mr::cpu::avx2_kernel{}, zen4) == sweep_order::groups_first);
    const sweep_order avx512 = zen4 ? sweep_order::blocks_first : sweep_order::groups_first;
    CHECK(default_sweep_order(mr::cpu::avx512_kernel{}, zen4) == avx512);
    CHECK(default_sweep_order(mr::cpu::avx512_pairs_kernel{}, zen4) == avx512);
    CHECK(default_sweep_order(mr::cpu::avx512_bf16_kernel{}, zen4) == avx512);
  }
  using mr::cpu::detail::parse_sweep_order;
  CHECK(parse_sweep_order("groups") == sweep_order::groups_first);
  CHECK(parse_sweep_order("blocks") == sweep_order::blocks_first);
  CHECK_FALSE(parse_sweep_order("Blocks").has_value());
  CHECK_FALSE(parse_sweep_order("rows").has_value());
  CHECK_FALSE(parse_sweep_order("").has_value());
  CHECK(std::string(mr::cpu::name_of(sweep_order::blocks_first)) == "blocks");
  CHECK(std::string(mr::cpu::name_of(sweep_order::groups_first)) == "groups");
}

// The same on this machine, from /proc/cpuinfo rather than CPUID, as the report says it; CTest
// runs it again with each override (sweep_order.groups, sweep_order.blocks).
TEST_CASE("the sweeps take this CPU's order or MOE_ROUTING_SWEEP_ORDER's" *
          doctest::skip(cpuinfo_value("cpu family").empty()) *
          doctest::description("skipped: /proc/cpuinfo names no CPU family")) {
  const char* text = std::getenv("MOE_ROUTING_SWEEP_ORDER");
  const bool forced = text != nullptr && *text != '\0';
  const bool zen4 = cpuinfo_says_zen4();
  CAPTURE(zen4);
  const auto expected = [&](bool kernel_blocks_first) {
    const bool blocks = forced ? std::string(text) == "blocks" : kernel_blocks_first;
    return blocks ? mr::cpu::sweep_order::blocks_first : mr::cpu::sweep_order::groups_first;
  };
  CHECK(mr::cpu::sweep_order_of(mr::cpu::avx2_bf16_kernel{}) == expected(true));
  CHECK(mr::cpu::sweep_order_of(mr::cpu::avx2_kernel{}) == expected(false));
  CHECK(mr::cpu::sweep_order_of(mr::cpu::avx512_bf16_kernel{}) == expected(zen4));
  CHECK(mr::cpu::sweep_order_of(mr::cpu::avx512_kernel{}) == expected(zen4));
  CHECK(mr::cpu::sweep_order_of(mr::cpu::avx512_pairs_kernel{}) == expected(zen4));
  // The report names the bfloat16 kernel's order where that kernel is a row kernel (every one
  // but AMX), in words written out here.
  const std::string report = mr::cpu::kernel_report();
  CAPTURE(report);
  mr::cpu::with_projection_kernel<mr::bfloat16>(mr::cpu::best_projection_level(), [&](auto kernel) {
    using kernel_type = decltype(kernel);
    if constexpr (std::is_same_v<kernel_type, mr::cpu::amx_kernel>) {
      CHECK(report.find(" sweeps ") == std::string::npos);
    } else {
      const bool blocks = std::is_same_v<kernel_type, mr::cpu::avx2_bf16_kernel> ||
                          (zen4 && (std::is_same_v<kernel_type, mr::cpu::avx512_bf16_kernel> ||
                                    std::is_same_v<kernel_type, mr::cpu::avx512_pairs_kernel> ||
                                    std::is_same_v<kernel_type, mr::cpu::avx512_kernel>));
      const std::string words =
          std::string(kernel_type::name) + " sweeps " +
          (expected(blocks) == mr::cpu::sweep_order::blocks_first ? "blocks first" : "token groups first");
      CHECK(report.find(words) != std::string::npos);
    }
  });
}

/// The CPUs this process may run on (TBB sizes its pool by them, not by the machine's count).
static unsigned usable_cpus() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
#endif
  return std::thread::hardware_concurrency();
}

// The backend that runs `std::execution::par` decides whether the executor gets more than one
// core, and libstdc++ falls back to one thread silently when it finds no TBB. The report must
// name it, name what CMake linked, and be borne out by a parallel loop: where it says TBB the
// loop's first item waits (up to 2 s) for another thread to take an item, which a serial loop
// never does.
TEST_CASE("the kernel report names the parallel backend, and a parallel loop bears it out" *
          doctest::skip(usable_cpus() < 2) *
          doctest::description("skipped: this process may use one CPU, where TBB runs serially too")) {
  const std::string backend = mr::cpu::parallel_backend_name();
  const std::string report = mr::cpu::kernel_report();
  CAPTURE(report);
  CHECK(report.find("; parallel loops: " + backend) != std::string::npos);
  CHECK(backend == (MOE_ROUTING_TESTS_LINK_TBB ? "TBB" : "serial"));

  std::vector<int> items(256);
  std::iota(items.begin(), items.end(), 0);
  std::mutex guard;
  std::set<std::thread::id> threads;
  const auto seen = [&] {
    const std::lock_guard<std::mutex> lock(guard);
    threads.insert(std::this_thread::get_id());
    return threads.size();
  };
  std::for_each(std::execution::par, items.begin(), items.end(), [&](int item) {
    if (item != 0 || backend != "TBB") return static_cast<void>(seen());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (seen() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
  const std::size_t distinct = [&] {
    const std::lock_guard<std::mutex> lock(guard);
    return threads.size();
  }();
  CAPTURE(distinct);
  CHECK((distinct > 1) == (backend == "TBB"));
}

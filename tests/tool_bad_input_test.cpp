// Bad input through the real moe-route binary, generated: each of a few hundred command
// lines is a valid command with exactly one thing broken (an option value, an input file,
// a trace directory, a policy text, an output path, a missing or unknown word). This test
// proves that every one of them is refused cleanly:
//   - the process exits by itself: no signal, no hang, no large allocation;
//   - with status 2 for bad arguments, 1 for bad input files and failed writes;
//   - and says why on stderr's first line, "moe-route: <reason>";
//   - and leaves its working directory exactly as it found it: no new file, no temporary
//     left over, no old output (ids.npy, weights.npy, sweep.csv) truncated or rewritten.
// Each base command line is run first, unmutated, and must succeed and write its outputs
// into the watched directory: so a refusal is known to come from the mutation, not from a
// broken fixture, and "unchanged" is known to mean "the tool held back", not "it wrote
// somewhere else".

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <moe_routing/io/npy.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#ifndef MOE_ROUTE_BINARY
#error "the build passes the moe-route path"
#endif

namespace {

namespace mr = moe_routing;
namespace fs = std::filesystem;
using words = std::vector<std::string>;

// ---- running the tool ----

/// Limits past which a refusal is not "clean": bad input must be turned away before
/// any real work, so a case that runs long or grows large was not refused.
constexpr auto time_limit = std::chrono::seconds(5);
constexpr long memory_limit_kib = 1024 * 1024;

struct process_outcome {
  int wait_status = 0;
  bool killed_for_time = false;
  bool killed_for_memory = false;
  long peak_rss_kib = 0;
  std::string stdout_text, stderr_text;
};

/// The child side of a fork: stdin from /dev/null, stdout and stderr into the capture
/// files, the watched directory as working directory, then the tool. Only
/// async-signal-safe calls here.
[[noreturn]] void exec_tool(const char* working_dir, const char* stdout_path, const char* stderr_path, char** argv) {
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 ||
      ::chdir(working_dir) != 0) {
    ::_exit(126);
  }
  ::execv(argv[0], argv);
  ::_exit(127);
}

/// Resident memory of a running process, from /proc (0 once it has exited).
long resident_kib(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  long total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * (::sysconf(_SC_PAGESIZE) / 1024);
}

/// Waits for the child, killing it when it outlives `time_limit` or outgrows
/// `memory_limit_kib`: a tool that reads /dev/zero to the end must fail this test, not
/// hang it or take the machine's memory.
process_outcome wait_within_limits(pid_t pid) {
  process_outcome outcome;
  rusage usage{};
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const pid_t done = ::wait4(pid, &outcome.wait_status, WNOHANG, &usage);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    outcome.killed_for_memory = resident_kib(pid) > memory_limit_kib;
    outcome.killed_for_time = std::chrono::steady_clock::now() - start > time_limit;
    if (outcome.killed_for_memory || outcome.killed_for_time) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &outcome.wait_status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  outcome.peak_rss_kib = usage.ru_maxrss;
  return outcome;
}

/// The whole content of a file (empty when it cannot be opened). POSIX reads, not
/// streams: every case lists a few hundred fixture files, and this keeps that to ~1 ms.
std::string read_text(const fs::path& path) {
  std::string content;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return content;
  char buffer[1 << 16];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;)
    content.append(buffer, static_cast<std::size_t>(got));
  ::close(fd);
  return content;
}

/// Runs `moe-route args...` in `working_dir`; stdout and stderr go to files in
/// `capture_dir`, which is outside the watched directory so that capturing them is not
/// itself a change there.
process_outcome run_tool(const words& args, const fs::path& working_dir, const fs::path& capture_dir) {
  // Absolute, because the child changes directory before it executes the tool.
  words argv_text = {fs::absolute(MOE_ROUTE_BINARY).string()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& word : argv_text) argv.push_back(word.data());
  argv.push_back(nullptr);
  const std::string dir = working_dir.string(), out = (capture_dir / "stdout.txt").string(),
                    err = (capture_dir / "stderr.txt").string();
  const pid_t pid = ::fork();
  REQUIRE_MESSAGE(pid >= 0, "fork failed: " << std::strerror(errno));
  if (pid == 0) exec_tool(dir.c_str(), out.c_str(), err.c_str(), argv.data());
  process_outcome outcome = wait_within_limits(pid);
  outcome.stdout_text = read_text(out);
  outcome.stderr_text = read_text(err);
  return outcome;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

/// The command line as one could paste it into a shell.
std::string shell_line(const words& args) {
  std::string line = "moe-route";
  for (const auto& word : args) {
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:+-,") ==
                                            std::string::npos;
    if (plain) {
      line += " " + word;
      continue;
    }
    line += " '";
    for (const char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += "'";
  }
  return line;
}

// ---- the watched directory's listing ----

/// What a path in the watched directory is: its kind ('f' file, 'd' directory,
/// 'l' symbolic link, '?' other), its size and a hash of its content (or link target).
struct path_state {
  char kind = '?';
  std::uintmax_t size = 0;
  std::uint64_t hash = 0;
  bool operator==(const path_state&) const = default;
};
using listing = std::map<std::string, path_state>;

std::uint64_t fnv1a(const std::string& bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

/// Every path under `root`, links not followed (a trace fixture links to /dev/zero).
listing list_tree(const fs::path& root) {
  listing result;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const fs::file_status status = entry.symlink_status();
    path_state state;
    if (fs::is_symlink(status)) {
      state = {'l', 0, fnv1a(fs::read_symlink(entry.path()).string())};
    } else if (fs::is_directory(status)) {
      state = {'d', 0, 0};
    } else if (fs::is_regular_file(status)) {
      const std::string content = read_text(entry.path());
      state = {'f', content.size(), fnv1a(content)};
    }  // anything else (a fifo, a socket) stays '?': the tool has no reason to make one
    result[entry.path().lexically_relative(root).string()] = state;
  }
  return result;
}

/// "new X; changed Y (size a -> b); removed Z", or empty when nothing changed.
std::string describe_changes(const listing& before, const listing& after) {
  std::string changes;
  const auto note = [&](const std::string& what) { changes += (changes.empty() ? "" : "; ") + what; };
  for (const auto& [path, state] : after) {
    const auto old = before.find(path);
    if (old == before.end())
      note("new " + path);
    else if (!(old->second == state)) {
      note("changed " + path + " (size " + std::to_string(old->second.size) + " -> " + std::to_string(state.size) +
           ")");
    }
  }
  for (const auto& [path, state] : before) {
    if (after.count(path) == 0) note("removed " + path);
  }
  return changes;
}

// ---- fixtures ----

constexpr int tokens = 4, experts = 16, top_k = 4;

template <class T>
void write_array(const fs::path& path, mr::npy::dtype type, const std::vector<std::size_t>& shape,
                 const std::vector<T>& values) {
  mr::npy::write(path.string(), type, shape, values.data());
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

/// A version-1 .npy file with a hand-written header dictionary and `payload` zero bytes:
/// for headers npy::write cannot produce (other dtypes, Fortran order, shapes whose
/// product overflows).
void write_npy_header(const fs::path& path, const std::string& dictionary, std::size_t payload) {
  std::string header = dictionary;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  write_text(path, bytes + header + std::string(payload, '\0'));
}

/// Cuts `bytes` off the end of a file: a .npy whose data stops short of its shape.
void truncate_by(const fs::path& path, std::size_t bytes) {
  const std::string content = read_text(path);
  write_text(path, content.substr(0, content.size() - bytes));
}

void replace_in_file(const fs::path& path, const std::string& from, const std::string& to) {
  std::string content = read_text(path);
  const auto at = content.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, path.string() << " has no '" << from << "'");
  write_text(path, content.replace(at, from.size(), to));
}

std::vector<float> distinct_scores(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(std::sin(1.7 * static_cast<double>(i + 1)));
  return values;
}

/// The valid inputs of `route --scores`: scores [4, 16], bias, mask, two request
/// segments, and a placement over four devices.
void write_route_inputs(const fs::path& work) {
  using mr::npy::dtype;
  write_array(work / "s.npy", dtype::float32, {tokens, experts}, distinct_scores(tokens * experts));
  write_array(work / "b.npy", dtype::float32, {experts}, std::vector<float>(experts, 0.01f));
  write_array(work / "m.npy", dtype::boolean, {tokens}, std::vector<std::uint8_t>{1, 0, 1, 1});
  write_array(work / "o.npy", dtype::int64, {3}, std::vector<std::int64_t>{0, 2, 4});
  std::vector<std::int32_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e % 4;
  write_array(work / "p.npy", dtype::int32, {experts}, placement);
}

/// Outputs of an earlier run, with known content: a refused command must leave them as
/// they are (not truncate them, not half-rewrite them).
void write_old_outputs(const fs::path& work) {
  write_array(work / "ids.npy", mr::npy::dtype::int32, {1, 1}, std::vector<std::int32_t>{7});
  write_array(work / "weights.npy", mr::npy::dtype::float32, {1, 1}, std::vector<float>{0.5f});
  write_text(work / "sweep.csv", "old sweep.csv from an earlier run\n");
}

/// A trace of E = 16, k = 4, 2 layers, 3 decode steps of 4 tokens, 2 requests a step.
void write_trace(const fs::path& dir) {
  mr::synthetic::generator_config config = mr::synthetic::find_preset("uniform")->config;
  config.experts = experts;
  config.top_k = top_k;
  config.layers = 2;
  config.tokens_per_step = tokens;
  config.steps = 3;
  config.requests = 2;
  config.seed = 3;
  mr::io::save_trace(mr::synthetic::generate_trace(config), dir.string());
}

/// One bad input file: its path relative to the watched directory (or an absolute
/// system path), and what is wrong with it.
struct bad_file {
  std::string path;
  std::string defect;
};

/// Files no input option may accept, whatever it expects: not files, not .npy, cut
/// short, or with a header whose shape or dtype cannot be read as data.
std::vector<bad_file> unreadable_files() {
  return {{"emptydir", "a directory"},
          {"/dev/zero", "an endless device"},
          {"/dev/null", "an empty device"},
          {"bad/missing.npy", "a nonexistent file"},
          {"bad/text.npy", "a text file named .npy"},
          {"bad/empty.npy", "an empty file"},
          {"bad/header_cut.npy", "a header cut short"},
          {"bad/truncated.npy", "data shorter than the shape"},
          {"bad/overflow3.npy", "shape (4294967296, 4294967296, 16): the product wraps to 0"},
          {"bad/overflow2_zero.npy", "shape (4294967296, 4294967296): the product wraps to 0"},
          {"bad/overflow2.npy", "shape (4294967296, 4294967297): the product wraps"},
          {"bad/f64.npy", "dtype <f8"},
          {"bad/big_endian.npy", "dtype >f4"},
          {"bad/fortran.npy", "Fortran order"}};
}

void write_unreadable_files(const fs::path& bad) {
  write_text(bad / "text.npy", "definitely not numpy\n");
  write_text(bad / "empty.npy", "");
  const std::vector<float> scores = distinct_scores(tokens * experts);
  const auto whole = mr::npy::serialize(mr::npy::dtype::float32, {tokens, experts}, scores.data());
  write_text(bad / "header_cut.npy", std::string(whole.begin(), whole.begin() + 40));
  write_array(bad / "truncated.npy", mr::npy::dtype::float32, {tokens, experts}, distinct_scores(tokens * experts));
  truncate_by(bad / "truncated.npy", 10);
  write_npy_header(bad / "overflow3.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 0);
  write_npy_header(bad / "overflow2_zero.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0);
  write_npy_header(bad / "overflow2.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967297), }", 64);
  write_npy_header(bad / "f64.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 16), }",
                   8 * tokens * experts);
  write_npy_header(bad / "big_endian.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (4, 16), }",
                   4 * tokens * experts);
  write_npy_header(bad / "fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 16), }",
                   4 * tokens * experts);
}

/// Well-formed .npy files of the wrong dtype, rank, shape or values for one option.
std::map<std::string, std::vector<bad_file>> misfit_files() {
  return {
      {"--scores",
       {{"bad/scores_int32.npy", "int32 scores"},
        {"bad/scores_1d.npy", "1-D scores"},
        {"bad/scores_3d.npy", "3-D scores"},
        {"bad/scores_e1.npy", "E = 1"},
        {"bad/scores_e1025.npy", "E = 1025"},
        {"bad/scores_n16385.npy", "n = 16385"}}},
      {"--bias",
       {{"bad/bias_f16.npy", "float16 bias"},
        {"bad/bias_int32.npy", "int32 bias"},
        {"bad/bias_15.npy", "bias [15] for E = 16"},
        {"bad/bias_17.npy", "bias [17] for E = 16"},
        {"bad/bias_1x16.npy", "2-D bias"},
        {"bad/bias_4x16.npy", "bias [4, 16]"}}},
      {"--mask",
       {{"bad/mask_f32.npy", "float32 mask"},
        {"bad/mask_int32.npy", "int32 mask"},
        {"bad/mask_3.npy", "mask [3] for n = 4"},
        {"bad/mask_5.npy", "mask [5] for n = 4"},
        {"bad/mask_4x1.npy", "2-D mask"}}},
      {"--segments",
       {{"bad/seg_f32.npy", "float32 segments"},
        {"bad/seg_backwards.npy", "segments going backwards"},
        {"bad/seg_negative.npy", "a negative segment offset"},
        {"bad/seg_start1.npy", "segments starting at 1"},
        {"bad/seg_short.npy", "segments ending before n"},
        {"bad/seg_past.npy", "segments ending past n"},
        {"bad/seg_only0.npy", "segments [0]"},
        {"bad/seg_empty.npy", "no segment offsets"},
        {"bad/seg_2d.npy", "2-D segments"},
        {"bad/seg_wide.npy", "an int64 offset beyond int32"}}},
      {"--placement",
       {{"bad/place_f32.npy", "float32 placement"},
        {"bad/place_15.npy", "placement [15] for E = 16"},
        {"bad/place_16x1.npy", "2-D placement"},
        {"bad/place_negative.npy", "device -1"},
        {"bad/place_1024.npy", "device 1024"},
        {"bad/place_int_max.npy", "device 2147483647"},
        {"bad/place_wide.npy", "int64 device 4294967296"},
        {"bad/place_int64_min.npy", "int64 device -2^63"}}},
  };
}

void write_misfit_scores(const fs::path& bad) {
  using mr::npy::dtype;
  write_array(bad / "scores_int32.npy", dtype::int32, {tokens, experts},
              std::vector<std::int32_t>(tokens * experts, 1));
  write_array(bad / "scores_1d.npy", dtype::float32, {tokens * experts}, distinct_scores(tokens * experts));
  write_array(bad / "scores_3d.npy", dtype::float32, {1, tokens, experts}, distinct_scores(tokens * experts));
  write_array(bad / "scores_e1.npy", dtype::float32, {tokens, 1}, distinct_scores(tokens));
  write_array(bad / "scores_e1025.npy", dtype::float32, {1, 1025}, distinct_scores(1025));
  write_array(bad / "scores_n16385.npy", dtype::float16, {16385, 2}, std::vector<std::uint16_t>(2 * 16385, 0x3c00));
}

void write_misfit_bias_and_mask(const fs::path& bad) {
  using mr::npy::dtype;
  write_array(bad / "bias_f16.npy", dtype::float16, {experts}, std::vector<std::uint16_t>(experts, 0));
  write_array(bad / "bias_int32.npy", dtype::int32, {experts}, std::vector<std::int32_t>(experts, 0));
  write_array(bad / "bias_15.npy", dtype::float32, {15}, std::vector<float>(15, 0.0f));
  write_array(bad / "bias_17.npy", dtype::float32, {17}, std::vector<float>(17, 0.0f));
  write_array(bad / "bias_1x16.npy", dtype::float32, {1, experts}, std::vector<float>(experts, 0.0f));
  write_array(bad / "bias_4x16.npy", dtype::float32, {tokens, experts}, distinct_scores(tokens * experts));
  write_array(bad / "mask_f32.npy", dtype::float32, {tokens}, std::vector<float>(tokens, 1.0f));
  write_array(bad / "mask_int32.npy", dtype::int32, {tokens}, std::vector<std::int32_t>(tokens, 1));
  write_array(bad / "mask_3.npy", dtype::uint8, {3}, std::vector<std::uint8_t>(3, 1));
  write_array(bad / "mask_5.npy", dtype::uint8, {5}, std::vector<std::uint8_t>(5, 1));
  write_array(bad / "mask_4x1.npy", dtype::uint8, {tokens, 1}, std::vector<std::uint8_t>(tokens, 1));
}

void write_misfit_segments(const fs::path& bad) {
  using mr::npy::dtype;
  write_array(bad / "seg_f32.npy", dtype::float32, {3}, std::vector<float>{0, 2, 4});
  write_array(bad / "seg_backwards.npy", dtype::int32, {4}, std::vector<std::int32_t>{0, 3, 2, 4});
  write_array(bad / "seg_negative.npy", dtype::int32, {3}, std::vector<std::int32_t>{0, -2, 4});
  write_array(bad / "seg_start1.npy", dtype::int32, {2}, std::vector<std::int32_t>{1, 4});
  write_array(bad / "seg_short.npy", dtype::int32, {3}, std::vector<std::int32_t>{0, 2, 3});
  write_array(bad / "seg_past.npy", dtype::int32, {3}, std::vector<std::int32_t>{0, 2, 5});
  write_array(bad / "seg_only0.npy", dtype::int32, {1}, std::vector<std::int32_t>{0});
  write_array(bad / "seg_empty.npy", dtype::int32, {0}, std::vector<std::int32_t>{});
  write_array(bad / "seg_2d.npy", dtype::int32, {3, 1}, std::vector<std::int32_t>{0, 2, 4});
  write_array(bad / "seg_wide.npy", dtype::int64, {3}, std::vector<std::int64_t>{0, 2, 4294967300ll});
}

void write_misfit_placement(const fs::path& bad) {
  using mr::npy::dtype;
  const auto placement_with = [](std::int64_t device) {
    std::vector<std::int64_t> placement(experts, 0);
    placement[5] = device;
    return placement;
  };
  const auto narrow = [](const std::vector<std::int64_t>& wide) {
    return std::vector<std::int32_t>(wide.begin(), wide.end());
  };
  write_array(bad / "place_f32.npy", dtype::float32, {experts}, std::vector<float>(experts, 0.0f));
  write_array(bad / "place_15.npy", dtype::int32, {15}, std::vector<std::int32_t>(15, 0));
  write_array(bad / "place_16x1.npy", dtype::int32, {experts, 1}, std::vector<std::int32_t>(experts, 0));
  write_array(bad / "place_negative.npy", dtype::int32, {experts}, narrow(placement_with(-1)));
  write_array(bad / "place_1024.npy", dtype::int32, {experts}, narrow(placement_with(1024)));
  write_array(bad / "place_int_max.npy", dtype::int32, {experts}, narrow(placement_with(2147483647)));
  write_array(bad / "place_wide.npy", dtype::int64, {experts}, placement_with(4294967296ll));
  write_array(bad / "place_int64_min.npy", dtype::int64, {experts}, placement_with(INT64_MIN));
}

/// One way to break a copy of the good trace: a name (its directory under badtrace/),
/// what is wrong, and the edit that makes it so.
struct trace_defect {
  std::string name;
  std::string defect;
  std::function<void(const fs::path&)> apply;
};

/// Edits of trace.json: `"top_k": 4` and the shape fields are what save_trace writes.
std::vector<trace_defect> metadata_defects() {
  const auto set = [](std::string from, std::string to) {
    return [from, to](const fs::path& dir) { replace_in_file(dir / "trace.json", from, to); };
  };
  const auto rewrite = [](std::string text) {
    return [text](const fs::path& dir) { write_text(dir / "trace.json", text); };
  };
  return {{"top_k_real", "\"top_k\": 4.9", set("\"top_k\": 4,", "\"top_k\": 4.9,")},
          {"top_k_text", "\"top_k\": \"x\"", set("\"top_k\": 4,", "\"top_k\": \"x\",")},
          {"top_k_zero", "\"top_k\": 0", set("\"top_k\": 4,", "\"top_k\": 0,")},
          {"top_k_negative", "\"top_k\": -1", set("\"top_k\": 4,", "\"top_k\": -1,")},
          {"top_k_above_experts", "\"top_k\": 17 with E = 16", set("\"top_k\": 4,", "\"top_k\": 17,")},
          {"top_k_wraps", "\"top_k\": 4294967300", set("\"top_k\": 4,", "\"top_k\": 4294967300,")},
          {"top_k_missing", "no \"top_k\"", set("\"top_k\": 4,", "")},
          {"layers_disagree", "\"layers\": 3 against 2 in the scores", set("\"layers\": 2,", "\"layers\": 3,")},
          {"experts_disagree", "\"experts\": 15 against 16 in the scores", set("\"experts\": 16,", "\"experts\": 15,")},
          {"scoring_unknown", "\"scoring\": \"cubic\"", set("\"softmax\"", "\"cubic\"")},
          {"json_garbage", "trace.json is not JSON", rewrite("this is not json\n")},
          {"json_empty", "trace.json is empty", rewrite("")},
          {"json_unterminated", "trace.json stops mid-object", rewrite("{\"top_k\": 4")},
          {"json_missing", "no trace.json next to the .npy files",
           [](const fs::path& dir) { fs::remove(dir / "trace.json"); }},
          {"json_directory", "trace.json is a directory", [](const fs::path& dir) {
             fs::remove(dir / "trace.json");
             fs::create_directory(dir / "trace.json");
           }}};
}

/// Replaces one .npy file of a trace with the given array.
template <class T>
std::function<void(const fs::path&)> replace_array(std::string file, mr::npy::dtype type,
                                                   std::vector<std::size_t> shape, std::vector<T> values) {
  return [=](const fs::path& dir) { write_array(dir / file, type, shape, values); };
}

std::vector<trace_defect> scores_defects() {
  using mr::npy::dtype;
  const std::size_t layers = 2, trace_tokens = 3 * tokens;  // the good trace's shape
  return {
      {"scores_missing", "no scores.npy", [](const fs::path& dir) { fs::remove(dir / "scores.npy"); }},
      {"scores_int32", "int32 scores",
       replace_array("scores.npy", dtype::int32, {layers, trace_tokens, experts},
                     std::vector<std::int32_t>(layers * trace_tokens * experts, 1))},
      {"scores_2d", "2-D scores.npy",
       replace_array("scores.npy", dtype::float32, {trace_tokens, experts}, distinct_scores(trace_tokens * experts))},
      {"scores_truncated", "scores.npy cut short", [](const fs::path& dir) { truncate_by(dir / "scores.npy", 16); }},
      {"scores_overflow", "scores.npy of shape (4294967296, 4294967296, 16)",
       [](const fs::path& dir) {
         write_npy_header(dir / "scores.npy",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 0);
       }},
      {"scores_dev_zero", "scores.npy links to /dev/zero",
       [](const fs::path& dir) {
         fs::remove(dir / "scores.npy");
         fs::create_symlink("/dev/zero", dir / "scores.npy");
       }},
      {"scores_directory", "scores.npy is a directory", [](const fs::path& dir) {
         fs::remove(dir / "scores.npy");
         fs::create_directory(dir / "scores.npy");
       }}};
}

std::vector<trace_defect> offsets_defects() {
  using mr::npy::dtype;
  using offsets = std::vector<std::int32_t>;
  std::vector<std::int32_t> negative_placement(experts, 0), wide_placement(experts, 0);
  negative_placement[3] = -1;
  wide_placement[3] = 1024;
  return {
      {"steps_missing", "no steps.npy", [](const fs::path& dir) { fs::remove(dir / "steps.npy"); }},
      {"steps_backwards", "steps going backwards", replace_array("steps.npy", dtype::int32, {4}, offsets{0, 8, 4, 12})},
      {"steps_short", "steps ending before the last token",
       replace_array("steps.npy", dtype::int32, {3}, offsets{0, 4, 8})},
      {"steps_past_end", "steps ending past the last token",
       replace_array("steps.npy", dtype::int32, {4}, offsets{0, 4, 8, 16})},
      {"steps_float", "float32 steps",
       replace_array("steps.npy", dtype::float32, {4}, std::vector<float>{0, 4, 8, 12})},
      {"steps_2d", "2-D steps", replace_array("steps.npy", dtype::int32, {4, 1}, offsets{0, 4, 8, 12})},
      {"segments_span_steps", "a segment spanning a step boundary",
       replace_array("segments.npy", dtype::int32, {3}, offsets{0, 6, 12})},
      {"segments_backwards", "segments going backwards",
       replace_array("segments.npy", dtype::int32, {5}, offsets{0, 4, 2, 8, 12})},
      {"mask_short", "mask [11] for 12 tokens",
       replace_array("mask.npy", dtype::boolean, {11}, std::vector<std::uint8_t>(11, 1))},
      {"mask_float", "float32 mask", replace_array("mask.npy", dtype::float32, {12}, std::vector<float>(12, 1.0f))},
      {"placement_short", "placement [15] for E = 16",
       replace_array("placement.npy", dtype::int32, {15}, offsets(15, 0))},
      {"placement_negative", "placement with device -1",
       replace_array("placement.npy", dtype::int32, {experts}, negative_placement)},
      {"placement_1024", "placement with device 1024",
       replace_array("placement.npy", dtype::int32, {experts}, wide_placement)}};
}

std::vector<trace_defect> trace_defects() {
  std::vector<trace_defect> all = metadata_defects();
  for (auto part : {scores_defects(), offsets_defects()}) all.insert(all.end(), part.begin(), part.end());
  return all;
}

/// Directories no --trace option may accept: the good trace, broken one way each, and
/// paths that are no trace at all.
std::vector<bad_file> bad_trace_dirs() {
  std::vector<bad_file> dirs = {{"badtrace/missing", "a nonexistent directory"},
                                {"s.npy", "a regular file"},
                                {"emptydir", "an empty directory"},
                                {"notrace", "a directory without trace.json"},
                                {"/dev/null", "a device"}};
  for (const auto& defect : trace_defects()) dirs.push_back({"badtrace/" + defect.name, defect.defect});
  return dirs;
}

void write_bad_traces(const fs::path& work) {
  for (const auto& defect : trace_defects()) {
    const fs::path dir = work / "badtrace" / defect.name;
    fs::create_directories(dir);
    fs::copy(work / "trace", dir, fs::copy_options::recursive);
    defect.apply(dir);
  }
}

/// Builds the watched directory from nothing: inputs, bad inputs, old outputs.
void write_fixtures(const fs::path& work) {
  fs::remove_all(work);
  fs::create_directories(work / "bad");
  fs::create_directories(work / "emptydir");
  fs::create_directories(work / "notrace");
  write_text(work / "notrace" / "keep.txt", "not a trace: gen --out must leave this alone\n");
  write_route_inputs(work);
  write_old_outputs(work);
  write_unreadable_files(work / "bad");
  write_misfit_scores(work / "bad");
  write_misfit_bias_and_mask(work / "bad");
  write_misfit_segments(work / "bad");
  write_misfit_placement(work / "bad");
  write_trace(work / "trace");
  // The generated trace has segments but no mask or placement; the defects above edit both.
  write_array(work / "trace" / "mask.npy", mr::npy::dtype::boolean, {12}, std::vector<std::uint8_t>(12, 1));
  std::vector<std::int32_t> placement(experts);
  for (int e = 0; e < experts; ++e) placement[static_cast<std::size_t>(e)] = e % 2;
  write_array(work / "trace" / "placement.npy", mr::npy::dtype::int32, {experts}, placement);
  write_bad_traces(work);
}

/// A scratch directory holding the watched working directory (work/) and, beside it,
/// the captured stdout and stderr of each run.
class sandbox {
 public:
  sandbox() : root_(fs::temp_directory_path() / ("moe_route_bad_input_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
    reset();
  }
  ~sandbox() { fs::remove_all(root_); }
  sandbox(const sandbox&) = delete;
  sandbox& operator=(const sandbox&) = delete;

  /// Back to the known state, after a base run wrote outputs or a bad run changed something.
  void reset() {
    write_fixtures(work());
    pristine_ = list_tree(work());
  }
  fs::path work() const { return root_ / "work"; }
  process_outcome run(const words& args) const { return run_tool(args, work(), root_); }
  std::string changes() const { return describe_changes(pristine_, list_tree(work())); }

 private:
  fs::path root_;
  listing pristine_;
};

// ---- cases ----

/// One generated case: a kind (for counting), what is wrong, the command line, the
/// status it must exit with.
struct bad_case {
  std::string kind;
  std::string defect;
  words args;
  int expected_status;
};

constexpr int bad_arguments = 2, bad_input = 1;

/// `base` with `--option value`: the value replaced where the option is given, appended otherwise.
words with(words args, const std::string& option, const std::string& value) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == option) {
      args[i + 1] = value;
      return args;
    }
  }
  args.push_back(option);
  args.push_back(value);
  return args;
}

words without(words args, const std::string& option) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == option) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      return args;
    }
  }
  FAIL("base command has no " << option);
  return args;
}

words plus(words args, const words& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

/// One case per value: `option` of `base` set to each of `values`.
void add_values(std::vector<bad_case>& cases, const std::string& kind, const words& base, const std::string& option,
                const words& values, int expected) {
  for (const auto& value : values)
    cases.push_back({kind, option + " '" + value + "'", with(base, option, value), expected});
}

void add_files(std::vector<bad_case>& cases, const std::string& kind, const words& base, const std::string& option,
               const std::vector<bad_file>& files, int expected) {
  for (const auto& file : files)
    cases.push_back({kind, option + ": " + file.defect, with(base, option, file.path), expected});
}

/// Text no integer option may take: values that wrap around in a narrower type, junk
/// after the digits, other bases, fractions and exponents, nothing, and help words
/// (which after an option are its value, not a request for help).
const words not_integers = {"4294967298",
                            "9223372036854775808",
                            "-9223372036854775809",
                            "18446744073709551617",
                            "2junk",
                            "4 ",
                            "0x10",
                            "4.5",
                            "1e3",
                            "",
                            "abc",
                            "nan",
                            "-h",
                            "--help"};
/// For --seed, a 64-bit unsigned value: only what no integer type can hold, and junk.
const words not_seeds = {"18446744073709551616",
                         "-9223372036854775809",
                         "2junk",
                         "4 ",
                         "0x10",
                         "4.5",
                         "1e3",
                         "",
                         "abc",
                         "nan",
                         "-h",
                         "--help"};
/// Text no real option may take (non-finite values are refused by every real option here).
const words not_reals = {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "1.5x", "0x", "", "abc", "-h", "--help"};

/// Policy texts with a syntax error: refused by the parser before any meaning is given.
const words policy_syntax_errors = {"",
                                    "   ",
                                    "oea(k0=2,k=4",
                                    "oea(k0=2,,k=4)",
                                    "oea k0=2",
                                    "| refine(k=4)",
                                    "prune(k0=2) |",
                                    "prune(k0=2) || refine(k=4)",
                                    "oea(k0=4,k=4) junk",
                                    "oea(k0=2,k=4))",
                                    "nonesuch(k=4)",
                                    "topk(k=)",
                                    "topk(=4)",
                                    "topk(k=4.5)",
                                    "topk(k=4junk)",
                                    "topk(k=0x4)",
                                    "topk(k=4294967300)",
                                    "topk(k=9223372036854775808)",
                                    "topk(k=nan)",
                                    "refine(k=4)",
                                    "prune(k0=2) | refine(k=4) | refine(k=4)",
                                    "-h",
                                    "--help"};
/// Policy texts that parse but say something impossible or contradictory.
const words policy_meaning_errors = {"topk(k=4,gate=dense)",
                                     "oea(k0=2,k=4,gate=dense)",
                                     "prune(k0=2,beta=0.1,skip_ratio=0.2) | refine(k=4)",
                                     "prune(k0=2) | greedy_mass(add=2,m=2) | refine(k=4)",
                                     "topk(k=4,k=4)",
                                     "prune(k0=2,k0=3) | refine(k=4)",
                                     "xshare(k0=1,m=-1,k=4)",
                                     "oea(k0=-1,k=4)",
                                     "oea(k0=6,k=4)",
                                     "topk(k=-1)",
                                     "topk(k=17)",
                                     "topk(k=33)"};

/// Words no command knows, in place of an option.
const std::vector<words> unknown_words = {{"--frob", "1"},  {"--frob"},       {"stray"},
                                          {"-x"},           {"--"},           {"---out", "x"},
                                          {"--TOP-K", "4"}, {"--top_k", "4"}, {"--policy=topk(k=4)"}};

void add_unknown_and_valueless(std::vector<bad_case>& cases, const words& base, const words& value_options) {
  for (const auto& extra : unknown_words)
    cases.push_back({"unknown option", "an unknown word", plus(base, extra), bad_arguments});
  // Each option last with no value after it.
  for (const auto& option : value_options)
    cases.push_back({"missing value", option + " without a value", plus(base, {option}), bad_arguments});
}

// ---- running the cases ----

/// Runs a base command line, requires success, and checks that each named output was
/// written into the watched directory; then puts the directory back.
void require_base_succeeds(sandbox& box, const words& base, const words& outputs) {
  INFO("base command: " << shell_line(base));
  const process_outcome outcome = box.run(base);
  INFO("stderr: " << outcome.stderr_text);
  REQUIRE_MESSAGE((WIFEXITED(outcome.wait_status) && WEXITSTATUS(outcome.wait_status) == 0),
                  "the unmutated command must succeed (wait status " << outcome.wait_status << ")");
  const std::string changes = box.changes();
  for (const auto& output : outputs) {
    CHECK_MESSAGE(changes.find(" " + output) != std::string::npos,
                  "the base command must write " << output << " into the watched directory; changes: " << changes);
  }
  box.reset();
}

void check_exit(const process_outcome& outcome, const bad_case& c) {
  if (outcome.killed_for_time) {
    FAIL_CHECK("still running after " << time_limit.count() << " s: killed");
  } else if (outcome.killed_for_memory) {
    FAIL_CHECK("grew past " << memory_limit_kib / 1024 << " MiB resident: killed");
  } else if (WIFSIGNALED(outcome.wait_status)) {
    const int signal = WTERMSIG(outcome.wait_status);
    FAIL_CHECK("killed by signal " << signal << " (" << std::string(::strsignal(signal)) << ")");
  } else {
    const int status = WEXITSTATUS(outcome.wait_status);
    CHECK_MESSAGE(status == c.expected_status, "exit status "
                                                   << status << ", expected " << c.expected_status
                                                   << std::string(status == 0 ? " (the bad input was accepted)" : ""));
  }
}

/// Runs one bad case and checks every property of a clean refusal.
void expect_clean_refusal(sandbox& box, const bad_case& c) {
  const process_outcome outcome = box.run(c.args);
  INFO(c.kind << " (" << c.defect << "): " << shell_line(c.args));
  INFO("stderr: " << first_line(outcome.stderr_text));
  INFO("stdout: " << first_line(outcome.stdout_text));
  check_exit(outcome, c);
  const std::string message = first_line(outcome.stderr_text);
  CHECK_MESSAGE((message.rfind("moe-route: ", 0) == 0 && message.find_first_not_of(' ', 11) != std::string::npos),
                "stderr's first line must be 'moe-route: <reason>'");
  // --groups has three conditions (G divides E, T <= G, T * E / G >= k) and one
  // "G:T" value: the reason must say which option it is about.
  if (c.kind == "groups") CHECK_MESSAGE(message.find("groups") != std::string::npos, "the reason must name --groups");
  CHECK_MESSAGE(outcome.peak_rss_kib < memory_limit_kib,
                "peak resident memory " << outcome.peak_rss_kib / 1024 << " MiB");
  const std::string changes = box.changes();
  CHECK_MESSAGE(changes.empty(), "the working directory changed: " << changes);
  if (!changes.empty()) box.reset();  // so that one leak does not fail every later case
}

void run_all(sandbox& box, const std::vector<bad_case>& cases) {
  // A floor on the count: a generator that silently lost its tables would pass vacuously.
  CHECK(cases.size() >= 40);
  for (const auto& c : cases) expect_clean_refusal(box, c);
}

// ---- route ----

const words route_scores_base = {
    "route",     "--scores",   "s.npy",      "--policy",    "oea(k0=2,k=4)", "--scoring", "sigmoid",
    "--bias",    "b.npy",      "--groups",   "8:4",         "--group-score", "max",       "--mask",
    "m.npy",     "--segments", "o.npy",      "--placement", "p.npy",         "--phase",   "decode",
    "--padding", "sentinel",   "--sentinel", "-1",          "--scale",       "2.5",       "--top-k",
    "4",         "--ids",      "ids.npy",    "--weights",   "weights.npy",   "--counts",  "counts.npy"};
const words route_trace_base = {"route",   "--trace",   "trace",       "--layer",       "1",
                                "--step",  "2",         "--policy",    "oea(k0=2,k=4)", "--ids",
                                "ids.npy", "--weights", "weights.npy", "--counts",      "counts.npy"};
const words route_outputs = {"ids.npy", "weights.npy", "counts.npy"};

void add_route_numbers(std::vector<bad_case>& cases) {
  const words& base = route_scores_base;
  add_values(cases, "integer option", base, "--top-k", plus(not_integers, {"0", "-1", "17", "33"}), bad_arguments);
  add_values(cases, "integer option", base, "--sentinel", plus(not_integers, {"2147483648", "-2147483649"}),
             bad_arguments);
  add_values(cases, "integer option", route_trace_base, "--layer", plus(not_integers, {"-1", "2", "2147483648"}),
             bad_arguments);
  add_values(cases, "integer option", route_trace_base, "--step", plus(not_integers, {"-1", "3"}), bad_arguments);
  add_values(cases, "real option", base, "--scale", plus(not_reals, {"0", "-0", "-1"}), bad_arguments);
}

void add_route_choices(std::vector<bad_case>& cases) {
  const words& base = route_scores_base;
  add_values(cases, "choice option", base, "--scoring", {"cubic", "", "Softmax", "softmax ", "-h", "--help"},
             bad_arguments);
  add_values(cases, "choice option", base, "--group-score", {"mean", "", "MAX", "-h"}, bad_arguments);
  add_values(cases, "choice option", base, "--phase", {"both", "", "Decode", "-h"}, bad_arguments);
  add_values(cases, "choice option", base, "--padding", {"zero", "", "-h"}, bad_arguments);
  // E = 16, plan width k = 4: G must divide 16, 1 <= T <= G, T * (16 / G) >= 4.
  add_values(
      cases, "groups", base, "--groups",
      {"8",   "8:",  ":4",   "8:4:2", "8:4x", "x:4",          "8.0:4",        "8 :4", "0x8:4", "3:1",  "32:4", "0:0",
       "8:0", "8:9", "-8:4", "16:17", "8:-1", "4294967304:4", "8:4294967300", "8:1",  "16:1",  "16:3", "",     "-h"},
      bad_arguments);
}

void add_route_files(std::vector<bad_case>& cases) {
  for (const auto& [option, misfits] : misfit_files()) {
    add_files(cases, "input file", route_scores_base, option, unreadable_files(), bad_input);
    add_files(cases, "input file", route_scores_base, option, misfits, bad_input);
  }
  add_files(cases, "trace directory", route_trace_base, "--trace", bad_trace_dirs(), bad_input);
}

void add_route_outputs(std::vector<bad_case>& cases, const fs::path& work) {
  const words& base = route_scores_base;
  // Writes that fail: into a missing directory, onto a directory, below a regular file.
  for (const auto& option : {"--ids", "--weights", "--counts"}) {
    add_values(cases, "output path", base, option, {"nodir/out.npy", "emptydir", "s.npy/out.npy"}, bad_input);
  }
  // Two outputs naming one file, however the name is spelled.
  const std::string absolute_ids = (fs::absolute(work) / "ids.npy").string();
  const std::vector<std::pair<std::string, std::string>> collisions = {
      {"--weights", "ids.npy"},          {"--ids", "weights.npy"},   {"--counts", "ids.npy"},
      {"--counts", "weights.npy"},       {"--weights", "./ids.npy"}, {"--weights", ".//ids.npy"},
      {"--weights", "trace/../ids.npy"}, {"--weights", absolute_ids}};
  for (const auto& [option, path] : collisions) {
    cases.push_back(
        {"same output", option + " " + path + " names another output", with(base, option, path), bad_arguments});
  }
}

void add_route_policies(std::vector<bad_case>& cases) {
  add_values(cases, "policy text", route_scores_base, "--policy", policy_syntax_errors, bad_arguments);
  add_values(cases, "policy text", route_scores_base, "--policy", policy_meaning_errors, bad_arguments);
}

void add_route_structure(std::vector<bad_case>& cases) {
  add_unknown_and_valueless(
      cases, route_scores_base,
      {"--scores",   "--trace",       "--layer", "--step",     "--policy",    "--scoring", "--bias",
       "--groups",   "--group-score", "--mask",  "--segments", "--placement", "--phase",   "--padding",
       "--sentinel", "--scale",       "--top-k", "--ids",      "--weights",   "--counts"});
  for (const auto& option : {"--policy", "--ids", "--weights", "--scores"}) {
    cases.push_back({"missing option", "no " + std::string(option), without(route_scores_base, option), bad_arguments});
  }
  cases.push_back({"missing option", "no --trace", without(route_trace_base, "--trace"), bad_arguments});
  cases.push_back({"missing option", "nothing", {"route"}, bad_arguments});
  cases.push_back(
      {"conflicting options", "--scores and --trace", plus(route_scores_base, {"--trace", "trace"}), bad_arguments});
}

// ---- gen ----

const words gen_base = {"gen",      "--preset", "uniform",  "--experts", "16",      "--top-k", "4",
                        "--layers", "2",        "--tokens", "4",         "--steps", "3",       "--requests",
                        "2",        "--seed",   "7",        "--out",     "gen_out"};

void add_gen_numbers(std::vector<bad_case>& cases) {
  const words& base = gen_base;
  add_values(cases, "integer option", base, "--experts", plus(not_integers, {"0", "1", "1025", "-16"}), bad_arguments);
  add_values(cases, "integer option", base, "--top-k", plus(not_integers, {"0", "-1", "17"}), bad_arguments);
  add_values(cases, "integer option", base, "--layers", plus(not_integers, {"0", "-1"}), bad_arguments);
  add_values(cases, "integer option", base, "--tokens", plus(not_integers, {"0", "-1", "16385"}), bad_arguments);
  add_values(cases, "integer option", base, "--steps", plus(not_integers, {"0", "-1"}), bad_arguments);
  add_values(cases, "integer option", base, "--requests", plus(not_integers, {"-1", "5"}), bad_arguments);
  add_values(cases, "integer option", base, "--seed", not_seeds, bad_arguments);
  cases.push_back({"integer option", "--top-k 33 above the cap of 32",
                   with(with(base, "--experts", "64"), "--top-k", "33"), bad_arguments});
  add_values(cases, "choice option", base, "--preset", {"nonesuch", "", "Uniform", "uniform ", "-h", "--help"},
             bad_arguments);
  // Expert parallelism over 1 to E = 16 devices, contiguous or round-robin.
  const words placed = plus(base, {"--devices", "4", "--placement", "round-robin"});
  add_values(cases, "integer option", placed, "--devices", plus(not_integers, {"0", "-1", "17"}), bad_arguments);
  add_values(cases, "choice option", placed, "--placement",
             {"striped", "", "Contiguous", "round_robin", "round-robin ", "-h", "--help"}, bad_arguments);
  cases.push_back({"missing option", "--placement without --devices", without(placed, "--devices"), bad_arguments});
}

/// Sizes each in range whose product no machine holds: refused before anything is allocated.
void add_gen_sizes(std::vector<bad_case>& cases) {
  const std::vector<words> sizes = {
      {"--layers", "1000000", "--tokens", "16384", "--steps", "1000000"},
      {"--layers", "1", "--tokens", "16384", "--steps", "1000000000"},
      {"--layers", "2147483647", "--tokens", "16384", "--steps", "2147483647", "--experts", "1024"}};
  for (const auto& size : sizes) {
    words args = gen_base;
    for (std::size_t i = 0; i + 1 < size.size(); i += 2) args = with(args, size[i], size[i + 1]);
    cases.push_back({"sizes too large", "a trace too large to hold", args, bad_arguments});
  }
}

void add_gen_outputs(std::vector<bad_case>& cases) {
  add_values(cases, "output path", gen_base, "--out", {"s.npy/trace", "s.npy/a/b", "s.npy", "ids.npy", "notrace"},
             bad_input);
}

void add_gen_structure(std::vector<bad_case>& cases) {
  add_unknown_and_valueless(cases, gen_base,
                            {"--preset", "--experts", "--top-k", "--layers", "--tokens", "--steps", "--requests",
                             "--seed", "--out", "--devices", "--placement"});
  cases.push_back({"unknown option", "a value after the flag --half", plus(gen_base, {"--half", "1"}), bad_arguments});
  cases.push_back({"missing option", "no --out", without(gen_base, "--out"), bad_arguments});
  cases.push_back({"missing option", "nothing", {"gen"}, bad_arguments});
}

// ---- replay ----

const words replay_base = {"replay",        "--trace",   "trace", "--policy",  "topk(k=4)", "--policy",
                           "oea(k0=2,k=4)", "--t-fetch", "1",     "--t-token", "0.5",       "--json"};

/// Adds a third --policy: a bad one among good ones, given after them.
void add_extra_policies(std::vector<bad_case>& cases, const words& texts) {
  for (const auto& text : texts)
    cases.push_back({"policy text", "--policy '" + text + "'", plus(replay_base, {"--policy", text}), bad_arguments});
}

void add_latency_reals(std::vector<bad_case>& cases, const words& base) {
  add_values(cases, "real option", base, "--t-fetch", plus(not_reals, {"0", "-0", "-1"}), bad_arguments);
  add_values(cases, "real option", base, "--t-token", plus(not_reals, {"-1", "-0.5"}), bad_arguments);
}

void add_replay_cases(std::vector<bad_case>& cases) {
  add_latency_reals(cases, replay_base);
  add_files(cases, "trace directory", replay_base, "--trace", bad_trace_dirs(), bad_input);
  add_extra_policies(cases, policy_syntax_errors);
  add_extra_policies(cases, policy_meaning_errors);
  add_unknown_and_valueless(cases, replay_base, {"--trace", "--policy", "--t-fetch", "--t-token"});
  cases.push_back(
      {"unknown option", "a value after the flag --json", plus(replay_base, {"--json", "1"}), bad_arguments});
  cases.push_back({"conflicting options", "--json and --csv", plus(replay_base, {"--csv"}), bad_arguments});
  cases.push_back({"missing option", "no --trace", without(replay_base, "--trace"), bad_arguments});
  words no_policy = without(without(replay_base, "--policy"), "--policy");
  cases.push_back({"missing option", "no --policy", no_policy, bad_arguments});
  cases.push_back({"missing option", "nothing", {"replay"}, bad_arguments});
}

// ---- sweep ----

const words sweep_base = {"sweep",     "--trace", "trace",     "--grid", "oea(k0=1..4,k=4)",
                          "--t-fetch", "1",       "--t-token", "0"};
const words sweep_outputs = {"sweep.csv", "sweep.svg"};

void add_sweep_grids(std::vector<bad_case>& cases) {
  add_values(cases, "grid", sweep_base, "--grid",
             {"oea(k0=1..10000,k=1..10000)", "oea(k0=1..100000000,k=4)", "oea(k0=3..1,k=4)", "oea(k0=1..4:0,k=4)",
              "oea(k0=1..4:-1,k=4)", "oea(k0=1..x,k=4)", "oea(k0=..4,k=4)", "oea(k0=1..4:nan,k=4)",
              "oea(k0=nan..4,k=4)", "oea(k0=1..inf,k=4)", "oea(k0=1..4junk,k=4)", "1..4"},
             bad_arguments);
  // Only syntax errors: a grid configuration that parses but does not fit is skipped by design.
  add_values(cases, "policy text", sweep_base, "--grid", policy_syntax_errors, bad_arguments);
}

void add_sweep_outputs(std::vector<bad_case>& cases) {
  const std::vector<std::pair<std::string, std::string>> same = {{"out.csv", "out.csv"},
                                                                 {"sweep.svg", "sweep.svg"},
                                                                 {"sweep.csv", "sweep.csv"},
                                                                 {"./sweep.svg", "sweep.svg"},
                                                                 {"x.csv", "./x.csv"}};
  for (const auto& [csv, svg] : same) {
    cases.push_back({"same output", "--csv " + csv + " and --svg " + svg,
                     with(with(sweep_base, "--csv", csv), "--svg", svg), bad_arguments});
  }
  add_values(cases, "output path", sweep_base, "--csv", {"nodir/s.csv", "emptydir", "s.npy/s.csv"}, bad_input);
  add_values(cases, "output path", sweep_base, "--svg", {"nodir/s.svg", "emptydir", "s.npy/s.svg"}, bad_input);
}

void add_sweep_cases(std::vector<bad_case>& cases) {
  add_sweep_grids(cases);
  add_sweep_outputs(cases);
  add_latency_reals(cases, sweep_base);
  add_files(cases, "trace directory", sweep_base, "--trace", bad_trace_dirs(), bad_input);
  add_unknown_and_valueless(cases, sweep_base, {"--trace", "--grid", "--csv", "--svg", "--t-fetch", "--t-token"});
  cases.push_back({"missing option", "no --trace", without(sweep_base, "--trace"), bad_arguments});
  cases.push_back({"missing option", "no --grid", without(sweep_base, "--grid"), bad_arguments});
  cases.push_back({"missing option", "nothing", {"sweep"}, bad_arguments});
}

}  // namespace

TEST_CASE("moe-route route refuses each generated bad argument, file and output path cleanly") {
  sandbox box;
  require_base_succeeds(box, route_scores_base, route_outputs);
  require_base_succeeds(box, route_trace_base, route_outputs);
  std::vector<bad_case> cases;
  add_route_numbers(cases);
  add_route_choices(cases);
  add_route_files(cases);
  add_route_outputs(cases, box.work());
  add_route_policies(cases);
  add_route_structure(cases);
  run_all(box, cases);
}

TEST_CASE("moe-route gen refuses each generated bad size, name and output directory cleanly") {
  sandbox box;
  require_base_succeeds(box, gen_base, {"gen_out"});
  std::vector<bad_case> cases;
  add_gen_numbers(cases);
  add_gen_sizes(cases);
  add_gen_outputs(cases);
  add_gen_structure(cases);
  run_all(box, cases);
}

TEST_CASE("moe-route replay refuses each generated bad trace, policy and latency figure cleanly") {
  sandbox box;
  require_base_succeeds(box, replay_base, {});
  std::vector<bad_case> cases;
  add_replay_cases(cases);
  run_all(box, cases);
}

TEST_CASE("moe-route sweep refuses each generated bad grid, trace and output pair cleanly") {
  sandbox box;
  require_base_succeeds(box, sweep_base, sweep_outputs);
  std::vector<bad_case> cases;
  add_sweep_cases(cases);
  run_all(box, cases);
}

TEST_CASE("moe-route refuses unknown commands cleanly") {
  sandbox box;
  std::vector<bad_case> cases;
  for (const words& args : std::vector<words>{
           {"frobnicate"}, {"Route"}, {""}, {"routes"}, {"-x"}, {"--frob"}, {"gen2"}, {"ROUTE", "--help"}}) {
    cases.push_back({"unknown command", "no such command", args, bad_arguments});
  }
  for (const auto& c : cases) expect_clean_refusal(box, c);
}

// Fuzzes the moe-route tool in process: bytes decode into one invocation (a command, then
// option names, dictionary values and short raw words) run in a private sandbox holding
// valid inputs, an empty directory and one .npy file made of fuzz bytes. Every run must
// end with exit status 0, 1 or 2; a failed run must create no new file or directory; no
// run may leave a temporary output file behind. (A sanitizer report inside the tool has
// the sandbox as cwd: give libFuzzer an absolute -artifact_prefix to keep that input.)

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <moe_routing/io/npy.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/moe_routing.hpp>
#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "command_line.hpp"
#include "fuzz_input.hpp"

namespace {

namespace fs = std::filesystem;
namespace mr = moe_routing;

// The tables below are read by index from the input; the seed corpus depends on their order.
constexpr const char* route_options[] = {"scores",  "trace",   "layer",       "step",  "policy",   "scoring",
                                         "bias",    "groups",  "group-score", "mask",  "segments", "placement",
                                         "phase",   "padding", "sentinel",    "scale", "top-k",    "ids",
                                         "weights", "counts",  "help"};
constexpr const char* gen_options[] = {"preset",   "experts", "top-k", "layers", "tokens", "steps",
                                       "requests", "seed",    "half",  "out",    "help"};
constexpr const char* replay_options[] = {"trace", "policy", "t-fetch", "t-token", "json", "csv", "help"};
constexpr const char* sweep_options[] = {"trace", "grid", "csv", "svg", "t-fetch", "t-token", "help"};
constexpr const char* batch_options[] = {"trace",   "batch-size", "method", "seed", "max-wait",
                                         "devices", "then",       "json",   "csv",  "help"};
constexpr const char* other_commands[] = {"help", "--help", "-h", "", "bogus", "batch"};
constexpr const char* dictionary[] = {"s.npy",
                                      "h.npy",
                                      "b.npy",
                                      "m.npy",
                                      "o.npy",
                                      "p.npy",
                                      "t",
                                      "d",
                                      "f.npy",
                                      "i.npy",
                                      "w.npy",
                                      "c.npy",
                                      "x.csv",
                                      "x.svg",
                                      "newtrace",
                                      "missing.npy",
                                      "-h",
                                      "--help",
                                      "",
                                      "-1",
                                      "0",
                                      "1",
                                      "2",
                                      "3",
                                      "4",
                                      "8",
                                      "16",
                                      "1024",
                                      "16385",
                                      "4294967298",
                                      "9223372036854775808",
                                      "2junk",
                                      "nan",
                                      "inf",
                                      "-inf",
                                      "1e999",
                                      "0x10",
                                      " 3",
                                      "0.5",
                                      "oea(k0=2,k=4)",
                                      "topk(k=4)",
                                      "xshare(k0=1,m=4,k=4)",
                                      "prune(k0=2) | refine(k=4)",
                                      "oea(k0=1..4,k=4)",
                                      "skip(beta=0.1..0.9:0.1,k=4)",
                                      "topk(k=33)",
                                      "oea(k0=5,k=4)",
                                      "xshare_ep(k0=1,m_g=1,k=4)",
                                      "4:2",
                                      "4:2junk",
                                      "0:0",
                                      "3:1",
                                      "softmax",
                                      "sigmoid",
                                      "sqrtsoftplus",
                                      "probabilities",
                                      "max",
                                      "top2_sum",
                                      "decode",
                                      "prefill",
                                      "sentinel",
                                      "repeat",
                                      "uniform",
                                      "qwen3-30b-a3b",
                                      "deepseek-r1",
                                      "deepseek-topics",
                                      "fifo",
                                      "lsh",
                                      "spectral",
                                      "online",
                                      "oracle",
                                      "ep-oracle"};
// What the reset puts in the sandbox; anything else was made by the tool.
const std::set<std::string> fixed_entries = {"s.npy", "h.npy", "b.npy", "m.npy", "o.npy", "p.npy", "t", "d", "f.npy"};

// Past these, an exec costs more than it teaches: gen's size limits and npy's truncation
// checks are tested elsewhere, and a raw word of 12 bytes cannot spell a large sweep grid.
constexpr std::size_t max_raw_word = 12;
constexpr std::size_t max_file_bytes = 4096;
constexpr double max_gen_number = 64;
constexpr double max_gen_scores = 1 << 17;

fs::path sandbox_root;  // holds template/ (the pristine trace) and work/ (the cwd of each run)
fs::path home;          // libFuzzer's own cwd: relative corpus and artifact paths resolve there

/// The tool runs with the sandbox as its cwd; libFuzzer, between runs, with its own.
struct inside_sandbox {
  inside_sandbox() { fs::current_path(sandbox_root / "work"); }
  ~inside_sandbox() {
    std::error_code ignored;
    fs::current_path(home, ignored);
  }
  inside_sandbox(const inside_sandbox&) = delete;
  inside_sandbox& operator=(const inside_sandbox&) = delete;
};

template <std::size_t N>
const char* pick(const char* const (&table)[N], fuzz::byte_stream& in) {
  return table[in.u8() % N];
}

std::string raw_word(fuzz::byte_stream& in) {
  std::string word(in.u8() % (max_raw_word + 1), '\0');
  for (auto& c : word) c = static_cast<char>(in.u8());
  return word;
}

std::string option_word(const std::string& command, fuzz::byte_stream& in) {
  if (command == "gen") return std::string("--") + pick(gen_options, in);
  if (command == "replay") return std::string("--") + pick(replay_options, in);
  if (command == "sweep") return std::string("--") + pick(sweep_options, in);
  if (command == "batch") return std::string("--") + pick(batch_options, in);
  return std::string("--") + pick(route_options, in);
}

/// The command line (argv[1..]); the bytes left over become f.npy.
std::vector<std::string> decode_words(fuzz::byte_stream& in) {
  const int choice = in.u8() % 16;
  if (choice == 13) return {};
  const std::string command = choice < 4     ? "route"
                              : choice < 7   ? "gen"
                              : choice < 10  ? "replay"
                              : choice < 13  ? "sweep"
                              : choice == 14 ? pick(other_commands, in)
                                             : raw_word(in);
  std::vector<std::string> words = {command};
  const int count = in.u8() % 32;
  for (int i = 0; i < count; ++i) {
    const int kind = in.u8() % 16;
    if (kind < 7)
      words.push_back(option_word(command, in));
    else if (kind < 14)
      words.push_back(pick(dictionary, in));
    else if (kind == 14)
      words.push_back(raw_word(in));
    else
      words.push_back("--" + raw_word(in));  // an option name the tool may not know
  }
  return words;
}

/// Whether the tool could reach outside the sandbox through `word`, or name a file that
/// the leftover-temporary check would mistake for one of the tool's.
bool unsafe_word(const std::string& word) {
  return word.find('/') != std::string::npos || word == "." || word.rfind("..", 0) == 0 ||
         word.find(".tmp") != std::string::npos;
}

/// gen writes layers * tokens * steps * experts scores; huge traces only slow fuzzing.
/// Counts each size at the largest value any word after its option gives (the tool
/// takes the last), and at its default (the largest preset's experts) when none does.
bool expensive_gen(const std::vector<std::string>& words) {
  if (words.empty() || words[0] != "gen") return false;
  std::map<std::string, double> sizes = {{"--experts", 0}, {"--layers", 0}, {"--tokens", 0}, {"--steps", 0}};
  for (std::size_t i = 1; i < words.size(); ++i) {
    char* end = nullptr;
    const double value = std::fabs(std::strtod(words[i].c_str(), &end));
    if (end == words[i].c_str() || std::isnan(value)) continue;
    if (value > max_gen_number) return true;
    const auto size = sizes.find(words[i - 1]);
    if (size != sizes.end()) size->second = std::max(size->second, value);
  }
  const auto given = [&](const char* option, double fallback) { return sizes[option] > 0 ? sizes[option] : fallback; };
  return given("--experts", 256) * given("--layers", 1) * given("--tokens", 16) * given("--steps", 16) > max_gen_scores;
}

void write_file(const fs::path& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<float> pattern(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>((i * 37) % 23) / 7.0f - 1.5f;
  return values;
}

/// The fixed input files, serialized once.
const std::vector<std::pair<std::string, std::vector<unsigned char>>>& fixed_files() {
  static const auto files = [] {
    namespace npy = mr::npy;
    const std::vector<float> scores = pattern(8 * 16), bias = pattern(16);
    std::vector<mr::float16> half(scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i) half[i] = mr::to_float16(scores[i]);
    const std::uint8_t mask[8] = {1, 1, 0, 1, 1, 1, 0, 1};
    const std::int64_t segments[4] = {0, 2, 5, 8};
    std::int32_t placement[16];
    for (int e = 0; e < 16; ++e) placement[e] = e % 4;
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"s.npy", npy::serialize(npy::dtype::float32, {8, 16}, scores.data())},
        {"h.npy", npy::serialize(npy::dtype::float16, {8, 16}, half.data())},
        {"b.npy", npy::serialize(npy::dtype::float32, {16}, bias.data())},
        {"m.npy", npy::serialize(npy::dtype::boolean, {8}, mask)},
        {"o.npy", npy::serialize(npy::dtype::int64, {4}, segments)},
        {"p.npy", npy::serialize(npy::dtype::int32, {16}, placement)}};
  }();
  return files;
}

/// Empties the working directory and puts back the fixed state, f.npy holding `f_npy`.
void reset_sandbox(const std::vector<unsigned char>& f_npy) {
  std::vector<fs::path> previous;  // listed first: removing while iterating may skip entries
  for (const auto& entry : fs::directory_iterator(".")) previous.push_back(entry.path());
  for (const auto& path : previous) fs::remove_all(path);
  for (const auto& [name, bytes] : fixed_files()) write_file(name, bytes);
  write_file("f.npy", f_npy);
  fs::copy(sandbox_root / "template", "t", fs::copy_options::recursive);
  fs::create_directory("d");
}

void remove_sandbox() {
  std::error_code ignored;
  fs::remove_all(sandbox_root, ignored);
}

std::string quoted(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& word : words) {
    line += " '";
    for (const char c : word) {
      if (c >= 0x20 && c < 0x7f)
        line += c;
      else
        line += "\\x" + std::string(1, "0123456789abcdef"[(c >> 4) & 15]) + "0123456789abcdef"[c & 15];
    }
    line += "'";
  }
  return line;
}

[[noreturn]] void failure(const std::string& what, const std::vector<std::string>& words) {
  std::fprintf(stderr, "tool_fuzzer: %s; words:%s\n", what.c_str(), quoted(words).c_str());
  std::error_code ignored;
  fs::current_path(home, ignored);  // so that libFuzzer writes the crash input where it was asked to
  std::abort();
}

void check_no_temporaries(const std::vector<std::string>& words) {
  for (const auto& entry : fs::recursive_directory_iterator(".")) {
    if (entry.path().filename().string().find(".tmp") != std::string::npos) {
      failure("temporary file " + entry.path().string() + " left behind", words);
    }
  }
}

void check_nothing_created(int status, const std::vector<std::string>& words) {
  for (const auto& entry : fs::directory_iterator(".")) {
    const std::string name = entry.path().filename().string();
    if (fixed_entries.count(name) == 0) {
      failure("exit status " + std::to_string(status) + " but '" + name + "' was created", words);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sandbox_root = fs::temp_directory_path() / ("moe_route_tool_fuzzer." + std::to_string(::getpid()));
  fs::remove_all(sandbox_root);
  fs::create_directories(sandbox_root / "work");
  mr::synthetic::generator_config config = mr::synthetic::find_preset("uniform")->config;
  config.experts = 16;
  config.top_k = 4;
  config.layers = 2;
  config.tokens_per_step = 4;
  config.steps = 3;
  mr::io::save_trace(mr::synthetic::generate_trace(config), (sandbox_root / "template").string());
  home = fs::current_path();
  std::atexit(remove_sandbox);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_stream in(data, size);
  const std::vector<std::string> words = decode_words(in);
  if (std::any_of(words.begin(), words.end(), unsafe_word) || expensive_gen(words)) return 0;
  const std::size_t used = size - in.remaining();
  const inside_sandbox sandbox;
  reset_sandbox(std::vector<unsigned char>(data + used, data + used + std::min(in.remaining(), max_file_bytes)));

  const int status = moe_route::run(words);
  if (status < 0 || status > 2) failure("exit status " + std::to_string(status) + " outside {0, 1, 2}", words);
  check_no_temporaries(words);
  if (status != 0) check_nothing_created(status, words);
  return 0;
}

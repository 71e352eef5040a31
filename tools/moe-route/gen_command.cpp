// `moe-route gen`: write a synthetic trace directory.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "command_line.hpp"
#include "output_files.hpp"

namespace moe_route {

namespace {
constexpr const char* gen_help =
    "usage: moe-route gen --preset uniform|NAME --experts E --top-k K --layers L --tokens N\n"
    "                     --steps T [--requests R] [--seed S] [--half] --out DIR\n"
    "\n"
    "Writes a synthetic router trace: T decode steps of N tokens, shared by R requests\n"
    "(default: one request per token), for L layers. At most 2^30 tokens (N x T) and 2^28\n"
    "scores (L x N x T x E). An existing --out directory is replaced only if it holds a trace.\n"
    "Presets:\n";

/// Sizes a generated trace may have: token offsets are int32, and the scores are held in
/// memory (2^28 float32 scores are 1 GiB).
constexpr long long max_trace_tokens = 1LL << 30;
constexpr long long max_trace_scores = 1LL << 28;
constexpr long long max_trace_layers = 4096;

namespace fs = std::filesystem;

/// Whether every entry of `dir` is a file a trace consists of, so that replacing the
/// directory loses nothing but an older trace.
bool holds_only_a_trace(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || !moe_routing::io::is_trace_file(entry.path().filename().string())) return false;
  }
  return true;
}

/// --out may name a new path, or a directory that holds only an earlier trace (replaced
/// whole, so no stale mask.npy or placement.npy survives); anything else is refused.
void check_trace_destination(const std::string& out) {
  const fs::path dir(out);
  if (!fs::exists(fs::symlink_status(dir))) return;
  if (!fs::is_directory(dir)) throw input_error("--out " + out + ": exists and is not a directory");
  if (!holds_only_a_trace(dir)) {
    throw input_error("--out " + out + ": directory holds files that are not a trace's; not replaced");
  }
}

/// Writes the trace beside `out` and moves it into place only once it is complete.
void save_trace_whole(const moe_routing::io::trace& trace, const std::string& out) {
  fs::path dir = fs::path(out).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "qwen/" names "qwen"
  const fs::path staged = temporary_name(dir);
  const fs::path replaced = staged.string() + "-old";
  struct cleanup {
    fs::path a, b;
    ~cleanup() {
      std::error_code ignored;
      fs::remove_all(a, ignored);
      fs::remove_all(b, ignored);
    }
  } remove_leftovers{staged, replaced};
  moe_routing::io::save_trace(trace, staged.string());
  check_trace_destination(out);  // again: it may have changed while the trace was generated
  const bool replacing = fs::exists(dir);
  if (replacing) fs::rename(dir, replaced);
  std::error_code error;
  fs::rename(staged, dir, error);
  if (error) {
    if (replacing) fs::rename(replaced, dir);  // the earlier trace stays as it was
    throw input_error("cannot move the trace into place at " + out + ": " + error.message());
  }
}

/// The generator's configuration from the command line, every size checked before the
/// trace is allocated.
moe_routing::synthetic::generator_config read_config(const arguments& args,
                                                     const moe_routing::synthetic::preset& preset) {
  namespace mr = moe_routing;
  mr::synthetic::generator_config config = preset.config;
  config.experts = static_cast<int>(args.integer("experts", config.experts, 2, mr::max_experts));
  config.top_k = static_cast<int>(args.integer("top-k", config.top_k, 1, std::min(config.experts, mr::max_top_k)));
  config.layers = static_cast<int>(args.integer("layers", 1, 1, max_trace_layers));
  config.tokens_per_step = static_cast<int>(args.integer("tokens", 16, 1, mr::max_tokens));
  config.steps = static_cast<int>(args.integer("steps", 16, 1, max_trace_tokens));
  config.requests = static_cast<int>(args.integer("requests", 0, 0, config.tokens_per_step));
  config.seed = static_cast<std::uint64_t>(args.integer("seed", 1, 0, std::numeric_limits<long long>::max()));
  config.half = args.has("half");
  const long long tokens = static_cast<long long>(config.tokens_per_step) * config.steps;
  if (tokens > max_trace_tokens) {
    throw usage_error("--tokens x --steps = " + std::to_string(tokens) + ": a trace holds at most " +
                      std::to_string(max_trace_tokens) + " tokens");
  }
  const long long scores = tokens * config.layers * config.experts;
  if (scores > max_trace_scores) {
    throw usage_error("--layers x --tokens x --steps x --experts = " + std::to_string(scores) + " scores: at most " +
                      std::to_string(max_trace_scores) + " (1 GiB of float32); generate it in parts");
  }
  return config;
}

}  // namespace

int gen_command(const std::vector<std::string>& words) {
  namespace mr = moe_routing;
  const arguments args(words, {"preset", "experts", "top-k", "layers", "tokens", "steps", "requests", "seed", "out"},
                       {"half"});
  if (args.help()) {
    std::fputs(gen_help, stdout);
    for (const auto& p : mr::synthetic::presets()) std::printf("  %-16s %s\n", p.name, p.calibration);
    return 0;
  }
  const std::string name = args.get("preset", "uniform");
  const mr::synthetic::preset* preset = mr::synthetic::find_preset(name);
  if (preset == nullptr) throw usage_error("unknown --preset '" + name + "' (see moe-route gen --help)");
  const mr::synthetic::generator_config config = read_config(args, *preset);
  const std::string out = args.required("out");
  if (out.empty()) throw usage_error("--out needs a directory name");
  check_trace_destination(out);
  save_trace_whole(mr::synthetic::generate_trace(config), out);
  std::printf("wrote %s: %d layers x %d steps x %d tokens, E = %d, k = %d (preset %s, seed %llu)\n", out.c_str(),
              config.layers, config.steps, config.tokens_per_step, config.experts, config.top_k, name.c_str(),
              static_cast<unsigned long long>(config.seed));
  return 0;
}

}  // namespace moe_route

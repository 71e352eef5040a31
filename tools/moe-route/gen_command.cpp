// `moe-route gen`: write a synthetic trace directory.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "command_line.hpp"
#include "output_files.hpp"

namespace moe_route {

namespace {
constexpr const char* gen_help =
    "usage: moe-route gen --out DIR [--preset NAME] [--experts E] [--top-k K] [--layers L]\n"
    "                     [--tokens N] [--steps T] [--requests R] [--seed S] [--half]\n"
    "                     [--devices G [--placement contiguous|round-robin]]\n"
    "\n"
    "Writes a synthetic router trace: T decode steps of N tokens, shared by R requests\n"
    "(default: one request per token), for L layers. Defaults: --preset uniform, E and K\n"
    "the preset's (listed below), L = 1, N = 16, T = 16, seed 1. At most 2^30 tokens (N x T)\n"
    "and 2^28 scores (L x N x T x E). An existing --out directory is replaced only if it\n"
    "holds a trace.\n"
    "A calibrated preset reproduces its published figure only at its own E and K: giving\n"
    "another --experts or --top-k keeps its other knobs, with a warning on stderr.\n"
    "--devices G writes placement.npy (expert parallelism over G devices): contiguous\n"
    "(default; expert e on device floor(e G / E)) or round-robin (e mod G).\n"
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

/// How experts are spread over devices: `contiguous` blocks of about E / G experts (as
/// most engines shard them), or `round-robin` (expert e on device e mod G).
std::vector<std::int32_t> placement_of(const std::string& kind, int experts, int devices) {
  std::vector<std::int32_t> placement(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) {
    placement[static_cast<std::size_t>(e)] =
        kind == "round-robin" ? e % devices : static_cast<std::int32_t>(static_cast<long long>(e) * devices / experts);
  }
  return placement;
}

/// --devices and --placement, checked against the trace's E: the placement to write, or
/// none when neither is given.
std::vector<std::int32_t> read_placement(const arguments& args, int experts) {
  if (!args.has("devices")) {
    if (args.has("placement")) {
      throw usage_error("--placement " + args.get("placement", "") + " needs --devices G (how many devices)");
    }
    return {};
  }
  const std::string kind = args.get("placement", "contiguous");
  if (kind != "contiguous" && kind != "round-robin") {
    throw usage_error("--placement = '" + kind + "': must be contiguous or round-robin");
  }
  const int devices = static_cast<int>(args.integer("devices", 1, 1, experts));
  return placement_of(kind, experts, devices);
}

/// A calibrated preset's figure holds only at its own E and k: a warning names what no
/// longer holds when either is changed (the other knobs are kept, so the trace is still
/// useful as that preset's shape at another size).
void warn_if_uncalibrated(const moe_routing::synthetic::preset& preset,
                          const moe_routing::synthetic::generator_config& config) {
  if (preset.config.kind == moe_routing::synthetic::trace_kind::uniform) return;  // the formula holds for any E, k
  std::string changed;
  if (config.experts != preset.config.experts) {
    changed +=
        "--experts " + std::to_string(config.experts) + " (preset E = " + std::to_string(preset.config.experts) + ")";
  }
  if (config.top_k != preset.config.top_k) {
    if (!changed.empty()) changed += " and ";
    changed += "--top-k " + std::to_string(config.top_k) + " (preset k = " + std::to_string(preset.config.top_k) + ")";
  }
  if (changed.empty()) return;
  std::fprintf(stderr,
               "moe-route: warning: %s overrides preset %s's shape: its calibration (%s) does not hold for this "
               "trace\n",
               changed.c_str(), preset.name, preset.calibration);
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
  const arguments args(
      words,
      {"preset", "experts", "top-k", "layers", "tokens", "steps", "requests", "seed", "out", "devices", "placement"},
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
  const std::vector<std::int32_t> placement = read_placement(args, config.experts);
  const std::string out = args.required("out");
  if (out.empty()) throw usage_error("--out needs a directory name");
  check_trace_destination(out);
  warn_if_uncalibrated(*preset, config);
  mr::io::trace trace = mr::synthetic::generate_trace(config);
  if (!placement.empty()) {
    trace.placement = placement;
    trace.devices = 1 + *std::max_element(placement.begin(), placement.end());
  }
  save_trace_whole(trace, out);
  std::printf("wrote %s: %d layers x %d steps x %d tokens, E = %d, k = %d (preset %s, seed %llu)", out.c_str(),
              config.layers, config.steps, config.tokens_per_step, config.experts, config.top_k, name.c_str(),
              static_cast<unsigned long long>(config.seed));
  if (!placement.empty())
    std::printf(", %s placement on %d devices", args.get("placement", "contiguous").c_str(), trace.devices);
  std::printf("\n");
  return 0;
}

}  // namespace moe_route

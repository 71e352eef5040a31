// `moe-route gen`: write a synthetic trace directory.

#include <cstdio>
#include <string>

#include <moe_routing/synthetic/router_trace_generator.hpp>

#include "command_line.hpp"

namespace moe_route {

namespace {
constexpr const char* gen_help =
    "usage: moe-route gen --preset uniform|NAME --experts E --top-k K --layers L --tokens N\n"
    "                     --steps T [--requests R] [--seed S] [--half] --out DIR\n"
    "\n"
    "Writes a synthetic router trace: T decode steps of N tokens, shared by R requests\n"
    "(default: one request per token), for L layers. Presets:\n";
}  // namespace

int gen_command(const std::vector<std::string>& words) {
  namespace mr = moe_routing;
  if (has_help(words)) {
    std::fputs(gen_help, stdout);
    for (const auto& p : mr::synthetic::presets()) std::printf("  %-16s %s\n", p.name, p.calibration);
    return 0;
  }
  const arguments args(words, {"preset", "experts", "top-k", "layers", "tokens", "steps", "requests", "seed", "out"}, {"half"});
  const std::string name = args.get("preset", "uniform");
  const mr::synthetic::preset* preset = mr::synthetic::find_preset(name);
  if (preset == nullptr) throw usage_error("unknown --preset '" + name + "' (see moe-route gen --help)");
  mr::synthetic::generator_config config = preset->config;
  config.experts = static_cast<int>(args.integer("experts", config.experts));
  config.top_k = static_cast<int>(args.integer("top-k", config.top_k));
  config.layers = static_cast<int>(args.integer("layers", 1));
  config.tokens_per_step = static_cast<int>(args.integer("tokens", 16));
  config.steps = static_cast<int>(args.integer("steps", 16));
  config.requests = static_cast<int>(args.integer("requests", 0));
  config.seed = static_cast<std::uint64_t>(args.integer("seed", 1));
  config.half = args.has("half");
  const std::string out = args.required("out");
  if (config.experts < 2 || config.experts > mr::max_experts) throw usage_error("--experts must be in [2, 1024]");
  if (config.top_k < 1 || config.top_k > config.experts || config.top_k > mr::max_top_k) throw usage_error("--top-k must be in [1, min(E, 32)]");
  if (config.layers < 1 || config.steps < 1 || config.tokens_per_step < 1 || config.tokens_per_step > mr::max_tokens) {
    throw usage_error("--layers and --steps must be >= 1 and --tokens in [1, 16384]");
  }
  if (config.requests < 0 || config.requests > config.tokens_per_step) throw usage_error("--requests must be in [0, --tokens]");
  try {
    mr::io::save_trace(mr::synthetic::generate_trace(config), out);
  } catch (const mr::io::trace_error& error) {
    throw input_error(error.what());
  }
  std::printf("wrote %s: %d layers x %d steps x %d tokens, E = %d, k = %d (preset %s, seed %llu)\n", out.c_str(),
              config.layers, config.steps, config.tokens_per_step, config.experts, config.top_k, name.c_str(),
              static_cast<unsigned long long>(config.seed));
  return 0;
}

}  // namespace moe_route

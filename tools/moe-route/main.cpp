// moe-route: route router outputs stored as .npy files from the command line.

#include <cstdio>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace {

constexpr const char* usage_text =
    "usage: moe-route <command> [options]\n"
    "\n"
    "commands:\n"
    "  route   route one batch of router scores (.npy) and write ids and weights (.npy)\n"
    "  gen     write a synthetic router trace (uniform or a calibrated model preset)\n"
    "  replay  replay policies over a trace: |active|, retained mass, recall, latency\n"
    "  sweep   sweep policy parameters over a trace: CSV and an SVG Pareto plot\n"
    "\n"
    "Run 'moe-route <command> --help' for a command's options.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty() || words[0] == "--help" || words[0] == "-h" || words[0] == "help") {
    std::fputs(usage_text, words.empty() ? stderr : stdout);
    return words.empty() ? 2 : 0;
  }
  const std::string command = words[0];
  words.erase(words.begin());
  try {
    if (command == "route") return moe_route::route_command(words);
    if (command == "gen") return moe_route::gen_command(words);
    if (command == "replay") return moe_route::replay_command(words);
    if (command == "sweep") return moe_route::sweep_command(words);
    throw moe_route::usage_error("unknown command '" + command + "' (try 'moe-route --help')");
  } catch (const moe_route::usage_error& error) {
    std::fprintf(stderr, "moe-route: %s\n", error.what());
    return 2;
  } catch (const moe_route::input_error& error) {
    std::fprintf(stderr, "moe-route: %s\n", error.what());
    return 1;
  }
}

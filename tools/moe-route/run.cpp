// The tool as a function: command dispatch and the one place where failures become exit
// statuses, so that nothing escapes as a signal (the in-process fuzzer calls this too).

#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <moe_routing/core/error.hpp>

#include "command_line.hpp"

namespace moe_route {

namespace {

constexpr const char* usage_text =
    "usage: moe-route <command> [options]\n"
    "\n"
    "commands:\n"
    "  route   route one batch of router scores (.npy) and write ids and weights (.npy)\n"
    "  gen     write a synthetic router trace (uniform or a calibrated model preset)\n"
    "  replay  replay policies over a trace: |active|, retained mass, recall, latency\n"
    "  sweep   sweep policy parameters over a trace: CSV and an SVG Pareto plot\n"
    "  batch   form batches of a trace's requests that share experts; loads per method\n"
    "\n"
    "Run 'moe-route <command> --help' for a command's options.\n";

int dispatch(const std::string& command, const std::vector<std::string>& words) {
  if (command == "route") return route_command(words);
  if (command == "gen") return gen_command(words);
  if (command == "replay") return replay_command(words);
  if (command == "sweep") return sweep_command(words);
  if (command == "batch") return batch_command(words);
  throw usage_error("unknown command '" + command + "' (try 'moe-route --help')");
}

int report(const char* message, int status) noexcept {
  std::fprintf(stderr, "moe-route: %s\n", message);
  return status;
}

}  // namespace

int run(const std::vector<std::string>& words) noexcept {
  if (words.empty() || words[0] == "--help" || words[0] == "-h" || words[0] == "help") {
    std::fputs(usage_text, words.empty() ? stderr : stdout);
    return words.empty() ? 2 : 0;
  }
  try {
    const int status = dispatch(words[0], std::vector<std::string>(words.begin() + 1, words.end()));
    // Reports go to standard output: a full disk or a closed pipe there is a failure too.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) return report("cannot write standard output", 1);
    return status;
  } catch (const usage_error& error) {
    return report(error.what(), 2);
  } catch (const std::bad_alloc&) {
    return report("out of memory (the input or the requested trace is too large for this machine)", 1);
  } catch (const std::filesystem::filesystem_error& error) {
    return report(error.what(), 1);
  } catch (const std::exception& error) {
    // input_error, the library's own errors (npy, trace, routing) and anything else:
    // all are about the data, never a reason to abort.
    return report(error.what(), 1);
  } catch (...) {
    return report("unexpected failure", 1);
  }
}

}  // namespace moe_route

#pragma once
// Helpers the trace subcommands share: loading a trace (bad files exit 1), parsing a
// policy (bad text exits 2) and progress on stderr.

#include <cstdio>
#include <string>

#include <moe_routing/io/trace.hpp>
#include <moe_routing/moe_routing.hpp>

#include "command_line.hpp"
#include "progress_bar.hpp"
#include "trace_replay.hpp"

namespace moe_route {

inline moe_routing::io::trace load_trace_or_fail(const std::string& dir) {
  try {
    return moe_routing::io::load_trace(dir);
  } catch (const moe_routing::io::trace_error& error) {
    throw input_error(error.what());
  }
}

inline moe_routing::runtime_policy parse_or_usage(const std::string& text) {
  const moe_routing::parse_result parsed = moe_routing::parse_policy(text);
  if (!parsed.outcome.ok()) {
    const std::string message = moe_routing::describe(parsed, text);
    throw usage_error(message.substr(0, message.find('\n')) + " in '" + text + "'");
  }
  return parsed.policy;
}

/// --t-fetch (finite, > 0) and --t-token (finite, >= 0): the latency model's times. A zero
/// or negative fetch time would make every ratio 1 or meaningless.
inline moe_routing::latency_model read_latency_model(const arguments& args) {
  const moe_routing::latency_model model{args.real("t-fetch", 1.0), args.real("t-token", 0.0)};
  if (!(model.t_fetch > 0)) throw usage_error("--t-fetch = " + args.get("t-fetch", "") + ": must be above 0");
  if (!(model.t_token >= 0)) throw usage_error("--t-token = " + args.get("t-token", "") + ": must be at least 0");
  return model;
}

/// Progress of one part of a command that began at `started`: a bar on stderr when it
/// is a terminal and the command has run for a second (progress_bar.hpp), else nothing.
inline replay_progress stderr_progress(const std::string& what, progress_clock::time_point started) {
  return stderr_progress_bar(what, started);
}

}  // namespace moe_route

// `moe-route batch`: forms batches from a trace's requests with each method and reports the
// expert loads they cause, against random batches of the same requests.

#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <moe_routing/batching/form_batches.hpp>
#include <moe_routing/cpu.hpp>

#include "command_line.hpp"
#include "replay_output.hpp"
#include "trace_input.hpp"

namespace moe_route {

namespace {

namespace mb = moe_routing::batching;
namespace mr = moe_routing;

constexpr const char* batch_help =
    "usage: moe-route batch --trace DIR --batch-size B [--method NAME ...] [--seed S] [--json | --csv]\n"
    "\n"
    "Takes every request of the trace (each step's request segments; one request per token\n"
    "without segments), gives it the experts its tokens' vanilla top-k chose at each layer,\n"
    "and forms batches of at most B requests with each method: fifo (arrival order), random\n"
    "(seeded), lsh (MinHash buckets, then greedy within them) and oracle (greedy over all,\n"
    "O(N^2 / B)). Reports each method's expert loads (distinct experts per batch, summed over\n"
    "layers and batches), the saving against random batches, and the time it took.\n"
    "Default methods: fifo random lsh oracle.\n";

/// The trace's requests and the experts vanilla top-k gave their tokens, per layer.
mb::request_signatures signatures_of(const mr::io::trace& trace) {
  std::vector<std::int32_t> segments;
  int requests = 0;
  for (int s = 0; s < trace.step_count(); ++s) {
    trace.step_segments(s, segments);
    requests += static_cast<int>(segments.size()) - 1;
  }
  mb::request_signatures signatures(requests, trace.layers, trace.experts);
  const auto vanilla = mr::presets::vanilla(trace.top_k);
  for (int layer = 0; layer < trace.layers; ++layer) {
    int first_request = 0;
    for (int s = 0; s < trace.step_count(); ++s) {
      auto record = [&](const auto& batch) {
        mr::routing_plan plan(batch.tokens(), trace.top_k, trace.experts, trace.devices);
        mr::throw_if_failed(mr::cpu::route(vanilla, batch, plan.view()));
        for (int r = 0; r < batch.request_count; ++r) {
          for (int token = batch.request_begin(r); token < batch.request_end(r); ++token) {
            signatures.add_row(first_request + r, layer, plan.ids().data() + static_cast<std::size_t>(token) * trace.top_k,
                               plan.count(token));
          }
        }
        first_request += batch.request_count;
      };
      if (trace.half) record(trace.batch<mr::float16>(layer, s, segments));
      else record(trace.batch<float>(layer, s, segments));
    }
  }
  return signatures;
}

struct method_result {
  std::string method;
  long long loads = 0;
  int batches = 0;
  double milliseconds = 0;
};

method_result form_with(const std::string& method, const mb::request_signatures& signatures, int batch_size,
                        std::uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  mb::batch_list batches;
  if (method == "fifo") batches = mb::fifo_batches(signatures.requests(), batch_size);
  else if (method == "random") batches = mb::random_batches(signatures.requests(), batch_size, seed);
  else if (method == "lsh") batches = mb::minhash_batches(signatures, batch_size, {.seed = seed});
  else batches = mb::greedy_batches(signatures, batch_size);
  const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {method, mb::expert_loads(signatures, batches), static_cast<int>(batches.size()), elapsed};
}

void print_results(const arguments& args, const std::string& dir, int requests, int batch_size, long long random_loads,
                   const std::vector<method_result>& results) {
  auto saving = [&](const method_result& r) { return random_loads > 0 ? 1.0 - static_cast<double>(r.loads) / static_cast<double>(random_loads) : 0.0; };
  if (args.has("json")) {
    std::printf("{\"trace\": \"%s\", \"requests\": %d, \"batch_size\": %d, \"methods\": [", json_escape(dir).c_str(), requests,
                batch_size);
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::printf("%s{\"method\": \"%s\", \"batches\": %d, \"expert_loads\": %lld, \"saving_vs_random\": %.6g, \"ms\": %.3f}",
                  i ? ", " : "", results[i].method.c_str(), results[i].batches, results[i].loads, saving(results[i]),
                  results[i].milliseconds);
    }
    std::printf("]}\n");
    return;
  }
  if (args.has("csv")) {
    std::printf("method,batches,expert_loads,saving_vs_random,ms\n");
    for (const auto& r : results) std::printf("%s,%d,%lld,%.6g,%.3f\n", r.method.c_str(), r.batches, r.loads, saving(r), r.milliseconds);
    return;
  }
  std::printf("%d requests of %s in batches of at most %d\n", requests, dir.c_str(), batch_size);
  std::printf("  %-8s %8s %14s %18s %10s\n", "method", "batches", "expert loads", "saving vs random", "ms");
  for (const auto& r : results) {
    std::printf("  %-8s %8d %14lld %17.1f%% %10.1f\n", r.method.c_str(), r.batches, r.loads, 100.0 * saving(r), r.milliseconds);
  }
}

}  // namespace

int batch_command(const std::vector<std::string>& words) {
  const arguments args(words, {"trace", "batch-size", "method", "seed"}, {"json", "csv"}, {"method"});
  if (args.help()) {
    std::fputs(batch_help, stdout);
    return 0;
  }
  args.exclusive("json", "csv");
  const int batch_size =
      static_cast<int>(parse_integer(args.required("batch-size"), "--batch-size", 1, mb::request_signatures::max_requests));
  const auto seed = static_cast<std::uint64_t>(args.integer("seed", 1, 0, std::numeric_limits<long long>::max()));
  std::vector<std::string> methods = args.all("method");
  if (methods.empty()) methods = {"fifo", "random", "lsh", "oracle"};
  for (const auto& m : methods) {
    if (m != "fifo" && m != "random" && m != "lsh" && m != "oracle") {
      throw usage_error("--method must be one of fifo, random, lsh, oracle, got '" + m + "'");
    }
  }
  const std::string dir = args.required("trace");
  const mr::io::trace trace = load_trace_or_fail(dir);
  const mb::request_signatures signatures = signatures_of(trace);
  const long long random_loads = form_with("random", signatures, batch_size, seed).loads;
  std::vector<method_result> results;
  for (const auto& m : methods) results.push_back(form_with(m, signatures, batch_size, seed));
  print_results(args, dir, signatures.requests(), batch_size, random_loads, results);
  return 0;
}

}  // namespace moe_route

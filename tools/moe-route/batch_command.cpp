// `moe-route batch`: forms batches from a trace's requests with each method and reports the
// expert loads they cause, against random batches of the same requests.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <moe_routing/batching/expert_parallel_batches.hpp>
#include <moe_routing/batching/form_batches.hpp>
#include <moe_routing/batching/online_admission.hpp>
#include <moe_routing/batching/spectral_batches.hpp>
#include <moe_routing/cpu.hpp>

#include "command_line.hpp"
#include "replay_output.hpp"
#include "trace_input.hpp"

namespace moe_route {

namespace {

namespace mb = moe_routing::batching;
namespace mr = moe_routing;

constexpr const char* batch_help =
    "usage: moe-route batch --trace DIR --batch-size B [--method NAME ...] [--seed S] [--max-wait W]\n"
    "                       [--devices G] [--then POLICY] [--json | --csv]\n"
    "\n"
    "Takes every request of the trace (each step's request segments; one request per token\n"
    "without segments), gives it the experts its tokens' vanilla top-k chose at each layer,\n"
    "and forms batches of at most B requests with each method: fifo (arrival order), random\n"
    "(seeded), lsh (MinHash buckets, then greedy within them), spectral (the pool split in\n"
    "halves along principal directions of the requests' (layer, expert) bits down to groups of\n"
    "4 batches, then greedy within them), online (continuous batching: B\n"
    "requests arrive per step and one batch leaves, fewest new experts first, no request waiting\n"
    "more than W steps; default 4), oracle (greedy over all, O(N^2 / B)) and ep-oracle (greedy\n"
    "on the busiest device's load). Reports each method's expert loads (distinct experts per\n"
    "batch, summed over layers and batches), the saving against random batches, and the time it\n"
    "took. With a placement (the trace's placement.npy, or --devices G: G blocks of E / G\n"
    "consecutive experts) it also reports the busiest device's loads (per layer, the most\n"
    "distinct experts on one device, summed), the cost of expert parallelism.\n"
    "With --then POLICY each method's batches are also routed with the policy, layer by layer\n"
    "(one request segment per request), and their distinct experts reported: reordering and\n"
    "routing together.\n"
    "Default methods: fifo random lsh spectral online oracle, and ep-oracle with a placement.\n";

/// The trace's requests and the experts vanilla top-k gave their tokens, per layer.
mb::request_signatures signatures_of(const mr::io::trace& trace, const replay_progress& progress) {
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
        mr::routing_plan plan(
            {.tokens = batch.tokens(), .experts = trace.experts, .top_k = trace.top_k, .devices = trace.devices});
        mr::throw_if_failed(mr::cpu::route(vanilla, batch, plan.view()));
        for (int r = 0; r < batch.request_count; ++r) {
          for (int token = batch.request_begin(r); token < batch.request_end(r); ++token) {
            const std::int32_t* ids = plan.ids().data() + static_cast<std::size_t>(token) * trace.top_k;
            signatures.add_row(first_request + r, layer, ids, plan.count(token));
          }
        }
        first_request += batch.request_count;
      };
      if (trace.half)
        record(trace.batch<mr::float16>(layer, s, segments));
      else
        record(trace.batch<float>(layer, s, segments));
    }
    progress(layer + 1, trace.layers);
  }
  return signatures;
}

struct method_result {
  std::string method;
  long long loads = 0;
  long long busiest = 0;  ///< busiest-device loads, with a placement
  long long routed = 0;   ///< distinct experts of the batches routed with --then's policy
  int batches = 0;
  double milliseconds = 0;
};

/// Each request's tokens in the trace, [first, last), numbered as `signatures_of` numbers them.
std::vector<std::pair<int, int>> tokens_of_requests(const mr::io::trace& trace) {
  std::vector<std::pair<int, int>> tokens;
  std::vector<std::int32_t> segments;
  for (int s = 0; s < trace.step_count(); ++s) {
    trace.step_segments(s, segments);
    for (std::size_t r = 0; r + 1 < segments.size(); ++r) {
      tokens.emplace_back(trace.step_begin(s) + segments[r], trace.step_begin(s) + segments[r + 1]);
    }
  }
  return tokens;
}

/// The batches' distinct experts when `policy` routes each batch's tokens at each layer (one
/// request segment per request), summed over layers and batches: reordering and routing
/// together. Scores are gathered as float32 (float16 values convert exactly).
long long routed_loads(const mr::io::trace& trace, const std::vector<std::pair<int, int>>& tokens_of,
                       const mb::batch_list& batches, const mr::runtime_policy& policy) {
  std::vector<float> scores;
  std::vector<std::uint8_t> mask;
  std::vector<std::int32_t> segments;
  long long total = 0;
  for (const auto& members : batches) {
    for (int layer = 0; layer < trace.layers; ++layer) {
      scores.clear(), mask.clear(), segments.assign(1, 0);
      for (const int request : members) {
        const auto [first, last] = tokens_of[static_cast<std::size_t>(request)];
        for (int token = first; token < last; ++token) {
          const std::size_t at = (static_cast<std::size_t>(layer) * trace.tokens + token) * trace.experts;
          for (int e = 0; e < trace.experts; ++e) {
            scores.push_back(trace.half ? mr::to_float(trace.scores_f16[at + e]) : trace.scores_f32[at + e]);
          }
          mask.push_back(trace.mask.empty() ? 1 : trace.mask[static_cast<std::size_t>(token)]);
        }
        segments.push_back(static_cast<std::int32_t>(mask.size()));
      }
      mr::routing_batch<float> batch{mr::make_score_view(scores.data(), static_cast<int>(mask.size()), trace.experts)};
      batch.mode = trace.mode;
      batch.token_mask = mask.data();
      batch.segments = segments.data();
      batch.request_count = static_cast<int>(segments.size()) - 1;
      if (!trace.placement.empty()) batch.placement = trace.placement.data(), batch.device_count = trace.devices;
      mr::routing_plan plan({.tokens = batch.tokens(),
                             .experts = trace.experts,
                             .top_k = trace.top_k,
                             .devices = trace.placement.empty() ? 0 : trace.devices});
      mr::throw_if_failed(mr::cpu::route(policy, batch, plan.view()));
      total += plan.summary().active_count;
    }
  }
  return total;
}

/// What every method is given: the requests, the batch size and each method's knobs.
struct forming_inputs {
  const mb::request_signatures& signatures;
  int batch_size = 0;
  std::uint64_t seed = 1;
  int max_wait = 4;
  const mb::device_masks* masks = nullptr;  ///< with a placement
  const mr::io::trace* trace = nullptr;     ///< with --then
  const std::vector<std::pair<int, int>>* tokens_of = nullptr;
  const mr::runtime_policy* then = nullptr;  ///< --then's policy, or null
};

mb::batch_list batches_of(const std::string& method, const forming_inputs& in) {
  const int requests = in.signatures.requests();
  if (method == "fifo") return mb::fifo_batches(requests, in.batch_size);
  if (method == "random") return mb::random_batches(requests, in.batch_size, in.seed);
  if (method == "lsh") return mb::minhash_batches(in.signatures, in.batch_size, {.seed = in.seed});
  if (method == "spectral") return mb::spectral_batches(in.signatures, in.batch_size, {.seed = in.seed});
  if (method == "online") return mb::online_batches(in.signatures, in.batch_size, in.max_wait);
  if (method == "ep-oracle") return mb::greedy_ep_batches(in.signatures, *in.masks, in.batch_size);
  return mb::greedy_batches(in.signatures, in.batch_size);
}

method_result form_with(const std::string& method, const forming_inputs& in) {
  const auto start = std::chrono::steady_clock::now();
  const mb::batch_list batches = batches_of(method, in);
  const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const long long busiest = in.masks != nullptr ? mb::busiest_device_loads(in.signatures, *in.masks, batches) : 0;
  const long long routed = in.then != nullptr ? routed_loads(*in.trace, *in.tokens_of, batches, *in.then) : 0;
  return {method, mb::expert_loads(in.signatures, batches), busiest, routed, static_cast<int>(batches.size()), elapsed};
}

/// 1 - loads / random's, 0 when random loads nothing.
double saving_of(long long loads, long long random_loads) {
  return random_loads > 0 ? 1.0 - static_cast<double>(loads) / static_cast<double>(random_loads) : 0.0;
}

/// Which optional columns a report has: the busiest device's loads (with a placement) and the
/// loads after routing with --then's policy.
struct report_columns {
  bool placed = false;
  bool routed = false;
};

void print_json(const std::string& dir, int requests, int batch_size, const method_result& random,
                report_columns columns, const std::vector<method_result>& results) {
  std::printf("{\"trace\": \"%s\", \"requests\": %d, \"batch_size\": %d, \"methods\": [", json_escape(dir).c_str(),
              requests, batch_size);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const method_result& r = results[i];
    std::printf("%s{\"method\": \"%s\", \"batches\": %d, \"expert_loads\": %lld, \"saving_vs_random\": %.6g, ",
                i ? ", " : "", r.method.c_str(), r.batches, r.loads, saving_of(r.loads, random.loads));
    if (columns.placed) {
      std::printf("\"busiest_device_loads\": %lld, \"busiest_saving_vs_random\": %.6g, ", r.busiest,
                  saving_of(r.busiest, random.busiest));
    }
    if (columns.routed) {
      std::printf("\"routed_loads\": %lld, \"routed_saving_vs_random\": %.6g, ", r.routed,
                  saving_of(r.routed, random.routed));
    }
    std::printf("\"ms\": %.3f}", r.milliseconds);
  }
  std::printf("]}\n");
}

void print_csv(const method_result& random, report_columns columns, const std::vector<method_result>& results) {
  std::printf("method,batches,expert_loads,saving_vs_random,%s%sms\n",
              columns.placed ? "busiest_device_loads,busiest_saving_vs_random," : "",
              columns.routed ? "routed_loads,routed_saving_vs_random," : "");
  for (const auto& r : results) {
    std::printf("%s,%d,%lld,%.6g,", r.method.c_str(), r.batches, r.loads, saving_of(r.loads, random.loads));
    if (columns.placed) std::printf("%lld,%.6g,", r.busiest, saving_of(r.busiest, random.busiest));
    if (columns.routed) std::printf("%lld,%.6g,", r.routed, saving_of(r.routed, random.routed));
    std::printf("%.3f\n", r.milliseconds);
  }
}

void print_table(const std::string& dir, int requests, int batch_size, const method_result& random,
                 report_columns columns, const std::vector<method_result>& results) {
  std::printf("%d requests of %s in batches of at most %d\n", requests, dir.c_str(), batch_size);
  std::printf("  %-9s %8s %14s %18s", "method", "batches", "expert loads", "saving vs random");
  if (columns.placed) std::printf(" %15s %18s", "busiest device", "saving vs random");
  if (columns.routed) std::printf(" %15s %18s", "then routed", "saving vs random");
  std::printf(" %10s\n", "ms");
  for (const auto& r : results) {
    std::printf("  %-9s %8d %14lld %17.1f%%", r.method.c_str(), r.batches, r.loads,
                100.0 * saving_of(r.loads, random.loads));
    if (columns.placed) std::printf(" %15lld %17.1f%%", r.busiest, 100.0 * saving_of(r.busiest, random.busiest));
    if (columns.routed) std::printf(" %15lld %17.1f%%", r.routed, 100.0 * saving_of(r.routed, random.routed));
    std::printf(" %10.1f\n", r.milliseconds);
  }
}

/// The methods --method names (each checked), or none for the defaults.
std::vector<std::string> methods_of(const arguments& args) {
  const std::vector<std::string> methods = args.all("method");
  for (const auto& m : methods) {
    if (m != "fifo" && m != "random" && m != "lsh" && m != "spectral" && m != "online" && m != "oracle" &&
        m != "ep-oracle") {
      throw usage_error("--method must be one of fifo, random, lsh, spectral, online, oracle, ep-oracle, got '" + m +
                        "'");
    }
  }
  return methods;
}

/// The trace's placement, or `--devices G` experts in G contiguous blocks; empty for neither.
std::vector<std::int32_t> placement_of(const arguments& args, const mr::io::trace& trace, int& devices) {
  devices = 0;
  if (args.has("devices")) {
    devices = static_cast<int>(args.integer("devices", 1, 1, trace.experts));
    std::vector<std::int32_t> placement(static_cast<std::size_t>(trace.experts));
    for (int e = 0; e < trace.experts; ++e) {
      placement[static_cast<std::size_t>(e)] =
          static_cast<std::int32_t>(static_cast<long long>(e) * devices / trace.experts);
    }
    return placement;
  }
  devices = trace.placement.empty() ? 0 : trace.devices;
  return trace.placement;
}

}  // namespace

int batch_command(const std::vector<std::string>& words) {
  const progress_clock::time_point started = progress_clock::now();
  const arguments args(words, {"trace", "batch-size", "method", "seed", "max-wait", "devices", "then"}, {"json", "csv"},
                       {"method"});
  if (args.help()) {
    std::fputs(batch_help, stdout);
    return 0;
  }
  args.exclusive("json", "csv");
  const int batch_size = static_cast<int>(
      parse_integer(args.required("batch-size"), "--batch-size", 1, mb::request_signatures::max_requests));
  const auto seed = static_cast<std::uint64_t>(args.integer("seed", 1, 0, std::numeric_limits<long long>::max()));
  const int max_wait = static_cast<int>(args.integer("max-wait", 4, 0, 1 << 20));
  std::vector<std::string> methods = methods_of(args);
  const std::optional<mr::runtime_policy> then =
      args.has("then") ? std::optional(parse_or_usage(args.get("then", ""))) : std::nullopt;
  const std::string dir = args.required("trace");
  const mr::io::trace trace = load_trace_or_fail(dir);
  int devices = 0;
  const std::vector<std::int32_t> placement = placement_of(args, trace, devices);
  if (methods.empty()) {
    methods = {"fifo", "random", "lsh", "spectral", "online", "oracle"};
    if (devices > 0) methods.push_back("ep-oracle");
  }
  if (devices == 0 && std::find(methods.begin(), methods.end(), "ep-oracle") != methods.end()) {
    throw usage_error("--method ep-oracle needs a placement: a trace with placement.npy, or --devices G");
  }
  const mb::request_signatures signatures = signatures_of(trace, stderr_progress("batch: signatures", started));
  const std::optional<mb::device_masks> masks =
      devices > 0 ? std::optional<mb::device_masks>(std::in_place, signatures, placement, devices) : std::nullopt;
  const std::vector<std::pair<int, int>> tokens_of =
      then ? tokens_of_requests(trace) : std::vector<std::pair<int, int>>{};
  const forming_inputs inputs{signatures,
                              batch_size,
                              seed,
                              max_wait,
                              masks ? &*masks : nullptr,
                              &trace,
                              then ? &tokens_of : nullptr,
                              then ? &*then : nullptr};
  const report_columns columns{devices > 0, then.has_value()};
  const method_result random = form_with("random", inputs);
  std::vector<method_result> results;
  const replay_progress formed = stderr_progress("batch: methods", started);
  for (const auto& m : methods) {
    results.push_back(form_with(m, inputs));
    formed(static_cast<long long>(results.size()), static_cast<long long>(methods.size()));
  }
  if (args.has("json")) {
    print_json(dir, signatures.requests(), batch_size, random, columns, results);
  } else if (args.has("csv")) {
    print_csv(random, columns, results);
  } else {
    print_table(dir, signatures.requests(), batch_size, random, columns, results);
  }
  return 0;
}

}  // namespace moe_route

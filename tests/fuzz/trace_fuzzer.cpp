// Fuzzes the trace loader: bytes decode into the files of a trace directory (scores as
// one file or per layer, wrong ranks and dtypes, headers declaring shapes their payload
// does not back, raw bytes; step, segment, mask and placement files valid or not;
// trace.json generated with odd values, spliced with raw text, raw, or missing).
// `load_trace` must refuse with trace_error, or return a trace that replays (vanilla and
// OEA over every layer and step) without an exception.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <moe_routing/io/npy.hpp>
#include <moe_routing/io/trace.hpp>
#include <moe_routing/moe_routing.hpp>

#include "fuzz_input.hpp"
#include "trace_replay.hpp"  // tools/moe-route

namespace {

namespace fs = std::filesystem;
namespace mr = moe_routing;
namespace npy = moe_routing::npy;

fs::path trace_dir;

/// The shape the scores claim, which trace.json then echoes (or not).
struct declared {
  long long layers = 1, tokens = 0, experts = 2;
};

// Extents past every limit, ones that wrap when cast to int, products that wrap in size_t.
constexpr long long odd_extents[] = {
    0, 1, 2, 3, 16, 64, 1024, 1025, 16384, 16385, 65536, 1LL << 31, 1LL << 32, (1LL << 32) + 1, 1LL << 40};
// No layer count in the thousands: with zero tokens such a trace loads, and replays slowly.
constexpr long long odd_layers[] = {0, 1, 2, 3, 1LL << 31, 1LL << 32, (1LL << 32) + 1, 1LL << 40};
constexpr long long odd_offsets[] = {-1, 0, 1, 2, 16384, 16385, 1LL << 31, 1LL << 40};
constexpr long long odd_devices[] = {-1, 1023, 1024, 5000, (1LL << 31) - 1, 1LL << 40};
constexpr long long small_experts[] = {1, 2, 3, 4, 8, 16, 32, 64};
constexpr const char* odd_numbers[] = {"4.9", "1e9", "-3", "\"4\"", "0", "2147483648", "true", "\"\"", "33", "1024"};
constexpr const char* scorings[] = {"softmax", "sigmoid", "sqrtsoftplus", "probabilities", "bogus"};
constexpr npy::dtype score_types[] = {npy::dtype::float32, npy::dtype::float32, npy::dtype::float16,
                                      npy::dtype::float16, npy::dtype::int32,   npy::dtype::boolean};
constexpr long long max_elements = 4096;  // what we write, so one exec stays fast; headers may claim more

template <class T, std::size_t N>
T pick(const T (&table)[N], fuzz::byte_stream& in) {
  return table[in.u8() % N];
}

[[noreturn]] void failure(const std::string& what) {
  std::fprintf(stderr, "trace_fuzzer: %s\n", what.c_str());
  std::abort();
}

std::string raw_text(fuzz::byte_stream& in, int longest) {
  std::string text(static_cast<std::size_t>(in.in(0, longest)), '\0');
  for (auto& c : text) c = static_cast<char>(in.u8());
  return text;
}

void write_text(const char* name, const std::string& bytes) {
  std::ofstream(trace_dir / name, std::ios::binary) << bytes;
}

/// An array of `type` holding a pattern with ties and sign changes.
void write_array(const char* name, npy::dtype type, const std::vector<std::size_t>& shape, std::uint8_t seed) {
  std::size_t count = 1;
  for (const auto extent : shape) count *= extent;
  const std::size_t width = npy::item_size(type);
  std::vector<unsigned char> bytes(count * width);
  for (std::size_t i = 0; i < count; ++i) {
    const float value = static_cast<float>((i * 37 + seed) % 23) / 7.0f - 1.5f;
    const mr::float16 half = mr::to_float16(value);
    const auto integer = static_cast<std::int32_t>(i);
    if (type == npy::dtype::float32)
      std::memcpy(&bytes[i * width], &value, width);
    else if (type == npy::dtype::float16)
      std::memcpy(&bytes[i * width], &half, width);
    else if (type == npy::dtype::int32)
      std::memcpy(&bytes[i * width], &integer, width);
    else
      bytes[i] = static_cast<unsigned char>(i & 1);
  }
  npy::write((trace_dir / name).string(), type, shape, bytes.data());
}

/// A .npy file whose header declares `shape` over at most a kilobyte of payload: the
/// loader must refuse what the payload does not back, and allocate nothing for it.
void write_declared(const char* name, npy::dtype type, const std::vector<long long>& shape, fuzz::byte_stream& in) {
  std::string header = std::string("{'descr': '") + npy::descr(type) + "', 'fortran_order': False, 'shape': (";
  for (const long long extent : shape) header += std::to_string(extent) + ", ";
  header += "), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  write_text(name, std::string("\x93NUMPY\x01\x00", 8) + std::string(length, 2) + header + raw_text(in, 1024));
}

void write_layer_files(fuzz::byte_stream& in, const declared& d, npy::dtype type, std::uint8_t seed) {
  const bool spoil_last = in.flag();  // the last layer's tokens or dtype differ from layer_000's
  for (long long l = 0; l < d.layers; ++l) {
    char name[32];
    std::snprintf(name, sizeof name, "layer_%03lld.npy", l);
    const bool spoil = spoil_last && l > 0 && l + 1 == d.layers;
    const npy::dtype layer_type = spoil && in.flag() ? npy::dtype::float16 : type;
    const auto tokens = static_cast<std::size_t>(d.tokens + (spoil && layer_type == type ? 1 : 0));
    write_array(name, layer_type, {tokens, static_cast<std::size_t>(d.experts)}, seed);
  }
}

/// Writes the scores in one of the layouts, valid or broken, and returns what they declare.
declared write_scores(fuzz::byte_stream& in) {
  declared d;
  d.layers = in.in(1, 3);
  d.experts = in.flag() ? pick(small_experts, in) : in.in(1, 64);
  d.tokens = std::min<long long>(in.in(0, 40), max_elements / (d.layers * d.experts));
  const npy::dtype type = pick(score_types, in);
  const std::uint8_t seed = in.u8();
  const auto L = static_cast<std::size_t>(d.layers), T = static_cast<std::size_t>(d.tokens),
             E = static_cast<std::size_t>(d.experts);
  const int layout = in.u8() % 8;
  if (layout < 4) write_array("scores.npy", type, {L, T, E}, seed);
  if (layout == 4) write_layer_files(in, d, type, seed);
  if (layout == 5)
    write_array("scores.npy", type, in.flag() ? std::vector<std::size_t>{T, E} : std::vector<std::size_t>{L, T, E, 1},
                seed);
  if (layout == 6) {
    d = {pick(odd_layers, in), pick(odd_extents, in), pick(odd_extents, in)};
    write_declared("scores.npy", type, {d.layers, d.tokens, d.experts}, in);
  }
  if (layout == 7) write_text("scores.npy", raw_text(in, 512));
  return d;
}

/// Offsets as int64, or cut to int32 (wrapping on purpose) when `wide` is false.
void write_offsets(const char* name, const std::vector<long long>& values, bool wide) {
  const std::vector<std::int64_t> v64(values.begin(), values.end());
  std::vector<std::int32_t> v32;
  for (const long long x : values) v32.push_back(static_cast<std::int32_t>(x));
  if (wide)
    npy::write((trace_dir / name).string(), npy::dtype::int64, {v64.size()}, v64.data());
  else
    npy::write((trace_dir / name).string(), npy::dtype::int32, {v32.size()}, v32.data());
}

/// 0, step, 2 step, ..., tokens: at most 17 offsets whatever the token count.
std::vector<long long> even_split(long long tokens, long long step) {
  step = std::max(step, (tokens + 15) / 16);
  std::vector<long long> offsets = {0};
  while (offsets.back() < tokens) offsets.push_back(std::min(tokens, offsets.back() + step));
  return offsets;
}

std::vector<long long> fuzz_offsets(fuzz::byte_stream& in, long long tokens) {
  std::vector<long long> offsets(static_cast<std::size_t>(in.in(0, 8)));
  for (auto& o : offsets) {
    const int kind = in.u8() % 4;
    o = kind == 0 ? pick(odd_offsets, in) : kind == 1 ? tokens + in.in(-1, 1) : in.in(0, 48);
  }
  return offsets;
}

/// Writes steps.npy (valid, one step of every token, fuzzed, 2-D, or none); returns the offsets.
std::vector<long long> write_steps(fuzz::byte_stream& in, long long tokens) {
  const int mode = in.u8() % 8;
  const std::vector<long long> steps = mode < 4    ? even_split(tokens, in.in(1, 8))
                                       : mode == 4 ? std::vector<long long>{0, tokens}
                                       : mode == 5 ? fuzz_offsets(in, tokens)
                                                   : std::vector<long long>{};
  if (mode < 6) write_offsets("steps.npy", steps, tokens > INT32_MAX || in.flag());
  if (mode == 6) write_array("steps.npy", in.flag() ? npy::dtype::float32 : npy::dtype::int32, {1, 2}, 0);
  return steps;
}

void write_segments(fuzz::byte_stream& in, const std::vector<long long>& steps, long long tokens) {
  const int mode = in.u8() % 4;
  if (mode == 0) return;
  std::vector<long long> segments = mode == 1 ? steps : mode == 3 ? fuzz_offsets(in, tokens) : std::vector<long long>{};
  for (std::size_t s = 0; mode == 2 && s < steps.size(); ++s) {  // every step split in two requests
    if (s > 0) segments.push_back(steps[s - 1] + (steps[s] - steps[s - 1]) / 2);
    segments.push_back(steps[s]);
  }
  write_offsets("segments.npy", segments, in.flag());
}

void write_mask(fuzz::byte_stream& in, long long tokens) {
  const int mode = in.u8() % 4;  // none, bool, uint8, or a wrong length (and maybe dtype)
  if (mode == 0 || tokens > max_elements) return;
  const npy::dtype type = mode == 2                ? npy::dtype::uint8
                          : mode == 3 && in.flag() ? npy::dtype::int32
                                                   : npy::dtype::boolean;
  write_array("mask.npy", type, {static_cast<std::size_t>(tokens) + (mode == 3 ? 1 : 0)}, 0);
}

void write_placement(fuzz::byte_stream& in, long long experts) {
  const int mode = in.u8() % 4;
  if (mode == 0 || experts > max_elements) return;
  if (mode == 3) {
    const auto wrong = static_cast<std::size_t>(experts) + 1;
    write_array("placement.npy", in.flag() ? npy::dtype::float32 : npy::dtype::int32, {wrong}, 0);
    return;
  }
  const int devices = in.in(1, 6);
  std::vector<long long> placement;
  for (long long e = 0; e < experts; ++e) placement.push_back(e % devices);
  if (mode == 2 && experts > 0) {  // one device id out of range, possibly past int32
    const std::size_t at = in.u16() % placement.size();
    placement[at] = pick(odd_devices, in);
  }
  write_offsets("placement.npy", placement, mode == 2 || in.flag());
}

/// One metadata number: exact, omitted (""), off by one, odd, or quoted.
std::string number_field(fuzz::byte_stream& in, long long exact) {
  const int mode = in.u8() % 8;
  if (mode == 4) return "";
  if (mode == 5) return std::to_string(exact + 1);
  if (mode == 6) return pick(odd_numbers, in);
  return mode == 7 ? "\"" + std::to_string(exact) + "\"" : std::to_string(exact);
}

void write_metadata(fuzz::byte_stream& in, const declared& d) {
  const int mode = in.u8() % 8;
  if (mode == 7) return;  // no trace.json
  std::string json = "{\"format\": \"moe-routing-trace\", \"version\": 1";
  const auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) json += std::string(", \"") + key + "\": " + value;
  };
  add("layers", number_field(in, d.layers));
  add("tokens", number_field(in, d.tokens));
  add("experts", number_field(in, d.experts));
  add("top_k", number_field(in, in.in(1, static_cast<int>(std::clamp<long long>(d.experts, 1, mr::max_top_k)))));
  const int scoring = in.u8() % 6;
  if (scoring < 5) add("scoring", std::string("\"") + scorings[scoring] + "\"");
  add("source", in.flag() ? "\"fuzz\"" : "\"a \\\"quoted\\\" \\\\ source\"");
  json += "}";
  if (mode == 5) json.insert(static_cast<std::size_t>(in.in(0, static_cast<int>(json.size()))), raw_text(in, 16));
  write_text("trace.json", mode == 6 ? raw_text(in, 160) : json);
}

/// A trace that loaded must route: its shape within the library's limits, its offsets,
/// segments, mask and placement consistent with its scores.
void check_replays(const mr::io::trace& t) {
  const std::size_t cells =
      static_cast<std::size_t>(t.layers) * static_cast<std::size_t>(t.tokens) * static_cast<std::size_t>(t.experts);
  if ((t.half ? t.scores_f16.size() : t.scores_f32.size()) != cells)
    failure("the loaded scores do not hold layers x tokens x experts");
  try {
    (void)moe_route::replay_trace(t, mr::to_runtime_policy(mr::presets::vanilla(t.top_k)), "vanilla");
    (void)moe_route::replay_trace(t, mr::parse_policy_or_throw("oea(k0=1,k=" + std::to_string(t.top_k) + ")"), "oea");
  } catch (const std::exception& error) {
    failure(std::string("a loaded trace does not replay: ") + error.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  trace_dir = fs::temp_directory_path() / ("moe_routing_trace_fuzzer." + std::to_string(::getpid()));
  fs::remove_all(trace_dir);
  fs::create_directories(trace_dir);
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(trace_dir, ignored);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_stream in(data, size);
  fs::remove_all(trace_dir);  // the previous input's files
  fs::create_directory(trace_dir);
  const declared d = write_scores(in);
  const std::vector<long long> steps = write_steps(in, d.tokens);
  write_segments(in, steps, d.tokens);
  write_mask(in, d.tokens);
  write_placement(in, d.experts);
  write_metadata(in, d);

  mr::io::trace loaded;
  try {
    loaded = mr::io::load_trace(trace_dir.string());
  } catch (const mr::io::trace_error& error) {
    if (std::string(error.what()).empty()) failure("trace_error without a message");
    return 0;
  } catch (const std::exception& error) {
    failure(std::string("load_trace threw something other than trace_error: ") + error.what());
  } catch (...) {
    failure("load_trace threw a non-standard exception");
  }
  check_replays(loaded);
  return 0;
}

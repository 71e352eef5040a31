#pragma once
/// \file
/// Router traces on disk: one directory per trace, NumPy files plus a small JSON.
///
///   trace.json      {"format": "moe-routing-trace", "version": 1, "layers": L, "tokens": T,
///                    "experts": E, "top_k": k, "scoring": "softmax", "source": "..."}
///   scores.npy      [L, T, E] float32 or float16 router output, C order
///                   (or layer_000.npy ... [T, E], one per layer)
///   steps.npy       [S + 1] int32/int64 token offsets of the decode steps (batches)
///   segments.npy    [Q + 1] token offsets of request segments; every step boundary is one
///                   (optional: default one request per token)
///   mask.npy        [T] bool or uint8, nonzero = valid token (optional)
///   placement.npy   [E] int32/int64 device of each expert (optional)
///
/// `load_trace` checks that the files agree and throws `trace_error` naming the file.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "moe_routing/core/batch.hpp"
#include "moe_routing/core/config.hpp"
#include "moe_routing/core/half.hpp"
#include "moe_routing/io/flat_json.hpp"
#include "moe_routing/io/npy.hpp"

namespace moe_routing::io {

class trace_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A trace in memory. Scores are kept as float32 or float16, as stored.
struct trace {
  int layers = 0, tokens = 0, experts = 0, top_k = 0;
  scoring mode = scoring::softmax;
  std::string source;
  bool half = false;
  std::vector<float> scores_f32;        ///< [L, T, E] when !half
  std::vector<float16> scores_f16;      ///< [L, T, E] when half
  std::vector<std::int32_t> steps;      ///< [S + 1]
  std::vector<std::int32_t> segments;   ///< [Q + 1]; empty = one request per token
  std::vector<std::uint8_t> mask;       ///< [T]; empty = all valid
  std::vector<std::int32_t> placement;  ///< [E]; empty = none
  int devices = 0;

  int step_count() const { return static_cast<int>(steps.size()) - 1; }
  int step_begin(int s) const { return steps[static_cast<std::size_t>(s)]; }
  int step_end(int s) const { return steps[static_cast<std::size_t>(s) + 1]; }

  /// Request offsets of one step, relative to its first token, written to `out`.
  void step_segments(int s, std::vector<std::int32_t>& out) const {
    out.clear();
    const int begin = step_begin(s), end = step_end(s);
    if (segments.empty()) {
      for (int t = begin; t <= end; ++t) out.push_back(t - begin);
      return;
    }
    for (const std::int32_t o : segments) {
      if (o >= begin && o <= end) out.push_back(o - begin);
    }
  }

  /// The routing batch of one layer and step, in the element type the trace stores
  /// (`half` says which); asking for the other throws. `segment_buffer` must outlive the batch.
  template <score_element Element>
  routing_batch<Element> batch(int layer, int s, std::vector<std::int32_t>& segment_buffer) const {
    static_assert(std::is_same_v<Element, float> || std::is_same_v<Element, float16>,
                  "A trace stores float32 or float16 scores; ask for batch<float> or batch<float16>.");
    if (half != std::is_same_v<Element, float16>) {
      throw trace_error(std::string("trace holds ") + (half ? "float16" : "float32") + " scores; ask for batch<" +
                        (half ? "float16" : "float") + ">");
    }
    const std::size_t offset = (static_cast<std::size_t>(layer) * tokens + step_begin(s)) * experts;
    const int n = step_end(s) - step_begin(s);
    routing_batch<Element> b;
    if constexpr (std::is_same_v<Element, float>) b.scores = {scores_f32.data() + offset, n, experts, experts};
    if constexpr (std::is_same_v<Element, float16>) b.scores = {scores_f16.data() + offset, n, experts, experts};
    b.mode = mode;
    step_segments(s, segment_buffer);
    b.segments = segment_buffer.data();
    b.request_count = static_cast<int>(segment_buffer.size()) - 1;
    if (!mask.empty()) b.token_mask = mask.data() + step_begin(s);
    if (!placement.empty()) {
      b.placement = placement.data();
      b.device_count = devices;
    }
    return b;
  }
};

inline const char* scoring_name(scoring mode) {
  switch (mode) {
    case scoring::softmax:
      return "softmax";
    case scoring::sigmoid:
      return "sigmoid";
    case scoring::sqrtsoftplus:
      return "sqrtsoftplus";
    case scoring::probabilities:
      return "probabilities";
  }
  return "softmax";
}

inline scoring parse_scoring(const std::string& text, const std::string& origin) {
  for (scoring mode : {scoring::softmax, scoring::sigmoid, scoring::sqrtsoftplus, scoring::probabilities}) {
    if (text == scoring_name(mode)) return mode;
  }
  throw trace_error(origin + ": unknown scoring '" + text + "'");
}

/// The most layers a trace directory may hold.
inline constexpr int max_layers = 4096;

namespace detail {

inline std::vector<std::int32_t> read_offsets(const std::filesystem::path& file, const char* what) {
  const npy::array a = npy::read(file.string());
  if (a.shape.size() != 1) throw trace_error(file.string() + ": " + what + " must be 1-D");
  std::vector<std::int32_t> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    long long v = 0;
    if (a.type == npy::dtype::int32)
      v = a.data<std::int32_t>()[i];
    else if (a.type == npy::dtype::int64)
      v = a.data<std::int64_t>()[i];
    else
      throw trace_error(file.string() + ": " + what + " must be int32 or int64, not " + npy::descr(a.type));
    if (v < 0 || v > (1LL << 30))
      throw trace_error(file.string() + ": " + what + " value " + std::to_string(v) + " out of range");
    out[i] = static_cast<std::int32_t>(v);
  }
  return out;
}

/// The text of trace.json: a regular file of at most 1 MiB (it holds a few fields).
inline std::string read_metadata(const std::string& path) {
  if (const char* reason = npy::detail::unreadable_reason(path)) throw trace_error(path + ": " + reason);
  if (std::filesystem::file_size(path) > (std::size_t{1} << 20)) throw trace_error(path + ": larger than 1 MiB");
  std::ifstream in(path);
  if (!in) throw trace_error(path + ": cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A metadata field as an int: the whole text, no fraction, no junk, in int range.
inline int whole_number(const std::string& text, const std::string& origin, const char* key) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end) {
    throw trace_error(origin + ": \"" + key + "\" must be a whole number in int range, not " + text);
  }
  return value;
}

/// Tokens and experts of the scores, checked before they become ints.
inline void check_extents(std::size_t tokens, std::size_t experts, const std::string& origin) {
  if (tokens < 1 || tokens > (std::size_t{1} << 30) || experts < 2 || experts > static_cast<std::size_t>(max_experts)) {
    throw trace_error(origin + ": " + std::to_string(tokens) + " tokens of " + std::to_string(experts) +
                      " experts: tokens must be in [1, 2^30] and experts in [2, " + std::to_string(max_experts) + "]");
  }
}

inline void check_offsets(const std::vector<std::int32_t>& offsets, int tokens, const std::string& file,
                          const char* what) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != tokens) {
    throw trace_error(file + ": " + what + " must start at 0 and end at the token count " + std::to_string(tokens));
  }
  for (std::size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1])
      throw trace_error(file + ": " + what + " must not decrease (at index " + std::to_string(i) + ")");
  }
}

}  // namespace detail

namespace detail {

namespace fs = std::filesystem;

/// trace.json: top_k, scoring and source (the sizes are checked against the scores later).
inline std::map<std::string, std::string> read_metadata_fields(const fs::path& dir, trace& t) {
  const std::string path = (dir / "trace.json").string();
  auto fields = parse_flat_json(read_metadata(path), path);
  const auto top_k = fields.find("top_k");
  if (top_k == fields.end()) throw trace_error(path + ": missing \"top_k\"");
  t.top_k = whole_number(top_k->second, path, "top_k");
  if (fields.count("scoring")) t.mode = parse_scoring(fields.at("scoring"), path);
  if (fields.count("source")) t.source = fields.at("source");
  return fields;
}

/// The score files: one [L, T, E] scores.npy, or one [T, E] layer_NNN.npy per layer.
inline std::vector<npy::array> read_score_files(const fs::path& dir, trace& t) {
  std::vector<npy::array> layers;
  if (fs::exists(dir / "scores.npy")) {
    const std::string path = (dir / "scores.npy").string();
    layers.push_back(npy::read(path));
    const auto& shape = layers[0].shape;
    if (shape.size() != 3) throw trace_error(path + ": scores must be [layers, tokens, experts]");
    check_extents(shape[1], shape[2], path);
    if (shape[0] < 1 || shape[0] > static_cast<std::size_t>(max_layers)) {
      throw trace_error(path + ": " + std::to_string(shape[0]) + " layers; a trace holds 1 to " +
                        std::to_string(max_layers));
    }
    t.layers = static_cast<int>(shape[0]);
    t.tokens = static_cast<int>(shape[1]);
    t.experts = static_cast<int>(shape[2]);
    return layers;
  }
  for (int l = 0; l <= max_layers; ++l) {
    char name[32];
    std::snprintf(name, sizeof name, "layer_%03d.npy", l);
    const std::string path = (dir / name).string();
    if (!fs::exists(path)) break;
    if (l == max_layers) throw trace_error(path + ": a trace holds at most " + std::to_string(max_layers) + " layers");
    layers.push_back(npy::read(path));
    const auto& a = layers.back();
    if (a.shape.size() != 2) throw trace_error(path + ": a layer file must be [tokens, experts]");
    if (l == 0) {
      check_extents(a.shape[0], a.shape[1], path);
      t.tokens = static_cast<int>(a.shape[0]);
      t.experts = static_cast<int>(a.shape[1]);
    } else if (a.shape != layers[0].shape || a.type != layers[0].type) {
      throw trace_error(path + ": shape or dtype differs from layer_000.npy");
    }
  }
  t.layers = static_cast<int>(layers.size());
  if (t.layers == 0) throw trace_error(dir.string() + ": no scores.npy and no layer_000.npy");
  return layers;
}

/// Keeps the scores in the trace, float32 or float16 as stored.
inline void keep_scores(const std::vector<npy::array>& layers, const fs::path& dir, trace& t) {
  const npy::dtype type = layers[0].type;
  if (type != npy::dtype::float32 && type != npy::dtype::float16) {
    throw trace_error(dir.string() + ": scores must be float32 or float16, not " + std::string(npy::descr(type)));
  }
  t.half = type == npy::dtype::float16;
  for (const auto& a : layers) {
    if (t.half)
      t.scores_f16.insert(t.scores_f16.end(), a.data<float16>(), a.data<float16>() + a.size());
    else
      t.scores_f32.insert(t.scores_f32.end(), a.data<float>(), a.data<float>() + a.size());
  }
}

/// The sizes trace.json declares agree with the scores; top_k fits them.
inline void check_declared_sizes(const std::map<std::string, std::string>& fields, const fs::path& dir,
                                 const trace& t) {
  const std::string path = (dir / "trace.json").string();
  for (const auto& [key, actual] :
       {std::pair{"layers", t.layers}, std::pair{"tokens", t.tokens}, std::pair{"experts", t.experts}}) {
    const auto it = fields.find(key);
    if (it == fields.end()) continue;
    const int declared = whole_number(it->second, path, key);
    if (declared != actual) {
      throw trace_error(path + ": \"" + key + "\" = " + std::to_string(declared) + " disagrees with the scores' " +
                        std::to_string(actual));
    }
  }
  if (t.top_k < 1 || t.top_k > t.experts || t.top_k > max_top_k) {
    throw trace_error(path + ": top_k = " + std::to_string(t.top_k) + " must be in [1, min(experts, " +
                      std::to_string(max_top_k) + ")]");
  }
}

/// steps.npy: at least one step, none longer than one routing call; segments.npy inside them.
inline void read_steps_and_segments(const fs::path& dir, trace& t) {
  const std::string steps_path = (dir / "steps.npy").string();
  if (!fs::exists(steps_path)) throw trace_error(steps_path + ": cannot open file");
  t.steps = read_offsets(steps_path, "steps");
  check_offsets(t.steps, t.tokens, steps_path, "step offsets");
  if (t.step_count() < 1) throw trace_error(steps_path + ": a trace needs at least one step");
  for (int step = 0; step < t.step_count(); ++step) {
    const int length = t.step_end(step) - t.step_begin(step);
    if (length > max_tokens) {  // a step is one routing call
      throw trace_error(steps_path + ": step " + std::to_string(step) + " holds " + std::to_string(length) +
                        " tokens, more than max_tokens = " + std::to_string(max_tokens));
    }
  }
  const std::string segments_path = (dir / "segments.npy").string();
  if (!fs::exists(segments_path)) return;
  t.segments = read_offsets(segments_path, "segments");
  check_offsets(t.segments, t.tokens, segments_path, "segment offsets");
  for (const std::int32_t boundary : t.steps) {
    if (!std::binary_search(t.segments.begin(), t.segments.end(), boundary)) {
      throw trace_error(segments_path + ": step boundary " + std::to_string(boundary) +
                        " is not a segment boundary (a request segment cannot span decode steps)");
    }
  }
}

/// mask.npy and placement.npy, when present.
inline void read_mask_and_placement(const fs::path& dir, trace& t) {
  const std::string mask_path = (dir / "mask.npy").string();
  if (fs::exists(mask_path)) {
    const npy::array m = npy::read(mask_path);
    if ((m.type != npy::dtype::boolean && m.type != npy::dtype::uint8) ||
        m.shape != std::vector<std::size_t>{std::size_t(t.tokens)}) {
      throw trace_error(mask_path + ": mask must be bool or uint8 of shape [" + std::to_string(t.tokens) + "]");
    }
    t.mask.assign(m.bytes.begin(), m.bytes.end());
  }
  const std::string placement_path = (dir / "placement.npy").string();
  if (!fs::exists(placement_path)) return;
  t.placement = read_offsets(placement_path, "placement");
  if (t.placement.size() != static_cast<std::size_t>(t.experts)) {
    throw trace_error(placement_path + ": placement must have shape [" + std::to_string(t.experts) + "]");
  }
  const auto largest = std::max_element(t.placement.begin(), t.placement.end());
  if (*largest >= max_experts) {  // a routing call takes at most max_experts devices
    throw trace_error(placement_path + ": placement[" + std::to_string(largest - t.placement.begin()) + "] = " +
                      std::to_string(*largest) + " must be below max_experts = " + std::to_string(max_experts));
  }
  t.devices = 1 + *largest;
}

}  // namespace detail

/// Reads and cross-checks a trace directory. Every failure is a `trace_error` naming the
/// file: a loaded trace can be replayed step by step.
inline trace load_trace(const std::string& directory) {
  const std::filesystem::path dir(directory);
  trace t;
  try {
    const auto fields = detail::read_metadata_fields(dir, t);
    detail::keep_scores(detail::read_score_files(dir, t), dir, t);
    detail::check_declared_sizes(fields, dir, t);
    detail::read_steps_and_segments(dir, t);
    detail::read_mask_and_placement(dir, t);
  } catch (const npy::npy_error& error) {
    throw trace_error(error.what());
  } catch (const json_error& error) {
    throw trace_error(error.what());
  } catch (const std::filesystem::filesystem_error& error) {
    throw trace_error(error.what());
  }
  return t;
}

/// Whether `name` is one of the files a trace directory consists of.
inline bool is_trace_file(const std::string& name) {
  for (const char* known : {"trace.json", "scores.npy", "steps.npy", "segments.npy", "mask.npy", "placement.npy"}) {
    if (name == known) return true;
  }
  const std::string prefix = "layer_", suffix = ".npy";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

/// Writes a trace directory (created if missing) in the layout above, scores as one file.
inline void save_trace(const trace& t, const std::string& directory) {
  namespace fs = std::filesystem;
  const fs::path dir(directory);
  fs::create_directories(dir);
  std::ofstream meta(dir / "trace.json");
  meta << "{\"format\": \"moe-routing-trace\", \"version\": 1, \"layers\": " << t.layers << ", \"tokens\": " << t.tokens
       << ", \"experts\": " << t.experts << ", \"top_k\": " << t.top_k << ", \"scoring\": \"" << scoring_name(t.mode)
       << "\", \"source\": \"" << t.source << "\"}\n";
  meta.close();  // flushes: a full disk may only show here
  if (!meta) throw trace_error((dir / "trace.json").string() + ": write failed");
  const std::vector<std::size_t> shape = {std::size_t(t.layers), std::size_t(t.tokens), std::size_t(t.experts)};
  try {
    if (t.half)
      npy::write((dir / "scores.npy").string(), npy::dtype::float16, shape, t.scores_f16.data());
    else
      npy::write((dir / "scores.npy").string(), npy::dtype::float32, shape, t.scores_f32.data());
    npy::write((dir / "steps.npy").string(), npy::dtype::int32, {t.steps.size()}, t.steps.data());
    if (!t.segments.empty())
      npy::write((dir / "segments.npy").string(), npy::dtype::int32, {t.segments.size()}, t.segments.data());
    if (!t.mask.empty()) npy::write((dir / "mask.npy").string(), npy::dtype::boolean, {t.mask.size()}, t.mask.data());
    if (!t.placement.empty())
      npy::write((dir / "placement.npy").string(), npy::dtype::int32, {t.placement.size()}, t.placement.data());
  } catch (const npy::npy_error& error) {
    throw trace_error(error.what());
  }
}

}  // namespace moe_routing::io

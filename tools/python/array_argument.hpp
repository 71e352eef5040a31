#pragma once
/// \file
/// One array handed in from Python (a torch tensor or a NumPy array) as a routing call
/// sees it: where its elements are, their type, shape and strides in elements, and the
/// device that holds it. Both front ends (the pybind11 module and the PyTorch operator)
/// describe their arrays this way, so every check of a caller's array is written once,
/// here, and each message names the parameter and its value as the library's do.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace moe_routing::python {

enum class element_kind : std::uint8_t { float32, float16, bfloat16, int32, int64, boolean, uint8, other };

/// Bad input to a Python call: the binding turns it into `ValueError`.
class argument_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct array_argument {
  bool given = false;  ///< false for an optional argument left as None
  const void* data = nullptr;
  element_kind kind = element_kind::other;
  std::string_view type_name;  ///< as the caller's library spells the dtype, for messages
  int rank = 0;
  std::int64_t shape[2] = {0, 0};
  std::int64_t strides[2] = {0, 0};  ///< in elements
  std::string_view device = "cpu";   ///< "cpu", "cuda", ...: only the CPU is routed here
};

namespace detail {

inline std::string shape_text(const array_argument& array) {
  std::string text = "[";
  for (int d = 0; d < array.rank && d < 2; ++d) text += (d ? ", " : "") + std::to_string(array.shape[d]);
  return text + (array.rank > 2 ? ", ...]" : "]");
}

[[noreturn]] inline void refuse(std::string_view name, std::string_view what, const std::string& value,
                                std::string_view requirement) {
  throw argument_error(std::string(name) + "." + std::string(what) + " = " + value + ": " + std::string(requirement));
}

}  // namespace detail

/// The array lives in memory this build can read: the CPU's.
inline void require_cpu(const array_argument& array, std::string_view name) {
  if (array.device != "cpu") {
    detail::refuse(name, "device", std::string(array.device),
                   "must be cpu: this build routes CPU arrays only (the CUDA operator is not built; docs/python.md)");
  }
}

/// Rows of an [n, E] score matrix may be strided (a slice of a wider tensor); the experts
/// of a row must be adjacent, which is how the library reads a row.
inline void check_scores(const array_argument& scores, int max_rows, int min_cols, int max_cols) {
  require_cpu(scores, "scores");
  if (scores.kind != element_kind::float32 && scores.kind != element_kind::float16 &&
      scores.kind != element_kind::bfloat16) {
    detail::refuse("scores", "dtype", std::string(scores.type_name), "must be float32, float16 or bfloat16");
  }
  if (scores.rank != 2) detail::refuse("scores", "shape", detail::shape_text(scores), "must be 2-D [n, E]");
  if (scores.shape[0] > max_rows) {
    detail::refuse("scores", "shape[0]", std::to_string(scores.shape[0]),
                   "(n) must be at most max_tokens = " + std::to_string(max_rows));
  }
  if (scores.shape[1] < min_cols || scores.shape[1] > max_cols) {
    detail::refuse("scores", "shape[1]", std::to_string(scores.shape[1]),
                   "(E) must be in [" + std::to_string(min_cols) + ", " + std::to_string(max_cols) + "]");
  }
  // An array without elements reads nothing: NumPy gives one strides (0, 0).
  if (scores.shape[0] == 0) return;
  if (scores.strides[1] != 1) {
    detail::refuse("scores", "stride(1)", std::to_string(scores.strides[1]),
                   "must be 1: the experts of a row must be adjacent (call .contiguous() or numpy.ascontiguousarray)");
  }
  if (scores.shape[0] > 1 && scores.strides[0] < scores.shape[1]) {
    detail::refuse("scores", "stride(0)", std::to_string(scores.strides[0]),
                   "must be at least E = " + std::to_string(scores.shape[1]) +
                       ": rows may not overlap or run backwards (call .contiguous() or numpy.ascontiguousarray)");
  }
}

/// A contiguous 1-D array of `length` elements of one of the kinds `allowed` names.
inline void check_vector(const array_argument& array, std::string_view name, std::int64_t length,
                         std::initializer_list<element_kind> kinds, std::string_view allowed) {
  require_cpu(array, name);
  bool kind_ok = false;
  for (element_kind kind : kinds) kind_ok = kind_ok || array.kind == kind;
  if (!kind_ok) detail::refuse(name, "dtype", std::string(array.type_name), "must be " + std::string(allowed));
  if (array.rank != 1) detail::refuse(name, "shape", detail::shape_text(array), "must be 1-D");
  if (length >= 0 && array.shape[0] != length) {
    detail::refuse(name, "shape", detail::shape_text(array), "must be [" + std::to_string(length) + "]");
  }
  if (array.shape[0] > 1 && array.strides[0] != 1) {  // (an empty or 1-element array reads no stride)
    detail::refuse(name, "stride(0)", std::to_string(array.strides[0]), "must be 1 (call .contiguous())");
  }
}

/// An output buffer the caller allocated: [rows, cols], row-major, of one kind.
inline void check_output(const array_argument& array, std::string_view name, std::int64_t rows, std::int64_t cols,
                         element_kind kind, std::string_view kind_name) {
  require_cpu(array, name);
  if (array.kind != kind)
    detail::refuse(name, "dtype", std::string(array.type_name), "must be " + std::string(kind_name));
  const bool shaped = array.rank == 2 && array.shape[0] == rows && array.shape[1] == cols;
  if (!shaped) {
    detail::refuse(name, "shape", detail::shape_text(array),
                   "must be [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  if (rows * cols == 0) return;  // no elements to write: NumPy gives an empty array strides (0, 0)
  if ((rows > 1 && array.strides[0] != cols) || (cols > 1 && array.strides[1] != 1)) {
    detail::refuse(name, "strides",
                   "[" + std::to_string(array.strides[0]) + ", " + std::to_string(array.strides[1]) + "]",
                   "must be row-major and contiguous");
  }
}

}  // namespace moe_routing::python

#pragma once
/// \file
/// A minimal NumPy `.npy` reader and writer (format versions 1-3, little-endian,
/// C order): router traces and plans travel as the files `numpy.save` writes.
/// Errors throw `npy_error` with the file name and what is wrong with it.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace moe_routing::npy {

enum class dtype : std::uint8_t { float32, float16, int32, int64, boolean, uint8 };

inline const char* descr(dtype type) noexcept {
  switch (type) {
    case dtype::float32:
      return "<f4";
    case dtype::float16:
      return "<f2";
    case dtype::int32:
      return "<i4";
    case dtype::int64:
      return "<i8";
    case dtype::boolean:
      return "|b1";
    case dtype::uint8:
      return "|u1";
  }
  return "?";
}

inline std::size_t item_size(dtype type) noexcept {
  switch (type) {
    case dtype::float32:
    case dtype::int32:
      return 4;
    case dtype::float16:
      return 2;
    case dtype::int64:
      return 8;
    case dtype::boolean:
    case dtype::uint8:
      return 1;
  }
  return 1;
}

class npy_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One array as read: element type, shape, and the raw little-endian bytes.
struct array {
  dtype type = dtype::float32;
  std::vector<std::size_t> shape;
  std::vector<unsigned char> bytes;

  std::size_t size() const noexcept {
    std::size_t total = 1;
    for (const auto extent : shape) total *= extent;
    return total;
  }
  template <class T>
  const T* data() const noexcept {
    return reinterpret_cast<const T*>(bytes.data());
  }
  template <class T>
  T* data() noexcept {
    return reinterpret_cast<T*>(bytes.data());
  }
};

namespace detail {

inline std::string_view dict_value(std::string_view header, std::string_view key, const std::string& origin) {
  std::string quoted(1, '\'');
  quoted.append(key);
  quoted.push_back('\'');
  const std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) {
    throw npy_error(origin + ": header has no '" + std::string(key) + "' entry");
  }
  std::size_t begin = header.find(':', at);
  if (begin == std::string_view::npos) throw npy_error(origin + ": malformed header");
  ++begin;
  while (begin < header.size() && header[begin] == ' ') ++begin;
  std::size_t end = begin;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', begin);
    if (end == std::string_view::npos) throw npy_error(origin + ": malformed shape in header");
    return header.substr(begin, end - begin + 1);
  }
  if (end < header.size() && header[end] == '\'') {
    end = header.find('\'', begin + 1);
    if (end == std::string_view::npos) throw npy_error(origin + ": malformed string in header");
    return header.substr(begin + 1, end - begin - 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(begin, end - begin);
}

/// Why `path` cannot be read as a data file (missing, or not a regular file: a directory,
/// a device such as /dev/zero, a pipe), or null when it can. Shared by every reader here.
inline const char* unreadable_reason(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) return "cannot open file";
  if (!std::filesystem::is_regular_file(status)) return "not a regular file";
  return nullptr;
}

}  // namespace detail

/// What a `.npy` header declares: the element type, the shape, where the data starts
/// and how many bytes it takes (the shape's product checked for overflow).
struct header_info {
  dtype type = dtype::float32;
  std::vector<std::size_t> shape;
  std::size_t data_start = 0;
  std::size_t payload = 0;
};

/// The longest header accepted: numpy writes well under a kilobyte; a larger one is a
/// corrupt or hostile file, and is refused before it is read.
inline constexpr std::size_t max_header_bytes = std::size_t{1} << 20;

namespace detail {

/// Where the header dictionary starts and how long it is, from the preamble (format 1 to 3).
inline void read_preamble(const unsigned char* bytes, std::size_t length, const std::string& origin,
                          std::size_t& header_start, std::size_t& header_length) {
  static constexpr unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (length < 10 || std::memcmp(bytes, magic, sizeof magic) != 0) {
    throw npy_error(origin + ": not a .npy file (bad magic string)");
  }
  const int major = bytes[6];
  if (major == 1) {
    header_length = bytes[8] | (static_cast<std::size_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (length < 12) throw npy_error(origin + ": truncated header");
    header_length = bytes[8] | (static_cast<std::size_t>(bytes[9]) << 8) | (static_cast<std::size_t>(bytes[10]) << 16) |
                    (static_cast<std::size_t>(bytes[11]) << 24);
    header_start = 12;
  } else {
    throw npy_error(origin + ": unsupported .npy format version " + std::to_string(major));
  }
  if (header_length > max_header_bytes) {
    throw npy_error(origin + ": header of " + std::to_string(header_length) + " bytes is larger than " +
                    std::to_string(max_header_bytes));
  }
}

/// The element type a `descr` names.
inline dtype type_of_descr(std::string_view type, const std::string& origin) {
  for (dtype candidate : {dtype::float32, dtype::float16, dtype::int32, dtype::int64, dtype::boolean, dtype::uint8}) {
    if (type == descr(candidate)) return candidate;
  }
  throw npy_error(origin + ": unsupported dtype '" + std::string(type) +
                  "' (expected little-endian <f4, <f2, <i4, <i8, |b1 or |u1)");
}

/// The extents of a shape tuple such as "(3, 4)" into `result.shape` and its byte count into
/// `result.payload`, refusing extents and products no file can hold.
inline void read_shape(std::string_view shape, const std::string& origin, header_info& result) {
  std::size_t position = 1;
  std::size_t payload = item_size(result.type);
  while (position < shape.size()) {
    while (position < shape.size() && (shape[position] == ' ' || shape[position] == ',')) ++position;
    if (position >= shape.size() || shape[position] == ')') break;
    std::size_t extent = 0;
    bool digits = false;
    while (position < shape.size() && shape[position] >= '0' && shape[position] <= '9') {
      extent = extent * 10 + static_cast<std::size_t>(shape[position++] - '0');
      digits = true;
      if (extent > (std::size_t{1} << 40)) throw npy_error(origin + ": shape extent too large");
    }
    if (!digits) throw npy_error(origin + ": malformed shape '" + std::string(shape) + "'");
    if (extent != 0 && payload > (std::size_t{1} << 60) / extent) {
      throw npy_error(origin + ": shape " + std::string(shape) + " holds more bytes than any file can");
    }
    payload *= extent;
    result.shape.push_back(extent);
  }
  result.payload = payload;
}

}  // namespace detail

/// Reads the preamble and header dictionary from the first `length` bytes of a file
/// (enough when `length` >= data_start; `needs_more` is set otherwise).
inline header_info parse_header(const unsigned char* bytes, std::size_t length, const std::string& origin,
                                bool* needs_more = nullptr) {
  std::size_t header_start = 0, header_length = 0;
  detail::read_preamble(bytes, length, origin, header_start, header_length);
  header_info result;
  result.data_start = header_start + header_length;
  if (header_start + header_length > length) {
    if (needs_more != nullptr) {
      *needs_more = true;
      return result;
    }
    throw npy_error(origin + ": truncated header");
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes + header_start), header_length);
  result.type = detail::type_of_descr(detail::dict_value(header, "descr", origin), origin);
  const std::string_view fortran = detail::dict_value(header, "fortran_order", origin);
  if (fortran.find("True") != std::string_view::npos) {
    throw npy_error(origin + ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  }
  detail::read_shape(detail::dict_value(header, "shape", origin), origin, result);
  return result;
}

/// An array of the header's type and shape with room for its payload, once the file's
/// `length` is known to hold that payload.
inline array array_for(const header_info& header, std::uintmax_t length, const std::string& origin) {
  if (length - header.data_start < header.payload) {
    throw npy_error(origin + ": truncated data: shape needs " + std::to_string(header.payload) + " bytes, file holds " +
                    std::to_string(length - header.data_start));
  }
  array result;
  result.type = header.type;
  result.shape = header.shape;
  result.bytes.resize(header.payload);
  return result;
}

/// Parses a whole `.npy` file held in memory. `origin` names it in error messages.
inline array parse(const unsigned char* bytes, std::size_t length, const std::string& origin) {
  const header_info header = parse_header(bytes, length, origin);
  array result = array_for(header, length, origin);
  if (header.payload > 0) std::memcpy(result.bytes.data(), bytes + header.data_start, header.payload);
  return result;
}

/// Reads a `.npy` file: a regular file only (never a directory, device or pipe), and
/// never more bytes than its header declares, which must be in the file.
inline array read(const std::string& path) {
  if (const char* reason = detail::unreadable_reason(path)) throw npy_error(path + ": " + reason);
  std::error_code error;
  const std::uintmax_t file_size = std::filesystem::file_size(path, error);
  if (error) throw npy_error(path + ": cannot read the file size");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw npy_error(path + ": cannot open file");
  // The header is read first (numpy's fit in the first 4 KiB), the data only once the file
  // is known to hold what the header declares.
  constexpr std::size_t first_read = 4096;
  std::vector<unsigned char> content(static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, first_read)));
  in.read(reinterpret_cast<char*>(content.data()), static_cast<std::streamsize>(content.size()));
  bool needs_more = false;
  header_info header = parse_header(content.data(), content.size(), path, &needs_more);
  if (needs_more) {
    if (header.data_start > file_size) throw npy_error(path + ": truncated header");
    content.resize(header.data_start);
    in.read(reinterpret_cast<char*>(content.data() + first_read),
            static_cast<std::streamsize>(header.data_start - first_read));
    header = parse_header(content.data(), content.size(), path);
  }
  array result = array_for(header, file_size, path);
  in.seekg(static_cast<std::streamoff>(header.data_start));
  in.read(reinterpret_cast<char*>(result.bytes.data()), static_cast<std::streamsize>(header.payload));
  if (!in && header.payload > 0) throw npy_error(path + ": read failed");
  return result;
}

/// The bytes of a version-1 `.npy` file (header padded to 64 bytes, as numpy does).
inline std::vector<unsigned char> serialize(dtype type, const std::vector<std::size_t>& shape, const void* data) {
  std::string header = std::string("{'descr': '") + descr(type) + "', 'fortran_order': False, 'shape': (";
  std::size_t count = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    header += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    if (i + 1 < shape.size()) header += ' ';
    count *= shape[i];
  }
  header += "), }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  const std::size_t payload = count * item_size(type);
  std::vector<unsigned char> out(10 + header.size() + payload);
  const unsigned char preamble[10] = {0x93,
                                      'N',
                                      'U',
                                      'M',
                                      'P',
                                      'Y',
                                      1,
                                      0,
                                      static_cast<unsigned char>(header.size() & 0xff),
                                      static_cast<unsigned char>(header.size() >> 8)};
  std::memcpy(out.data(), preamble, sizeof preamble);
  std::memcpy(out.data() + 10, header.data(), header.size());
  if (payload > 0) std::memcpy(out.data() + 10 + header.size(), data, payload);
  return out;
}

inline void write(const std::string& path, dtype type, const std::vector<std::size_t>& shape, const void* data) {
  const std::vector<unsigned char> bytes = serialize(type, shape, data);
  std::ofstream out(path, std::ios::binary);
  if (!out) throw npy_error(path + ": cannot create file");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();  // flushes: a full disk may only show here
  if (!out) throw npy_error(path + ": write failed");
}

}  // namespace moe_routing::npy

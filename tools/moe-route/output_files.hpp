#pragma once
// A command's output files, all or nothing: each is written under a temporary name
// beside its destination and closed with its errors checked; only when every one was
// written are they renamed into place. A failure (or an exception) before that removes
// the temporary files, so a failed run never leaves a new ids.npy beside an old
// weights.npy, nor a half-written file.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

#include "command_line.hpp"

namespace moe_route {

/// The name a destination is written under until the whole command succeeded.
inline std::filesystem::path temporary_name(const std::filesystem::path& destination) {
  return destination.string() + ".tmp-moe-route-" + std::to_string(::getpid());
}

/// One spelling of a path for comparing outputs: absolute, with the parts that exist
/// resolved ("./ids.npy", "ids.npy" and a symlink to it compare equal).
inline std::filesystem::path comparable_path(const std::string& path) {
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(path), error);
  return error ? std::filesystem::absolute(path).lexically_normal() : resolved;
}

/// Refuses (exit 2) two of the named paths that are one file: an output written twice,
/// or over one of the command's inputs. `named` holds (option, path) pairs.
inline void refuse_shared_paths(const std::vector<std::pair<std::string, std::string>>& named) {
  for (std::size_t i = 0; i < named.size(); ++i) {
    for (std::size_t j = i + 1; j < named.size(); ++j) {
      if (comparable_path(named[i].second) == comparable_path(named[j].second)) {
        throw usage_error("--" + named[i].first + " and --" + named[j].first + " name the same file '" +
                          named[j].second + "'");
      }
    }
  }
}

/// Refuses (exit 2) outputs that would land inside an input directory (a trace): writing
/// `--ids trace/scores.npy` would silently replace the data being read.
inline void refuse_outputs_inside(const std::pair<std::string, std::string>& directory,
                                  const std::vector<std::pair<std::string, std::string>>& outputs) {
  const std::filesystem::path inside = comparable_path(directory.second);
  for (const auto& [option, path] : outputs) {
    if (comparable_path(path).parent_path() == inside) {
      throw usage_error("--" + option + " '" + path + "' is inside the --" + directory.first + " directory");
    }
  }
}

/// Refuses (exit 1), before any work, a destination that cannot take a file: a directory,
/// a device or anything else that is not a regular file (renaming over /dev/null would
/// replace the device node), or a path whose directory is missing.
inline void check_destination(const std::string& destination) {
  namespace fs = std::filesystem;
  std::error_code error;
  const auto status = fs::status(destination, error);
  if (!error && fs::exists(status) && !fs::is_regular_file(status)) {
    throw input_error(destination + ": exists and is not a regular file; not replaced");
  }
  const fs::path parent = fs::absolute(destination).parent_path();
  if (!fs::is_directory(parent, error)) {
    throw input_error(destination + ": directory " + parent.string() + " does not exist");
  }
}

class output_files {
 public:
  output_files() = default;
  output_files(const output_files&) = delete;
  output_files& operator=(const output_files&) = delete;
  ~output_files() {
    for (const auto& [temporary, destination] : staged_) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
    }
  }

  /// Writes `size` bytes for `destination` under its temporary name. Throws input_error
  /// naming the file when the destination is not a writable regular file path.
  void write(const std::string& destination, const void* data, std::size_t size) {
    check_destination(destination);
    const std::filesystem::path temporary = temporary_name(destination);
    std::FILE* file = std::fopen(temporary.c_str(), "wb");
    if (file == nullptr) throw input_error("cannot create " + destination + ": " + std::strerror(errno));
    staged_.emplace_back(temporary, destination);
    const bool written = size == 0 || std::fwrite(data, 1, size, file) == size;
    const int write_errno = errno;
    // fclose flushes: a full disk often shows only here.
    const bool closed = std::fclose(file) == 0;
    if (!written || !closed) {
      throw input_error("cannot write " + destination + ": " + std::strerror(written ? errno : write_errno));
    }
  }
  void write(const std::string& destination, const std::string& text) { write(destination, text.data(), text.size()); }

  /// Moves every written file into place. An earlier file at a destination is first moved
  /// aside, so that when one rename fails the others are undone and every destination
  /// holds what it held before.
  void commit() {
    namespace fs = std::filesystem;
    std::vector<std::pair<fs::path, fs::path>> set_aside;  // (aside, destination)
    std::error_code error;
    for (const auto& [temporary, destination] : staged_) {
      if (error || !fs::exists(destination)) continue;
      const fs::path aside = temporary.string() + "-old";
      fs::rename(destination, aside, error);
      if (!error) set_aside.emplace_back(aside, destination);
    }
    std::size_t placed = 0;
    while (!error && placed < staged_.size()) {
      fs::rename(staged_[placed].first, staged_[placed].second, error);
      if (!error) ++placed;
    }
    if (error) {
      const std::string reason = error.message();
      std::error_code ignored;
      for (std::size_t i = 0; i < placed; ++i) fs::remove(staged_[i].second, ignored);
      for (const auto& [aside, destination] : set_aside) fs::rename(aside, destination, ignored);
      throw input_error("cannot move the outputs into place (" + reason + "); the earlier files are kept");
    }
    for (const auto& [aside, destination] : set_aside) fs::remove(aside, error);
    staged_.clear();
  }

 private:
  std::vector<std::pair<std::filesystem::path, std::string>> staged_;
};

}  // namespace moe_route

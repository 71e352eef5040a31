#pragma once
// A progress bar on stderr for the trace commands, drawn only where someone watches it:
// stderr is a terminal (a log file or a pipe would collect a line per update) and the
// command has already run for a second (a shorter run ends before a bar helps; ten lines
// for a 46 ms replay were noise).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace moe_route {

using progress_clock = std::chrono::steady_clock;

/// How long a command runs before its progress is shown, and how often the bar is redrawn.
inline constexpr auto progress_delay = std::chrono::seconds(1);
inline constexpr auto progress_redraw = std::chrono::milliseconds(100);

class progress_bar {
 public:
  /// `what` labels the bar; `started` is when the command began (the delay counts from
  /// there, so a command of many short parts still gets a bar); `terminal` says whether
  /// `out` is one.
  progress_bar(std::string what, progress_clock::time_point started, std::FILE* out, bool terminal)
      : what_(std::move(what)), started_(started), out_(out), terminal_(terminal) {}

  void operator()(long long done, long long total) { update(done, total, progress_clock::now()); }

  /// Draws the bar for `done` of `total` as of `now` (separate from the clock for tests):
  /// nothing off a terminal or before the delay; then at most one redraw per interval, and
  /// the finished bar with its newline when `done` reaches `total`.
  void update(long long done, long long total, progress_clock::time_point now) {
    if (!terminal_ || now - started_ < progress_delay) return;
    const bool finished = done >= total;
    if (drawn_ && !finished && now - last_draw_ < progress_redraw) return;
    constexpr int width = 30;
    const long long whole = total > 0 ? total : 1;
    const int filled = static_cast<int>(width * std::min(done, whole) / whole);
    std::fprintf(out_, "\r%s [%s%s] %3d%%", what_.c_str(), std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), ' ').c_str(),
                 static_cast<int>(100 * std::min(done, whole) / whole));
    if (finished) std::fputc('\n', out_);
    std::fflush(out_);
    drawn_ = true;
    last_draw_ = now;
  }

 private:
  std::string what_;
  progress_clock::time_point started_;
  std::FILE* out_;
  bool terminal_;
  bool drawn_ = false;
  progress_clock::time_point last_draw_{};
};

/// A progress bar on stderr, shown only when stderr is a terminal.
inline progress_bar stderr_progress_bar(const std::string& what, progress_clock::time_point started) {
  return progress_bar(what, started, stderr, ::isatty(STDERR_FILENO) == 1);
}

}  // namespace moe_route

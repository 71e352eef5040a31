// The tool's progress bar (tools/moe-route/progress_bar.hpp): drawn only on a terminal and
// only once a command has run for a second; finished with a newline.

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

#include "progress_bar.hpp"

namespace {

/// What the bar wrote to a temporary file.
std::string written(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  return text;
}

}  // namespace

TEST_CASE("the progress bar waits a second, is drawn only on a terminal, and ends its line") {
  using namespace std::chrono_literals;
  const moe_route::progress_clock::time_point start{};
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);

  SUBCASE("on a terminal: nothing in the first second, then a bar, redrawn at most every 100 ms") {
    moe_route::progress_bar bar("replay", start, file, true);
    bar.update(5, 10, start + 900ms);
    CHECK(written(file).empty());  // a run shorter than a second shows no progress at all
    bar.update(5, 10, start + 1100ms);
    bar.update(6, 10, start + 1150ms);  // too soon to redraw
    CHECK(written(file) == "\rreplay [###############               ]  50%");
    bar.update(10, 10, start + 1160ms);  // the end is always drawn, with its newline
    CHECK(written(file) ==
          "\rreplay [###############               ]  50%\rreplay [##############################] 100%\n");
  }
  SUBCASE("elsewhere (a file, a pipe): nothing, however long the command runs") {
    moe_route::progress_bar bar("replay", start, file, false);
    for (int done = 1; done <= 10; ++done) bar.update(done, 10, start + done * 1s);
    CHECK(written(file).empty());
  }
  std::fclose(file);
}

// The CUDA test program's main: doctest's, plus one exit code of its own. Test cases that
// need a GPU are registered skipped where none is usable (tests/backends/cuda_backend_runner.cuh);
// when every case a run selected was skipped that way, the run exits with
// `all_skipped_exit_code`, which CTest reports as skipped (SKIP_RETURN_CODE in
// tests/CMakeLists.txt) rather than passed.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "backends/cuda_device.cuh"

namespace {

constexpr int all_skipped_exit_code = 77;

/// Counts the test cases a run executed (skipped cases never pass the filters).
struct executed_cases : doctest::IReporter {
  static inline unsigned executed = 0;

  explicit executed_cases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override { executed = stats.numTestCasesPassingFilters; }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("executed_cases", 1, executed_cases);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || test::cuda_device().available) return result;
  std::printf("[doctest] CUDA test cases skipped: %s\n", test::cuda_skip_reason().c_str());
  return result == 0 && executed_cases::executed == 0 ? all_skipped_exit_code : result;
}

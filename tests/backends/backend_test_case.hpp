#pragma once
// Registers one doctest test case per backend for a test body written once as a template
// over a backend runner (tests/backends/*_backend_runner.*, bodies in tests/bodies/).
// Where a runner's backend cannot run (no GPU), its cases are registered with doctest's
// skip flag, decided at registration, so doctest reports them skipped, never passed.

#include <deque>
#include <string>

#include <doctest/doctest.h>

namespace test {

/// A doctest decorator: the test case runs on `Runner`'s backend. It joins the runner's
/// test suite (none for the CPU) and is skipped where `Runner::available()` is false.
template <class Runner>
struct runs_on {
  void fill(doctest::detail::TestCase& state) const {
    if (*Runner::test_suite != '\0') state.m_test_suite = Runner::test_suite;
    state.m_skip = state.m_skip || !Runner::available();
  }
};

/// The test name on `Runner`: the CPU keeps the plain name, other backends append theirs.
/// doctest keeps the pointer, so every composed name lives until the program ends.
template <class Runner>
const char* backend_test_name(const char* name) {
  if (*Runner::test_name_suffix == '\0') return name;
  static std::deque<std::string> names;
  return names.emplace_back(std::string(name) + Runner::test_name_suffix).c_str();
}

}  // namespace test

/// One test case named `name` (plus the runner's suffix) whose body is the statement after
/// it, on `Runner`'s backend. Each header in tests/bodies/ lists its cases this way in one
/// macro taking the runner, e.g. MOE_ROUTING_INVARIANT_TESTS(test::cpu_backend_runner).
#define MOE_ROUTING_BACKEND_TEST_CASE(Runner, name, ...) \
  TEST_CASE(::test::backend_test_name<Runner>(name) * ::test::runs_on<Runner>{}) { __VA_ARGS__; }

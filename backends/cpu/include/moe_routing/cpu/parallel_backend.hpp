#pragma once
/// \file
/// What runs the CPU backend's parallel loops (`std::execution::par`: the executor's work items,
/// the routing chunks). libstdc++ hands them to TBB when it finds TBB's headers at compile time
/// and otherwise runs them on the calling thread without a word, so a build that lacks TBB
/// routes and executes on one core: on a 2-core Zen 5 the executor's layers then took about
/// twice as long, with nothing in the benchmark's report to say why
/// (docs/benchmarks/executor_zen5.md). `kernel_report()` names the backend for that reason.

#include <execution>

namespace moe_routing::cpu {

/// "TBB" or "serial" as libstdc++ chose at compile time; "the standard library's" where the
/// library does not say (libc++, MSVC).
constexpr const char* parallel_backend_name() noexcept {
#if defined(_PSTL_PAR_BACKEND_TBB)
  return "TBB";
#elif defined(_PSTL_PAR_BACKEND_SERIAL)
  return "serial";
#else
  return "the standard library's";
#endif
}

}  // namespace moe_routing::cpu

// A program whose first choice of the scoring path (`choose_score_row_path`) is made while
// rounding upward, then again rounding to nearest (tests/CMakeLists.txt). The vector exps match
// glibc's only when rounding to nearest, and whether they do is checked once per process. Before
// 35b436a that check ran first, in the caller's mode: under a directed mode it failed, and the
// vector exps stayed off for the rest of the process. It needs a process of its own, since the
// check's answer is kept. Exit 0: both choices right; 1: not; 77 (reported skipped): no AVX2
// here (or MOE_ROUTING_CPU_ISA caps it), this C library's expf is not the one the vector exp
// reproduces, or the check passes rounding upward too (then the old order did no harm, and
// this program could not tell it from the new).

#include <cfenv>
#include <cstdio>

#include <moe_routing/cpu/score_row_path.hpp>

int main() {
  namespace cpu = moe_routing::cpu;
#if MOE_ROUTING_X86_KERNELS
  if (!cpu::cpu_runs(cpu::isa_level::avx2)) {
    std::puts("skipped: no AVX2 here (or MOE_ROUTING_CPU_ISA caps it)");
    return 77;  // CTest's SKIP_RETURN_CODE
  }
  if (std::fesetround(FE_UPWARD) != 0) {
    std::puts("fesetround(FE_UPWARD) failed");
    return 1;
  }
  const cpu::detail::score_row_path upward = cpu::detail::choose_score_row_path();
  const bool check_passes_upward = cpu::detail::exp_matches_library_on_samples();  // not the kept answer
  std::fesetround(FE_TONEAREST);
  const cpu::detail::score_row_path nearest = cpu::detail::choose_score_row_path();
  // Asked only now, rounding to nearest: whether this C library's expf is the one reproduced.
  if (!cpu::detail::exp_matches_library_on_samples()) {
    std::puts("skipped: this C library's expf is not the one the vector exp reproduces");
    return 77;
  }
  if (upward.vector_exp) {
    std::puts("rounding upward, the vector exps were chosen (glibc's overflow follows the mode)");
    return 1;
  }
  if (check_passes_upward) {
    std::puts("skipped: the check passes rounding upward too, so the first choice's mode does no harm here");
    return 77;
  }
  if (!nearest.vector_exp) {
    std::puts("the first choice, made rounding upward, left the vector exps off for the process");
    return 1;
  }
  std::puts("ok");
  return 0;
#else
  std::puts("skipped: the vector exps are built on x86-64 only");
  return 77;
#endif
}

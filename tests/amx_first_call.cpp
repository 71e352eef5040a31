// A program whose first act is one AMX projection, built at -O2 (tests/CMakeLists.txt).
// GCC 12's _tile_loadconfig declares that LDTILECFG reads 8 bytes, so in code shaped like
// this -O2 dropped the stores of the rest of the tile configuration and the call faulted;
// the executor tests, at -O3 and with other calls around, never saw it. Exit 0: the sums
// are right; a crash or 1: they are not; 77 (reported skipped): the tiles cannot run here.

#include <cstdio>
#include <vector>

#include <moe_routing/cpu/executor/amx_projection.hpp>

int main() {
  namespace mr = moe_routing;
#if MOE_ROUTING_HAS_AMX
  if (!mr::cpu::amx::available()) {
    std::puts("skipped: this CPU has no AMX, or the OS does not grant this process tile data");
    return 77;  // CTest's SKIP_RETURN_CODE (tests/CMakeLists.txt)
  }
  const mr::bfloat16 one{0x3f80};
  std::vector<mr::bfloat16> w(32 * 64, one), packed(16 * 64, one);
  std::vector<float> out(16 * 32);
  mr::cpu::amx::project_rows(w.data(), 32, 0, 32, 64, packed.data(), 1, out.data(), 32);
  for (int r = 0; r < 32; ++r) {
    if (out[static_cast<std::size_t>(r)] != 64.0f) {  // 64 columns of 1 x 1
      std::printf("row %d: %g, expected 64\n", r, static_cast<double>(out[static_cast<std::size_t>(r)]));
      return 1;
    }
  }
  std::puts("ok");
  return 0;
#else
  std::puts("skipped: the AMX kernels are built on x86-64 Linux only");
  return 77;
#endif
}

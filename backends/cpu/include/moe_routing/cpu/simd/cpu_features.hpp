#pragma once
/// \file
/// What this CPU (and its OS) can run, asked once per process, so that one binary built
/// without `-march` takes the fastest kernels the machine has. The vector kernels are
/// compiled for their instruction sets with per-function target attributes
/// (`isa_targets.hpp`); every call site picks one with these flags.
///
/// `MOE_ROUTING_CPU_ISA` (environment, read once) caps what is reported, so every slower
/// path can be run and tested on a machine that has a faster one: `portable`, `avx2`,
/// `avx512`, `avx512_bf16` or `amx` (the default: all the CPU has). An unknown value stops
/// the program with a message naming it, rather than silently running another kernel.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "moe_routing/cpu/simd/isa_targets.hpp"

#if MOE_ROUTING_X86_KERNELS
#include <cpuid.h>
#endif

namespace moe_routing::cpu {

/// Instruction-set levels, each including the ones before it (as the kernels use them).
enum class isa_level : int {
  portable = 0,     ///< plain C++ loops, whatever the build targets
  avx2 = 1,         ///< AVX2, FMA, F16C, BMI1, BMI2, POPCNT
  avx512 = 2,       ///< AVX-512 F, BW, VL, DQ
  avx512_bf16 = 3,  ///< and AVX512_BF16 (vdpbf16ps)
  amx = 4,          ///< and AMX-TILE, AMX-BF16 with the OS saving the tile state (the executor asks
                    ///< Linux for the tile data on first use: `amx::available()`)
};

inline const char* name_of(isa_level level) noexcept {
  switch (level) {
    case isa_level::avx2:
      return "avx2";
    case isa_level::avx512:
      return "avx512";
    case isa_level::avx512_bf16:
      return "avx512_bf16";
    case isa_level::amx:
      return "amx";
    default:
      return "portable";
  }
}

namespace detail {

#if MOE_ROUTING_X86_KERNELS
/// Register state the OS saves (XCR0), read with XGETBV; only called once OSXSAVE is seen.
MOE_ROUTING_TARGET_XSAVE inline unsigned long long enabled_state() noexcept { return _xgetbv(0); }

/// The highest level this CPU and OS run, from CPUID and XCR0.
inline isa_level detect_isa() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return isa_level::portable;
  const bool fma = (c >> 12) & 1, popcnt = (c >> 23) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1,
             f16c = (c >> 29) & 1;
  if (!(osxsave && avx && fma && f16c && popcnt)) return isa_level::portable;
  const unsigned long long xcr0 = enabled_state();
  if ((xcr0 & 0x6) != 0x6) return isa_level::portable;  // SSE and AVX state
  unsigned b7 = 0, c7 = 0, d7 = 0;
  unsigned max_subleaf = 0;
  if (__get_cpuid_count(7, 0, &max_subleaf, &b7, &c7, &d7) == 0) return isa_level::portable;
  if (!((b7 >> 5) & 1) || !((b7 >> 3) & 1) || !((b7 >> 8) & 1)) return isa_level::portable;          // AVX2, BMI1, BMI2
  const bool avx512 = ((b7 >> 16) & 1) && ((b7 >> 17) & 1) && ((b7 >> 30) & 1) && ((b7 >> 31) & 1);  // F DQ BW VL
  if (!avx512 || (xcr0 & 0xe0) != 0xe0) return isa_level::avx2;  // opmask and ZMM state
  unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;
  if (max_subleaf < 1 || __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71) == 0) return isa_level::avx512;
  if (!((a71 >> 5) & 1)) return isa_level::avx512;        // AVX512_BF16
  const bool amx = ((d7 >> 22) & 1) && ((d7 >> 24) & 1);  // AMX-BF16, AMX-TILE
  // Linux must also grant the tile data; the executor asks when it would first use the tiles
  // (`amx::available()`), not here: the grant enlarges every signal frame of the process.
  if (!amx || (xcr0 & 0x60000) != 0x60000) return isa_level::avx512_bf16;
  return isa_level::amx;
}
#else
inline isa_level detect_isa() noexcept { return isa_level::portable; }
#endif

/// The level `MOE_ROUTING_CPU_ISA` caps to (`amx`, the highest, when unset).
inline isa_level isa_cap() {
  const char* text = std::getenv("MOE_ROUTING_CPU_ISA");
  if (text == nullptr || *text == '\0') return isa_level::amx;
  for (int level = 0; level <= static_cast<int>(isa_level::amx); ++level) {
    if (std::strcmp(text, name_of(static_cast<isa_level>(level))) == 0) return static_cast<isa_level>(level);
  }
  std::fprintf(stderr,
               "moe_routing: MOE_ROUTING_CPU_ISA = \"%s\": must be one of portable, avx2, avx512, avx512_bf16, amx\n",
               text);
  std::abort();
}

}  // namespace detail

/// The highest instruction-set level the kernels may use here: what the CPU and OS run,
/// capped by `MOE_ROUTING_CPU_ISA`. Worked out on the first call (thread-safe), then a load.
inline isa_level cpu_isa() {
  static const isa_level level = [] {
    const isa_level detected = detail::detect_isa(), cap = detail::isa_cap();
    return static_cast<int>(cap) < static_cast<int>(detected) ? cap : detected;
  }();
  return level;
}

/// Whether the kernels may use `level` here.
inline bool cpu_runs(isa_level level) { return static_cast<int>(cpu_isa()) >= static_cast<int>(level); }

namespace detail {

/// Whether CPUID names AMD as the vendor, and the CPU's family (base plus extended, as AMD and
/// Intel both number it): what the executor's per-CPU tuning tells CPUs apart by.
struct vendor_family {
  bool amd = false;
  int family = 0;
};

#if MOE_ROUTING_X86_KERNELS
inline vendor_family cpu_vendor_family() noexcept {
  unsigned top = 0, b = 0, c = 0, d = 0;
  vendor_family cpu;
  if (__get_cpuid(0, &top, &b, &c, &d) == 0) return cpu;
  cpu.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
  unsigned a = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return cpu;
  const int base = static_cast<int>((a >> 8) & 0xf), extended = static_cast<int>((a >> 20) & 0xff);
  cpu.family = base == 0xf ? base + extended : base;
  return cpu;
}
#else
inline vendor_family cpu_vendor_family() noexcept { return {}; }
#endif

/// Whether a CPU is Zen 4: AMD's family 25 (19h) with AVX-512 (Zen 3, the same family, has no
/// AVX-512). The executor's tuning differs there (`stream_cache.hpp`, `sweep_order.hpp`).
constexpr bool is_zen4(bool amd, int family, bool avx512) noexcept { return amd && family == 25 && avx512; }

}  // namespace detail

/// Whether this machine's CPU is Zen 4 (`detail::is_zen4`), by what the CPU itself runs, not
/// what `MOE_ROUTING_CPU_ISA` caps: a forced kernel is tuned as the default kernel of the same
/// CPU is. Worked out on the first call (thread-safe), then a load.
inline bool runs_on_zen4() {
  static const detail::vendor_family cpu = detail::cpu_vendor_family();
  static const bool zen4 = detail::is_zen4(
      cpu.amd, cpu.family, static_cast<int>(detail::detect_isa()) >= static_cast<int>(isa_level::avx512));
  return zen4;
}

}  // namespace moe_routing::cpu

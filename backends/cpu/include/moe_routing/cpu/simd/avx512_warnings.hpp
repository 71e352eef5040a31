#pragma once
/// \file
/// GCC 12 flags the `_mm512_undefined_*` placeholders inside its own AVX-512 intrinsics as
/// uninitialised once they are inlined into our code (fixed in GCC 13). A header whose
/// AVX-512 code triggers it wraps that code in these two macros, silencing those two
/// warnings there and nowhere else.

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#define MOE_ROUTING_AVX512_WARNINGS_OFF                                                \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define MOE_ROUTING_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define MOE_ROUTING_AVX512_WARNINGS_OFF
#define MOE_ROUTING_AVX512_WARNINGS_ON
#endif

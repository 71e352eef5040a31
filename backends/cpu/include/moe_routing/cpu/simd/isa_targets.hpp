#pragma once
/// \file
/// Per-function target attributes for the vector kernels, so that each is compiled for its
/// instruction set whatever `-march` the consumer builds with (none, typically), and chosen
/// at run time (`cpu_features.hpp`).
///
/// `MOE_ROUTING_X86_KERNELS` is 1 where the compiler understands the attributes (GCC or
/// Clang on x86-64, nvcc's host code included) and 0 elsewhere. It must be the same in every
/// translation unit of a program (the inline functions that dispatch differ with it): define
/// `MOE_ROUTING_PORTABLE_ONLY` everywhere or nowhere.
///
/// A function marked with one of these can call unmarked functions and functions of a lower or
/// equal target; an unmarked function is compiled for the marked function's target only where
/// it is inlined into it (which `always_inline` makes sure of), and is otherwise one copy for
/// the build's target. Calling a marked function from an unmarked one is a call, never
/// inlined (the caller dispatches on `cpu_isa()` first).
///
/// The kernels also use `MOE_ROUTING_UNROLL` (`core/config.hpp`).

#include "moe_routing/core/config.hpp"

#if (defined(__x86_64__) || defined(__amd64__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(MOE_ROUTING_PORTABLE_ONLY)
#define MOE_ROUTING_X86_KERNELS 1
#include <immintrin.h>

#define MOE_ROUTING_ISA_AVX2 "avx2,fma,f16c,bmi,bmi2,popcnt"
#define MOE_ROUTING_ISA_AVX512 MOE_ROUTING_ISA_AVX2 ",avx512f,avx512bw,avx512vl,avx512dq"
#define MOE_ROUTING_TARGET_XSAVE __attribute__((target("xsave")))
#define MOE_ROUTING_TARGET_POPCNT __attribute__((target("popcnt")))
#define MOE_ROUTING_TARGET_AVX2 __attribute__((target(MOE_ROUTING_ISA_AVX2)))
#define MOE_ROUTING_TARGET_AVX512 __attribute__((target(MOE_ROUTING_ISA_AVX512)))
#define MOE_ROUTING_TARGET_AVX512_BF16 __attribute__((target(MOE_ROUTING_ISA_AVX512 ",avx512bf16")))
#define MOE_ROUTING_TARGET_AMX __attribute__((target(MOE_ROUTING_ISA_AVX512 ",avx512bf16,amx-tile,amx-bf16")))
#else
#define MOE_ROUTING_X86_KERNELS 0
#endif

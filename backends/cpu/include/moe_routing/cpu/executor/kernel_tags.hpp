#pragma once
/// \file
/// The executor's projection kernels named by tag types. A call picks its kernel once
/// (`expert_projection.hpp`) and overload resolution on the tag routes every projection of
/// that call to it, so what the build or the CPU supports is decided in one place instead of
/// at each use.
///   - `portable_kernel`: plain loops the compiler maps onto whatever SIMD the build targets;
///   - `avx512_kernel`: AVX-512 intrinsics (builds targeting AVX-512F only);
///   - `amx_kernel`: Intel AMX tiles for bfloat16 weights with bfloat16 activations (builds
///     targeting AMX on Linux, and only when the OS grants the tile state at run time).

#include <concepts>

namespace moe_routing::cpu {

struct portable_kernel {};
struct avx512_kernel {};
struct amx_kernel {};

/// The build's kernel for projections that do not run on tiles.
#if defined(__AVX512F__)
using vector_kernel = avx512_kernel;
#else
using vector_kernel = portable_kernel;
#endif

/// A kernel that takes float activations row by row (not a tile-packed copy).
template <class Kernel>
concept row_kernel = std::same_as<Kernel, portable_kernel> || std::same_as<Kernel, avx512_kernel>;

static_assert(row_kernel<vector_kernel>);
static_assert(!row_kernel<amx_kernel>);

}  // namespace moe_routing::cpu

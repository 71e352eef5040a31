#pragma once
/// \file
/// CUDA runtime errors as the library's `status`: the parameter names the failing call,
/// the value is the cudaError_t, the requirement is CUDA's own description.

#include <cuda_runtime.h>

#include "moe_routing/core/status.hpp"

namespace moe_routing::cuda {

inline status cuda_status(cudaError_t code, const char* call) noexcept {
  if (code == cudaSuccess) return {};
  return fail(errc::device_error, call, static_cast<double>(code), cudaGetErrorString(code));
}

/// Returns from the enclosing status-returning function when a CUDA call fails.
#define MOE_ROUTING_CUDA_TRY(call) MOE_ROUTING_TRY(::moe_routing::cuda::cuda_status((call), #call))

/// Whether a CUDA device can run kernels here, and if not why (for tests that skip).
struct device_probe {
  bool available = false;
  const char* reason = "";
};

inline device_probe probe_device() noexcept {
  int count = 0;
  const cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess) return {false, cudaGetErrorString(code)};
  if (count == 0) return {false, "no CUDA device found"};
  return {true, ""};
}

}  // namespace moe_routing::cuda

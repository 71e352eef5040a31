#pragma once
// Whether CUDA kernels can run on this machine, probed once for the whole test program.

#include <string>

#include <moe_routing/cuda/cuda_status.cuh>

namespace test {

inline const moe_routing::cuda::device_probe& cuda_device() {
  static const moe_routing::cuda::device_probe probe = moe_routing::cuda::probe_device();
  return probe;
}

/// Why CUDA test cases are skipped here, in the words the test output uses.
inline std::string cuda_skip_reason() { return std::string("no usable GPU (") + cuda_device().reason + ")"; }

}  // namespace test

#pragma once
// An owning device array for the CUDA tests: a copy of a host vector, or `count`
// elements to be written by the device and copied back.

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

namespace test {

inline void require_cuda(cudaError_t code, const char* call) {
  REQUIRE_MESSAGE(code == cudaSuccess, call << ": " << cudaGetErrorString(code));
}

template <class T>
class device_array {
 public:
  device_array() = default;
  explicit device_array(std::size_t count) : count_(count) {
    // One element at least: a null pointer would read as "not given" to the library.
    require_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), (count > 0 ? count : 1) * sizeof(T)), "cudaMalloc");
  }
  explicit device_array(const std::vector<T>& host) : device_array(host.size()) { upload(host); }
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  device_array& operator=(device_array&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  ~device_array() {
    if (data_ != nullptr) cudaFree(data_);
  }

  T* get() const { return data_; }
  std::size_t size() const { return count_; }

  /// Overwrites the first host.size() elements.
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() <= count_);
    if (!host.empty()) {
      require_cuda(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
  }
  /// Copies every element to `host` (synchronous: waits for the work before it).
  void copy_to(T* host) const {
    if (count_ > 0) require_cuda(cudaMemcpy(host, data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace test

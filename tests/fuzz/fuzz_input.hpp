#pragma once
// Reads fuzzer bytes as a stream of small decisions; past the end it yields zeros, so
// every input decodes to some problem.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fuzz {

class byte_stream {
 public:
  byte_stream(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint8_t u8() { return position_ < size_ ? data_[position_++] : 0; }
  std::uint16_t u16() {  // low byte first: the seed corpora were written in this order
    const std::uint16_t low = u8();
    const std::uint16_t high = u8();
    return static_cast<std::uint16_t>(low | (high << 8));
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(u16()) | (static_cast<std::uint32_t>(u16()) << 16); }
  /// An integer in [lo, hi].
  int in(int lo, int hi) { return lo + static_cast<int>(u16() % static_cast<unsigned>(hi - lo + 1)); }
  bool flag() { return (u8() & 1) != 0; }
  std::size_t remaining() const { return size_ - position_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

}  // namespace fuzz

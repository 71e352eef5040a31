// Fuzzes the .npy reader: any bytes are either parsed into an array whose payload
// matches its shape and dtype, or refused with npy_error; never a crash or overread.

#include <cstdio>
#include <cstdlib>

#include <moe_routing/io/npy.hpp>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  namespace npy = moe_routing::npy;
  try {
    const npy::array a = npy::parse(data, size, "fuzz.npy");
    if (a.bytes.size() != a.size() * npy::item_size(a.type)) {
      std::fprintf(stderr, "npy_fuzzer: payload size disagrees with the shape\n");
      std::abort();
    }
    // What we read, we can write and read back identically.
    const auto again = npy::serialize(a.type, a.shape, a.bytes.data());
    const npy::array b = npy::parse(again.data(), again.size(), "round trip");
    if (b.shape != a.shape || b.type != a.type || b.bytes != a.bytes) {
      std::fprintf(stderr, "npy_fuzzer: round trip changed the array\n");
      std::abort();
    }
  } catch (const npy::npy_error&) {}
  return 0;
}

// The .npy reader and writer: round trips of every dtype and shape, and a table of
// corrupted files, each rejected with a message that says what is wrong.

#include <moe_routing/io/npy.hpp>

#include "plan_checks.hpp"

namespace {
namespace npy = moe_routing::npy;

std::vector<unsigned char> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

/// A version-1 file with an arbitrary header text and payload size.
std::vector<unsigned char> handmade(const std::string& header, std::size_t payload) {
  std::vector<unsigned char> out(10 + header.size() + payload, 0);
  const unsigned char preamble[10] = {0x93,
                                      'N',
                                      'U',
                                      'M',
                                      'P',
                                      'Y',
                                      1,
                                      0,
                                      static_cast<unsigned char>(header.size() & 0xff),
                                      static_cast<unsigned char>(header.size() >> 8)};
  std::memcpy(out.data(), preamble, 10);
  std::memcpy(out.data() + 10, header.data(), header.size());
  return out;
}
}  // namespace

TEST_CASE("every dtype and shape round-trips") {
  const std::vector<std::vector<std::size_t>> shapes = {{}, {0}, {5}, {3, 4}, {2, 3, 4}, {1, 1, 7}};
  for (const npy::dtype type : {npy::dtype::float32, npy::dtype::float16, npy::dtype::int32, npy::dtype::int64,
                                npy::dtype::boolean, npy::dtype::uint8}) {
    for (const auto& shape : shapes) {
      std::size_t count = 1;
      for (auto s : shape) count *= s;
      std::vector<unsigned char> payload(count * npy::item_size(type));
      for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<unsigned char>(i * 31 + 7);
      const auto file = npy::serialize(type, shape, payload.data());
      REQUIRE((file.size() - payload.size()) % 64 == 0);  // numpy aligns the header
      const npy::array back = npy::parse(file.data(), file.size(), "memory");
      CHECK(back.type == type);
      CHECK(back.shape == shape);
      CHECK(back.bytes == payload);
    }
  }
}

TEST_CASE("a file numpy.save wrote (bytes taken from numpy 1.26) reads back") {
  // np.save(f, np.array([[1.5, -2.0]], dtype=np.float32))
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  auto file = handmade(header, 8);
  const float values[] = {1.5f, -2.0f};
  std::memcpy(file.data() + file.size() - 8, values, 8);
  const npy::array a = npy::parse(file.data(), file.size(), "x.npy");
  REQUIRE(a.shape == std::vector<std::size_t>{1, 2});
  CHECK(a.data<float>()[0] == 1.5f);
  CHECK(a.data<float>()[1] == -2.0f);
}

TEST_CASE("corrupted files are rejected with a clear message") {
  struct corrupted {
    const char* what;
    std::vector<unsigned char> file;
    const char* message;
  };
  const std::vector<corrupted> table = {
      {"empty", {}, "not a .npy file"},
      {"bad magic", bytes_of("PK\x03\x04 not numpy at all"), "not a .npy file"},
      {"version 9", {0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 0, 0}, "unsupported .npy format version 9"},
      {"header longer than file", {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0x00, '{'}, "truncated header"},
      {"truncated data", handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }\n", 60),
       "truncated data: shape needs 64 bytes, file holds 60"},
      {"wrong dtype", handmade("{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }\n", 32),
       "unsupported dtype '<c16'"},
      {"big endian", handmade("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 8),
       "unsupported dtype '>f4'"},
      {"fortran order", handmade("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 16), "Fortran-order"},
      {"no shape", handmade("{'descr': '<f4', 'fortran_order': False, }\n", 4), "no 'shape' entry"},
      {"garbage shape", handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }\n", 8),
       "malformed shape"},
      {"unclosed shape", handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2", 8), "malformed shape"},
  };
  for (const auto& c : table) {
    CAPTURE(c.what);
    try {
      (void)npy::parse(c.file.data(), c.file.size(), "bad.npy");
      FAIL("accepted a corrupted file");
    } catch (const npy::npy_error& error) {
      CHECK(std::string(error.what()).find(c.message) != std::string::npos);
      CHECK(std::string(error.what()).rfind("bad.npy: ", 0) == 0);
    }
  }
  CHECK_THROWS_WITH_AS(npy::read("/nonexistent/file.npy"), "/nonexistent/file.npy: cannot open file", npy::npy_error);
}

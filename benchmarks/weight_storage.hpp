#pragma once
// Memory for the benchmarks' expert weights, in the pages an engine would give them: the
// system's default, or transparent huge pages (2 MiB on x86-64) asked for with
// madvise(MADV_HUGEPAGE) before the first write. Whether the kernel grants them is the
// system's setting (/sys/kernel/mm/transparent_hugepage/enabled: "madvise" or "always"
// grant them, "never" does not; "always" may also give them to the default request), so
// `huge_page_fraction` reads back what the process actually holds, and the benchmarks report
// it beside every figure.
//
// Why it might matter to the executor: it reads four weight rows at a time, and a gate or up
// row is 4 KiB at d = 2048 in bfloat16, so each of them is a new 4 KiB page and TLB entry; in
// 2 MiB pages an expert's 9 MiB are five entries. (On Zen 5 it made no consistent difference:
// docs/benchmarks/executor_zen5.md.)

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <moe_routing/core/half.hpp>

namespace bench {

/// Which pages the weights live in.
enum class page_size { system_default, huge };

/// `count` bfloat16 values, uninitialised, aligned to 2 MiB (so a huge page can back every
/// part of it), advised into huge pages when `pages` is `page_size::huge`.
class weight_storage {
 public:
  weight_storage(std::size_t count, page_size pages) {
    constexpr std::size_t huge_page = std::size_t{2} << 20;
    bytes_ = (count * sizeof(moe_routing::bfloat16) + huge_page - 1) / huge_page * huge_page;
    data_ = static_cast<moe_routing::bfloat16*>(std::aligned_alloc(huge_page, bytes_));
    if (data_ == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    if (pages == page_size::huge && madvise(data_, bytes_, MADV_HUGEPAGE) != 0) {
      std::perror("weight_storage: madvise(MADV_HUGEPAGE)");  // default pages then; the fraction says so
    }
#else
    (void)pages;
#endif
  }
  ~weight_storage() { std::free(data_); }
  weight_storage(const weight_storage&) = delete;
  weight_storage& operator=(const weight_storage&) = delete;

  moe_routing::bfloat16* data() { return data_; }
  moe_routing::bfloat16& operator[](std::size_t i) { return data_[i]; }

  /// The share of this memory in huge pages now, from the AnonHugePages of the mappings that
  /// hold it in /proc/self/smaps (0 where that file does not exist). The kernel may merge this
  /// block's mapping with its neighbours, so each mapping's huge pages count in proportion to
  /// its overlap with the block (exact when a mapping is all huge or all not).
  double huge_page_fraction() const {
    std::ifstream smaps("/proc/self/smaps");
    const auto begin = reinterpret_cast<std::uintptr_t>(data_), end = begin + bytes_;
    double overlap_share = 0, huge_bytes = 0;
    for (std::string line; std::getline(smaps, line);) {
      std::uintptr_t low = 0, high = 0;
      char dash = 0;
      std::istringstream fields(line);
      if (fields >> std::hex >> low >> dash >> high && dash == '-' && high > low) {  // a mapping's first line
        const std::uintptr_t overlap_begin = std::max(low, begin), overlap_end = std::min(high, end);
        overlap_share = overlap_end > overlap_begin
                            ? static_cast<double>(overlap_end - overlap_begin) / static_cast<double>(high - low)
                            : 0.0;
      } else if (overlap_share > 0 && line.rfind("AnonHugePages:", 0) == 0) {
        huge_bytes += overlap_share * std::stod(line.substr(line.find(':') + 1)) * 1024;  // in kB
      }
    }
    return huge_bytes / static_cast<double>(bytes_);
  }

 private:
  std::size_t bytes_ = 0;
  moe_routing::bfloat16* data_ = nullptr;
};

}  // namespace bench

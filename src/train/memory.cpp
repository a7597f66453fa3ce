#include "train/memory.hpp"

#include <unistd.h>

#include <fstream>

#include "bitgrad/error.hpp"
#include "io/format.hpp"

namespace bitgrad::train {

double available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 0.0;
}

void require_memory(double bytes, const std::string& what, const std::string& detail) {
  const double have = available_memory_bytes(), gib = 1024.0 * 1024.0 * 1024.0;
  if (have > 0 && bytes > have)
    throw Error(io::strprintf("%s needs about %.3g GiB of memory (%s), more than the %.3g GiB available", what.c_str(), bytes / gib,
                              detail.c_str(), have / gib));
}

}  // namespace bitgrad::train

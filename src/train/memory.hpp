// Memory a run will need, checked before it is taken: a configuration that asks for terabytes
// gets an error with the size, not a bad_alloc after the run directory exists.
#pragma once

#include <string>

namespace bitgrad::train {

// MemAvailable of /proc/meminfo in bytes, else the physical memory, else 0 (unknown).
double available_memory_bytes();
// Throws "WHAT needs about X GiB of memory (DETAIL), more than the Y GiB available" when
// `bytes` exceeds what is available.
void require_memory(double bytes, const std::string& what, const std::string& detail);

}  // namespace bitgrad::train

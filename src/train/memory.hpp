// Memory a run will need, checked before it is taken: a configuration that asks for terabytes
// gets an error with the size, not a bad_alloc after the run directory exists.
#pragma once

#include <string>

#include "bitgrad/train.hpp"

namespace bitgrad::train {

// MemAvailable of /proc/meminfo in bytes, else the physical memory, else 0 (unknown).
double available_memory_bytes();
// Throws "WHAT needs about X GiB of memory (DETAIL), more than the Y GiB available" when
// `bytes` exceeds what is available.
void require_memory(double bytes, const std::string& what, const std::string& detail);
// What a session of `c` holds at its peak, roughly (the sample order, parameters with their
// gradients and optimizer state, a batch's activations, the batches the loader holds ahead),
// refused up front when the machine lacks it: `samples = 1e12` would otherwise allocate until it
// fails, after the run directory exists.
void check_run_memory(const Config& c, const data::Dataset& train, const data::Dataset* test, const nn::Sequential& model, int workers);

}  // namespace bitgrad::train

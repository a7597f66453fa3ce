// Data parallel over MPI (docs/distributed.md): `mpirun -n P bitgrad train CONFIG`, or
// train::run / instruments::train called on every rank of an mpirun job, trains with P ranks
// and gives the bits of one process (contract T6). MPI starts on the first call below when the
// process was launched by mpirun; otherwise there is one rank and nothing starts.
#pragma once

#include <string>

#include "bitgrad/error.hpp"

namespace bitgrad::dist {

// An error every rank raises alike (a refused start-up, a replica mismatch): rank 0 reports it
// once, and every rank exits 2.
struct CollectiveError : Error {
  using Error::Error;
};

bool launched_by_mpirun();  // from the environment mpirun sets; starts nothing
int world_size();
int world_rank();
std::string host_name();
// Ends the whole job with this exit code (MPI_Abort) when there are several ranks; returns
// otherwise. For an error one rank met alone: the others would wait for it in vain.
void abort_job(int code);
// MPI_Finalize, once; a no-op without MPI.
void finalize();

}  // namespace bitgrad::dist

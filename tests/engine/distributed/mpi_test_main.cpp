// mpi_test_main.cpp: GoogleTest main for tests run under `mpirun -np N`: every rank
// runs every test; the process exits non-zero on every rank if any rank failed, so
// mpirun (and CTest) report the failure.
#include "engine/distributed/communicator.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ember::distributed::ensure_mpi_initialized();
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "a rank other than 0 failed (see its output)\n");
    return any_failed;
}

// launcher.h: who this process is in a job, read from the launcher's environment.
// mpirun (Open MPI) sets OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK; Slurm's srun sets
// SLURM_PROCID/NTASKS/LOCALID; MPICH/Hydra and Intel MPI set PMI_RANK/PMI_SIZE (and
// MPI_LOCALRANKID). A process started by none of them is rank 0 of 1.
#pragma once

#include <string>

namespace ember::distributed {

struct LaunchEnvironment {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;             // rank among the processes of this node: picks the GPU
    std::string launcher = "none";  // "openmpi", "slurm", "pmi" or "none"
    bool distributed() const { return world_size > 1; }
};

// Reads the environment. Throws std::runtime_error naming the variable when a value
// is not a number or the rank lies outside the world size.
LaunchEnvironment detect_launch_environment();

}  // namespace ember::distributed

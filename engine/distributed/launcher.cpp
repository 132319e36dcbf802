// launcher.cpp: launcher detection from environment variables (launcher.h).
#include "engine/distributed/launcher.h"

#include <cstdlib>
#include <stdexcept>

namespace ember::distributed {

namespace {
// The variable's integer value, or `fallback` when it is not set.
int integer_from_environment(const char* name, int fallback) {
    const char* text = std::getenv(name);
    if (!text || !*text) return fallback;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 0)
        throw std::runtime_error(std::string("launcher: environment variable ") + name + "='" + text +
                                 "' is not a non-negative integer");
    return static_cast<int>(value);
}

bool is_set(const char* name) {
    const char* text = std::getenv(name);
    return text && *text;
}
}  // namespace

LaunchEnvironment detect_launch_environment() {
    LaunchEnvironment environment;
    // Open MPI first: under `srun --mpi=pmix` Slurm's variables are set as well and agree.
    if (is_set("OMPI_COMM_WORLD_RANK")) {
        environment.launcher = "openmpi";
        environment.rank = integer_from_environment("OMPI_COMM_WORLD_RANK", 0);
        environment.world_size = integer_from_environment("OMPI_COMM_WORLD_SIZE", 1);
        environment.local_rank = integer_from_environment("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    } else if (is_set("SLURM_PROCID") && is_set("SLURM_NTASKS")) {
        environment.launcher = "slurm";
        environment.rank = integer_from_environment("SLURM_PROCID", 0);
        environment.world_size = integer_from_environment("SLURM_NTASKS", 1);
        environment.local_rank = integer_from_environment("SLURM_LOCALID", 0);
    } else if (is_set("PMI_RANK")) {
        environment.launcher = "pmi";
        environment.rank = integer_from_environment("PMI_RANK", 0);
        environment.world_size = integer_from_environment("PMI_SIZE", 1);
        environment.local_rank = integer_from_environment("MPI_LOCALRANKID", 0);
    }
    if (environment.world_size < 1 || environment.rank >= environment.world_size)
        throw std::runtime_error("launcher (" + environment.launcher + "): rank " + std::to_string(environment.rank) +
                                 " outside world size " + std::to_string(environment.world_size));
    return environment;
}

}  // namespace ember::distributed

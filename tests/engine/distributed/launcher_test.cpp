// launcher_test.cpp: rank, world size and local rank from each launcher's environment
// variables (Open MPI, Slurm, PMI), and ZeRO-1 shard boundaries.
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ember::distributed {
namespace {

const char* kAllVariables[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                               "SLURM_PROCID",         "SLURM_NTASKS",         "SLURM_LOCALID",
                               "PMI_RANK",             "PMI_SIZE",             "MPI_LOCALRANKID"};

void clear_launcher_environment() {
    for (const char* name : kAllVariables) unsetenv(name);
}

TEST(Launcher, NoLauncherIsRankZeroOfOne) {
    clear_launcher_environment();
    LaunchEnvironment environment = detect_launch_environment();
    EXPECT_EQ(environment.launcher, "none");
    EXPECT_EQ(environment.rank, 0);
    EXPECT_EQ(environment.world_size, 1);
    EXPECT_FALSE(environment.distributed());
}

TEST(Launcher, OpenMpi) {
    clear_launcher_environment();
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    LaunchEnvironment environment = detect_launch_environment();
    EXPECT_EQ(environment.launcher, "openmpi");
    EXPECT_EQ(environment.rank, 5);
    EXPECT_EQ(environment.world_size, 8);
    EXPECT_EQ(environment.local_rank, 1);
    clear_launcher_environment();
}

TEST(Launcher, Slurm) {
    clear_launcher_environment();
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_LOCALID", "3", 1);
    LaunchEnvironment environment = detect_launch_environment();
    EXPECT_EQ(environment.launcher, "slurm");
    EXPECT_EQ(environment.rank, 3);
    EXPECT_EQ(environment.world_size, 4);
    EXPECT_EQ(environment.local_rank, 3);
    clear_launcher_environment();
}

TEST(Launcher, Pmi) {
    clear_launcher_environment();
    setenv("PMI_RANK", "2", 1);
    setenv("PMI_SIZE", "3", 1);
    LaunchEnvironment environment = detect_launch_environment();
    EXPECT_EQ(environment.launcher, "pmi");
    EXPECT_EQ(environment.rank, 2);
    EXPECT_EQ(environment.world_size, 3);
    EXPECT_EQ(environment.local_rank, 0);
    clear_launcher_environment();
}

TEST(Launcher, BadValuesNameTheVariable) {
    clear_launcher_environment();
    setenv("SLURM_PROCID", "x1", 1);
    setenv("SLURM_NTASKS", "4", 1);
    try {
        detect_launch_environment();
        FAIL() << "expected an error";
    } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find("SLURM_PROCID"), std::string::npos) << error.what();
    }
    setenv("SLURM_PROCID", "4", 1);  // rank outside the world
    EXPECT_THROW(detect_launch_environment(), std::runtime_error);
    clear_launcher_environment();
}

TEST(Shard, EqualShardsCoverTheBufferOnce) {
    const std::size_t length = 1003;
    for (int world = 1; world <= 5; ++world) {
        std::size_t covered = 0, expected_begin = 0;
        for (int rank = 0; rank < world; ++rank) {
            Shard shard = shard_of(length, rank, world);
            EXPECT_EQ(shard.begin, expected_begin);
            EXPECT_EQ(shard.padded_size, (length + world - 1) / world);
            covered += shard.end - shard.begin;
            expected_begin = shard.end;
        }
        EXPECT_EQ(covered, length);
    }
}

}  // namespace
}  // namespace ember::distributed

// launcher_test.cpp: rank, world size and local rank from each launcher's environment
// variables (Open MPI, Slurm, PMI), and ZeRO-1 shard boundaries.
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <utility>

namespace ember::distributed {
namespace {

const char* kAllVariables[] = {"OMPI_COMM_WORLD_RANK",
                               "OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_LOCAL_RANK",
                               "SLURM_PROCID",
                               "SLURM_NTASKS",
                               "SLURM_LOCALID",
                               "PMI_RANK",
                               "PMI_SIZE",
                               "MPI_LOCALRANKID"};

void clear_launcher_environment() {
    for (const char* name : kAllVariables) unsetenv(name);
}

// What detect_launch_environment() finds with only `variables` set (all cleared again
// afterwards).
LaunchEnvironment detected_with(std::initializer_list<std::pair<const char*, const char*>> variables) {
    clear_launcher_environment();
    for (const auto& [name, value] : variables) setenv(name, value, 1);
    LaunchEnvironment environment = detect_launch_environment();
    clear_launcher_environment();
    return environment;
}

void expect_launch(const LaunchEnvironment& environment, const char* launcher, int rank, int world_size,
                   int local_rank) {
    EXPECT_EQ(environment.launcher, launcher);
    EXPECT_EQ(environment.rank, rank);
    EXPECT_EQ(environment.world_size, world_size);
    EXPECT_EQ(environment.local_rank, local_rank);
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
    expect_launch(
        detected_with(
            {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}),
        "openmpi", 5, 8, 1);
}

TEST(Launcher, Slurm) {
    expect_launch(detected_with({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "3"}}), "slurm", 3, 4,
                  3);
}

TEST(Launcher, Pmi) {
    expect_launch(detected_with({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}), "pmi", 2, 3, 0);
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

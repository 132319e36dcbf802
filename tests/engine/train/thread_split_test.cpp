// thread_split_test.cpp: the CPU backend's compute/loader split (engine/train/thread_split.h)
// on loader costs whose answers follow by hand from its rule: the loader must fill a
// batch (with a 25% margin) in the time a step computes, steps speeding up in
// proportion to the compute threads; under a tenth of a core it keeps no core.
#include "engine/train/thread_split.h"

#include <gtest/gtest.h>

namespace ember::train {
namespace {

TEST(ThreadSplit, StartsWithACorePerWorkerAndAtLeastOneComputeThread) {
    EXPECT_EQ(initial_compute_threads(2, 2), 1);
    EXPECT_EQ(initial_compute_threads(8, 2), 6);
    EXPECT_EQ(initial_compute_threads(4, 0), 4);
    EXPECT_EQ(initial_compute_threads(1, 4), 1);
}

TEST(ThreadSplit, ALoaderReadingFromMemorySharesTheCores) {
    // The quickstart's numbers: 0.14 ms of CPU a batch against 65 ms a step on one thread;
    // at 2 threads a step takes 32.5 ms and the loader needs 1.25 x 0.14 / 32.5 = 0.5%.
    const ThreadSplit split = measured_thread_split(2, 2, 1, 0.14e-3, 65e-3);
    EXPECT_EQ(split.compute_threads, 2);
    EXPECT_NEAR(split.loader_cores_needed, 1.25 * 0.14 / 32.5, 1e-9);
    EXPECT_NE(split.explanation.find("share the cores"), std::string::npos) << split.explanation;
}

TEST(ThreadSplit, ADecodingLoaderKeepsTheCoresItNeeds) {
    // PNG decoding: 40 ms of CPU a batch, 60 ms a step on one thread. Two compute threads
    // (30 ms a step) would need 1.67 cores for the loader; one (60 ms) needs 0.83: keep one.
    EXPECT_EQ(measured_thread_split(2, 2, 1, 40e-3, 60e-3).compute_threads, 1);
    // 8 cores, 4 workers, 10 ms a batch, 20 ms a step at 4 threads: at 8 threads (10 ms a
    // step) the loader needs 1.25 cores, at 7 (11.4 ms) 1.09 > 1, at 6 (13.3 ms) 0.94 <= 2.
    const ThreadSplit split = measured_thread_split(8, 4, 4, 10e-3, 20e-3);
    EXPECT_EQ(split.compute_threads, 6);
    EXPECT_NE(split.explanation.find("2 cores for its 4 workers"), std::string::npos) << split.explanation;
}

TEST(ThreadSplit, NeverMoreCoresForTheLoaderThanWorkersOrThanLeaveOneForCompute) {
    // A loader that could use every core still leaves one compute thread, and never keeps
    // more cores than it has workers.
    EXPECT_EQ(measured_thread_split(4, 8, 1, 1.0, 1e-3).compute_threads, 1);
    EXPECT_EQ(measured_thread_split(8, 2, 6, 1.0, 1e-3).compute_threads, 6);
    EXPECT_EQ(measured_thread_split(1, 2, 1, 1.0, 1e-3).compute_threads, 1);
    // No workers: the loader runs in the training thread, all cores compute.
    EXPECT_EQ(measured_thread_split(4, 0, 4, 1e-3, 1e-3).compute_threads, 4);
}

}  // namespace
}  // namespace ember::train

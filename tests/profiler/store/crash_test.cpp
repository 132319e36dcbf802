// store_crash_test.cpp: what survives when the process dies. A child process
// records continuously and is killed: SIGKILL must leave a readable file with the
// events committed so far (commits every <= 250 ms); SIGTERM and exit() without
// close() must leave every event recorded before them.
#include "profiler/store/reader.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace ember::store {
namespace {

using namespace ember::trace;
using testing::ScratchDir;

// Child side: records counter samples forever (never returns). Each time `report_every`
// events are recorded and flushed, writes the count to `report_fd`.
[[noreturn]] void record_forever(const std::string& path, bool signal_handlers, int report_fd,
                                 std::int64_t stop_after) {
    WriterOptions options;
    options.install_signal_handlers = signal_handlers;
    options.overflow = OverflowPolicy::block;
    TraceWriter* writer = new TraceWriter(path, RunInfo{}, options);  // never destroyed: the process dies
    CounterId counter = writer->register_counter({0, "loss", "", kNoDevice});
    for (std::int64_t i = 0;; ++i) {
        if (i == stop_after) {
            writer->flush();
            std::int64_t count = i;
            if (write(report_fd, &count, sizeof(count)) != sizeof(count)) _exit(3);
            for (;;) pause();  // wait for the signal
        }
        writer->record_counter({counter, i, static_cast<double>(i)});
        if (stop_after < 0 && i % 200 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

TEST(TraceStoreCrash, SigkillLeavesAReadableTraceWithCommittedEvents) {
    ScratchDir dir;
    std::string path = dir.file("killed.db");
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) record_forever(path, false, -1, -1);
    // Long enough for several commits (every <= 250 ms).
    std::this_thread::sleep_for(std::chrono::milliseconds(900));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status));

    TraceReader reader(path);
    EXPECT_FALSE(reader.complete());
    EXPECT_FALSE(reader.has_indexes());
    EXPECT_EQ(reader.run().end_ns, 0);
    std::int64_t count = reader.event_count("counter_samples");
    EXPECT_GT(count, 0) << "nothing committed in 900 ms";
    // What was committed is a prefix of what was recorded: 0, 1, 2, ... in order.
    std::int64_t expected = 0;
    reader.for_each_counter_sample({}, [&](const CounterSample& sample) {
        EXPECT_EQ(sample.time_ns, expected);
        ++expected;
        return true;
    });
    EXPECT_EQ(expected, count);
    ASSERT_EQ(reader.tracks().size(), 1u);  // recomputed from the rows
    EXPECT_EQ(reader.tracks()[0].event_count, count);

    // Repair: indexes and track stats get built; answers stay the same.
    TraceReader repaired(path, ReaderOptions{.build_missing_indexes = true});
    EXPECT_TRUE(repaired.has_indexes());
    EXPECT_EQ(repaired.event_count("counter_samples"), count);
}

// Runs a child that records `events`, flushes, reports, and then gets `signal_number`.
void expect_all_events_after_signal(int signal_number) {
    ScratchDir dir;
    std::string path = dir.file("signalled.db");
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    constexpr std::int64_t kEvents = 300'000;
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(pipe_fds[0]);
        record_forever(path, true, pipe_fds[1], kEvents);
    }
    close(pipe_fds[1]);
    std::int64_t reported = 0;
    ASSERT_EQ(read(pipe_fds[0], &reported, sizeof(reported)), static_cast<ssize_t>(sizeof(reported)));
    close(pipe_fds[0]);
    ASSERT_EQ(reported, kEvents);
    ASSERT_EQ(kill(child, signal_number), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    // The handler flushed, then let the signal terminate the process as it would have.
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited instead of dying of the signal";
    EXPECT_EQ(WTERMSIG(status), signal_number);

    TraceReader reader(path);
    EXPECT_EQ(reader.event_count("counter_samples"), kEvents);
}

TEST(TraceStoreCrash, SigtermFlushesEverythingThenTerminates) {
    expect_all_events_after_signal(SIGTERM);
}

TEST(TraceStoreCrash, SigintFlushesEverythingThenTerminates) {
    expect_all_events_after_signal(SIGINT);
}

// exit() without close(): the atexit hook closes the writer, so the file is complete.
TEST(TraceStoreCrash, ExitWithoutCloseStillCompletesTheFile) {
    ScratchDir dir;
    std::string path = dir.file("exited.db");
    constexpr int kEvents = 250'000;
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        WriterOptions options;
        options.install_signal_handlers = false;
        options.overflow = OverflowPolicy::block;
        auto* writer = new TraceWriter(path, RunInfo{}, options);  // leaked on purpose
        for (int i = 0; i < kEvents; ++i) writer->record_counter({1, i, 0.5});
        std::exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    TraceReader reader(path);
    EXPECT_TRUE(reader.complete());
    EXPECT_TRUE(reader.has_indexes());
    EXPECT_EQ(reader.event_count("counter_samples"), kEvents);
}

// A traced program that forks (data-loader workers): the child cannot use the
// parent's writer (its thread is not there); it must neither crash nor hang nor
// damage the file, and the parent's trace stays complete.
TEST(TraceStoreCrash, ForkedChildLeavesTheParentsWriterAlone) {
    ScratchDir dir;
    std::string path = dir.file("forked.db");
    WriterOptions options;
    options.overflow = OverflowPolicy::block;  // signal handlers and exit hook on, as in a collector
    {
        TraceWriter writer(path, RunInfo{}, options);
        CounterId counter = writer.register_counter({0, "loss", "", kNoDevice});
        for (int i = 0; i < 1000; ++i) writer.record_counter({counter, i, 1.0});
        pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            bool recorded = writer.record_counter({counter, 5000, 1.0});
            // exit() runs the exit hook and static destructors in the child.
            std::exit(recorded ? 3 : 0);
        }
        int status = 0;
        ASSERT_EQ(waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFEXITED(status)) << "the child crashed";
        EXPECT_EQ(WEXITSTATUS(status), 0) << "the child could record into the parent's writer";
        for (int i = 1000; i < 2000; ++i) writer.record_counter({counter, i, 1.0});
        writer.close();
    }
    TraceReader reader(path);
    EXPECT_TRUE(reader.complete());
    EXPECT_EQ(reader.event_count("counter_samples"), 2000);
}

}  // namespace
}  // namespace ember::store

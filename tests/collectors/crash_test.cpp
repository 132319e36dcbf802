// crash_test.cpp: a recorded program killed by SIGKILL leaves a file that opens
// and holds everything up to the last periodic commit (<= 250 ms); SIGTERM and
// SIGINT flush everything before the program dies.
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <string>

namespace ember {
namespace {

struct KilledRecording {
    std::int64_t kill_ns = 0;
    std::int64_t ranges = 0;
    std::int64_t last_end_ns = 0;
};

KilledRecording record_then_kill(const std::vector<std::string>& argv, int signal_number, const std::string& path) {
    KilledRecording result;
    test::Child child = test::spawn(argv);
    EXPECT_TRUE(test::wait_for_output(child, "ticking")) << test::read_output(child);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    result.kill_ns = test::monotonic_ns();
    kill(child.pid, signal_number);
    int code = test::wait_for(child, 20.0);
    EXPECT_EQ(code, 128 + signal_number) << test::read_output(child);
    unlink(child.output_path.c_str());
    store::TraceReader reader(path);
    EXPECT_FALSE(reader.complete());  // the writer never closed
    result.ranges = reader.event_count("ranges");
    reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        result.last_end_ns = std::max(result.last_end_ns, range.end_ns);
        return true;
    });
    return result;
}

TEST(CollectorCrash, SigkillKeepsEverythingUpToTheLastCommit) {
    std::string path = test::temp_path("sigkill.db");
    KilledRecording killed =
        record_then_kill({test::bin("sample_nvtx_threads_inprocess"), "--record", path, "--forever"}, SIGKILL, path);
    EXPECT_GT(killed.ranges, 100);  // ~1 tick per ms for 700 ms
    // Commits come every 200 ms: the file reaches within one interval (+ slack) of the kill.
    EXPECT_GE(killed.last_end_ns, killed.kill_ns - 400'000'000) << "lost more than one commit interval";
    std::remove(path.c_str());
}

TEST(CollectorCrash, SigtermFlushesEverything) {
    std::string path = test::temp_path("sigterm.db");
    KilledRecording killed =
        record_then_kill({test::bin("sample_nvtx_threads_inprocess"), "--record", path, "--forever"}, SIGTERM, path);
    EXPECT_GT(killed.ranges, 100);
    // Flushed at the signal: the last tick ended moments before it, far less than a commit interval.
    EXPECT_GE(killed.last_end_ns, killed.kill_ns - 50'000'000);
    std::remove(path.c_str());
}

TEST(CollectorCrash, EmberRecordForwardsSigintAndTheFileIsFlushed) {
    std::string path = test::temp_path("sigint.db");
    KilledRecording killed = record_then_kill(
        {test::bin("ember"), "record", "-q", "-o", path, "--", test::bin("sample_nvtx_threads"), "--forever"}, SIGINT,
        path);
    EXPECT_GT(killed.ranges, 100);
    EXPECT_GE(killed.last_end_ns, killed.kill_ns - 50'000'000);
    std::remove(path.c_str());
}

}  // namespace
}  // namespace ember

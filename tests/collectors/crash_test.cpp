// crash_test.cpp: a recorded program killed by SIGKILL leaves a file that opens
// and holds everything up to the last periodic commit (<= 250 ms); SIGTERM and
// SIGINT flush everything before the program dies.
#include "profiler/store/reader.h"
#include "tests/collectors/subprocess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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
    const test::RemovedAtEnd removed(path);  // the file and the -wal, -shm a killed writer leaves
    KilledRecording killed =
        record_then_kill({test::bin("sample_nvtx_threads_inprocess"), "--record", path, "--forever"}, SIGKILL, path);
    EXPECT_GT(killed.ranges, 100);  // ~1 tick per ms for 700 ms
    // Commits come every 200 ms: the file reaches within one interval (+ slack) of the kill.
    EXPECT_GE(killed.last_end_ns, killed.kill_ns - 400'000'000) << "lost more than one commit interval";
}

TEST(CollectorCrash, SigtermFlushesEverything) {
    std::string path = test::temp_path("sigterm.db");
    const test::RemovedAtEnd removed(path);  // the file and the -wal, -shm a killed writer leaves
    KilledRecording killed =
        record_then_kill({test::bin("sample_nvtx_threads_inprocess"), "--record", path, "--forever"}, SIGTERM, path);
    EXPECT_GT(killed.ranges, 100);
    // Flushed at the signal: the last tick ended moments before it, far less than a commit interval.
    EXPECT_GE(killed.last_end_ns, killed.kill_ns - 50'000'000);
}

TEST(CollectorCrash, EmberRecordForwardsSigintAndTheFileIsFlushed) {
    std::string path = test::temp_path("sigint.db");
    const test::RemovedAtEnd removed(path);  // the file and the -wal, -shm a killed writer leaves
    KilledRecording killed = record_then_kill(
        {test::bin("ember"), "record", "-q", "-o", path, "--", test::bin("sample_nvtx_threads"), "--forever"}, SIGINT,
        path);
    EXPECT_GT(killed.ranges, 100);
    EXPECT_GE(killed.last_end_ns, killed.kill_ns - 50'000'000);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// `ember record --paused` captures nothing until `ember attach PID start`; then the
// ranges begin after the attach.
TEST(CollectorAttach, PausedRecordingStartsOnAttach) {
    std::string runtime = test::temp_path("attach_runtime");
    std::filesystem::remove_all(runtime);
    std::filesystem::create_directories(runtime);
    std::filesystem::permissions(runtime, std::filesystem::perms::owner_all);
    std::string xdg = "XDG_RUNTIME_DIR=" + runtime;
    std::string path = test::temp_path("attach.db");
    const test::RemovedAtEnd removed(path);  // the file and the -wal, -shm a killed writer leaves
    test::Child recorder = test::spawn(
        {test::bin("ember"), "record", "--paused", "-o", path, "--", test::bin("sample_nvtx_threads"), "--forever"},
        {xdg});
    ASSERT_TRUE(test::wait_for_output(recorder, "ticking")) << test::read_output(recorder);
    // The recorded process is the only one with a socket in the private directory.
    std::string pid;
    for (int attempt = 0; attempt < 200 && pid.empty(); ++attempt) {
        for (const auto& entry : std::filesystem::directory_iterator(runtime + "/ember")) {
            std::string name = entry.path().filename().string();  // ember-<pid>.sock
            if (name.rfind("ember-", 0) == 0) pid = name.substr(6, name.size() - 6 - 5);
        }
        if (pid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_FALSE(pid.empty());
    std::string reply;
    EXPECT_EQ(test::run({test::bin("ember"), "attach", pid, "status"}, &reply, {xdg}), 0) << reply;
    EXPECT_NE(reply.find("ok paused"), std::string::npos) << reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::int64_t attached_ns = test::monotonic_ns();
    EXPECT_EQ(test::run({test::bin("ember"), "attach", pid, "start"}, &reply, {xdg}), 0) << reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(test::run({test::bin("ember"), "attach", pid, "status"}, &reply, {xdg}), 0) << reply;
    EXPECT_NE(reply.find("ok capturing"), std::string::npos) << reply;
    EXPECT_NE(test::run({test::bin("ember"), "attach", "999999999", "status"}, &reply, {xdg}), 0);
    kill(recorder.pid, SIGINT);
    EXPECT_EQ(test::wait_for(recorder, 20.0), 128 + SIGINT) << test::read_output(recorder);
    unlink(recorder.output_path.c_str());

    store::TraceReader reader(path);
    std::int64_t ranges = 0, before_attach = 0;
    reader.for_each_range({}, [&](const trace::RangeEvent& range) {
        ++ranges;
        if (range.start_ns < attached_ns) ++before_attach;
        return true;
    });
    EXPECT_GT(ranges, 50);  // ~300 ms of 1 ms ticks
    // At most the tick open when capture began may predate the attach reply.
    EXPECT_LE(before_attach, 1);
    std::filesystem::remove_all(runtime);
}

}  // namespace
}  // namespace ember

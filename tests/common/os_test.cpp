// os_test.cpp: the /proc readings of common/os.h on lines the kernel writes, the
// affinity mask against the CPU the test runs on, the clocks against the standard
// library's and each other, thread names against pthread_setname_np, command lines
// against the arguments a child was started with, and the UTF-8 encoder of
// common/text.h against the bytes the standard spells.
#include "common/os.h"
#include "common/text.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

extern char** environ;

namespace ember::os {
namespace {

TEST(MapsLine, ReadsEveryFieldOfAFileMapping) {
    MapsLine entry;
    ASSERT_TRUE(parse_maps_line(
        "7f1c2a400000-7f1c2a5d5000 r-xp 00028000 fe:01 1311232    /usr/lib/x86_64-linux-gnu/libc.so.6", entry));
    EXPECT_EQ(entry.start, 0x7f1c2a400000u);
    EXPECT_EQ(entry.end, 0x7f1c2a5d5000u);
    EXPECT_EQ(entry.offset, 0x28000u);
    EXPECT_EQ(entry.permissions, "r-xp");
    EXPECT_EQ(entry.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
}

TEST(MapsLine, AnonymousMemoryHasNoPathAfterAFileMapping) {
    // One entry reused over a file's lines: JIT code (anonymous, executable) must not
    // inherit the path of the line before it.
    MapsLine entry;
    ASSERT_TRUE(parse_maps_line("55d0c8a00000-55d0c8a21000 r-xp 00000000 fe:01 42 /usr/bin/ember (deleted)", entry));
    EXPECT_EQ(entry.path, "/usr/bin/ember (deleted)");
    ASSERT_TRUE(parse_maps_line("7f1c00000000-7f1c00021000 rwxp 00000000 00:00 0", entry));
    EXPECT_EQ(entry.path, "");
    EXPECT_EQ(entry.permissions, "rwxp");
    ASSERT_TRUE(
        parse_maps_line("7ffd4b1e0000-7ffd4b201000 rw-p 00000000 00:00 0                          [stack]", entry));
    EXPECT_EQ(entry.path, "[stack]");
}

TEST(MapsLine, RefusesWhatIsNotAMapsLine) {
    MapsLine entry;
    EXPECT_FALSE(parse_maps_line("", entry));
    EXPECT_FALSE(parse_maps_line("7f1c00000000 rwxp 00000000 00:00 0", entry));  // no range
    EXPECT_FALSE(parse_maps_line("7f1c00000000-7f1c00021000 rwxp", entry));      // cut short
}

TEST(AllowedCpus, HoldsTheCpuThisThreadRunsOn) {
    const std::vector<int> cpus = allowed_cpus();
    ASSERT_FALSE(cpus.empty());
    EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
    const int here = sched_getcpu();
    if (here >= 0) EXPECT_NE(std::find(cpus.begin(), cpus.end(), here), cpus.end()) << "CPU " << here;
}

std::int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}
std::int64_t system_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

TEST(Clocks, MonotonicIsTheSteadyClock) {
    // libstdc++'s steady_clock is CLOCK_MONOTONIC: a reading lies between two of its.
    for (int round = 0; round < 1000; ++round) {
        const std::int64_t before = steady_ns();
        const std::int64_t now = monotonic_ns();
        const std::int64_t after = steady_ns();
        ASSERT_LE(before, now);
        ASSERT_LE(now, after);
    }
}

TEST(Clocks, WallIsTheSystemClock) {
    // A wall-clock step (NTP, an administrator) between the reads could break this; a
    // second of slack covers any slew.
    const std::int64_t before = system_ns();
    const std::int64_t now = wall_ns();
    const std::int64_t after = system_ns();
    EXPECT_LE(before, now + 1'000'000'000);
    EXPECT_LE(now, after + 1'000'000'000);
    EXPECT_GT(now, 1'500'000'000'000'000'000);  // after 2017: the Unix epoch, in ns
}

TEST(Clocks, MidpointOffsetLiesBetweenThePlainOffsetsAroundIt) {
    // wall0 <= wall <= wall1 and mono0 <= the midpoint <= mono1, so the offset lies in
    // [wall0 - mono1, wall1 - mono0], the two plain offsets read around it.
    for (int round = 0; round < 100; ++round) {
        const std::int64_t wall0 = wall_ns();
        const std::int64_t mono0 = monotonic_ns();
        const std::int64_t offset = monotonic_wall_offset_ns();
        const std::int64_t mono1 = monotonic_ns();
        const std::int64_t wall1 = wall_ns();
        ASSERT_LE(wall0 - mono1, offset);
        ASSERT_LE(offset, wall1 - mono0);
    }
}

TEST(Clocks, WallOffsetTakesTheMidpointOfTheReadsAroundTheWallClock) {
    // A clock that reads 1000 before the wall clock and 3000 after it: the offset is the
    // wall time minus 2000, whatever the wall time was.
    int reads = 0;
    auto fake = [&reads] { return ++reads == 1 ? std::int64_t{1000} : std::int64_t{3000}; };
    const std::int64_t before = wall_ns();
    const std::int64_t offset = wall_offset_ns(fake);
    const std::int64_t after = wall_ns();
    EXPECT_EQ(reads, 2);
    EXPECT_LE(before - 2000, offset);
    EXPECT_LE(offset, after - 2000);
}

TEST(ThreadName, ReadsBackTheNameThisThreadGaveItself) {
    const std::string before = thread_name();
    ASSERT_EQ(pthread_setname_np(pthread_self(), "os-test-self"), 0);
    EXPECT_EQ(thread_name(), "os-test-self");
    EXPECT_EQ(thread_name(::getpid(), static_cast<pid_t>(thread_id())), "os-test-self");
    pthread_setname_np(pthread_self(), before.c_str());
}

TEST(ThreadName, ReadsAnotherThreadsNameByItsId) {
    std::mutex mutex;
    std::condition_variable changed;
    std::int64_t tid = 0;
    bool done = false;
    std::thread other([&] {
        pthread_setname_np(pthread_self(), "os-test-other");
        std::unique_lock lock(mutex);
        tid = thread_id();
        changed.notify_all();
        changed.wait(lock, [&] { return done; });
    });
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return tid != 0; });
    EXPECT_EQ(thread_name(::getpid(), static_cast<pid_t>(tid)), "os-test-other");
    EXPECT_NE(thread_name(), "os-test-other");
    done = true;
    changed.notify_all();
    lock.unlock();
    other.join();
    // The thread is gone: nothing to read, once the kernel has let it go (join returns
    // a moment before /proc forgets it). A pid beyond pid_max never exists.
    std::string after = thread_name(::getpid(), static_cast<pid_t>(tid));
    for (int attempt = 0; !after.empty() && attempt < 10000; ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        after = thread_name(::getpid(), static_cast<pid_t>(tid));
    }
    EXPECT_EQ(after, "");
    EXPECT_EQ(thread_name(1 << 30, 1 << 30), "");
}

TEST(CommandLine, OfAChildIsTheArgumentsItWasStartedWith) {
    // The shell stops itself (a builtin: no process of its own, none left behind) until
    // it is killed. posix_spawn returns while the kernel still sets up the new program,
    // whose arguments read as empty for that moment: read until they are there.
    const std::vector<std::string> arguments{"/bin/sh", "-c", "kill -STOP $$", "with space", "", "last"};
    std::vector<char*> argv;
    for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    pid_t child = 0;
    ASSERT_EQ(posix_spawn(&child, "/bin/sh", nullptr, nullptr, argv.data(), environ), 0);
    std::vector<std::string> read = command_line_arguments(child);
    for (int attempt = 0; read.empty() && attempt < 10000; ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        read = command_line_arguments(child);
    }
    const std::string joined = command_line(child);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(read, arguments);
    EXPECT_EQ(joined, "/bin/sh -c kill -STOP $$ with space  last");
    // Reaped: nothing to read.
    EXPECT_TRUE(command_line_arguments(child).empty());
    EXPECT_EQ(command_line(child), "");
}

TEST(CommandLine, OfThisProcessIsProcSelfCmdlineSplit) {
    std::FILE* file = std::fopen("/proc/self/cmdline", "rb");
    ASSERT_NE(file, nullptr);
    std::vector<std::string> expected(1);
    for (int c; (c = std::fgetc(file)) != EOF;) {
        if (c == 0)
            expected.emplace_back();
        else
            expected.back() += static_cast<char>(c);
    }
    std::fclose(file);
    expected.pop_back();  // after the last NUL
    EXPECT_EQ(command_line_arguments(::getpid()), expected);
    std::string joined;
    for (const std::string& argument : expected) joined += (joined.empty() ? "" : " ") + argument;
    EXPECT_EQ(command_line(), joined);
    ASSERT_FALSE(expected.empty());
    EXPECT_NE(expected[0].find("common_os_test"), std::string::npos) << expected[0];
}

TEST(HostName, IsTheKernelsNodeName) {
    std::string expected = read_file_text("/proc/sys/kernel/hostname");
    if (!expected.empty() && expected.back() == '\n') expected.pop_back();
    EXPECT_EQ(host_name(), expected);
}

}  // namespace
}  // namespace ember::os

namespace ember::text {
namespace {

std::string utf8(std::uint32_t code) {
    std::string out;
    append_utf8(out, code);
    return out;
}

TEST(AppendUtf8, EncodesEachLengthAsTheStandardSpellsIt) {
    // RFC 3629's examples and the edges of each length.
    EXPECT_EQ(utf8(0x41), "A");
    EXPECT_EQ(utf8(0x7F), "\x7F");
    EXPECT_EQ(utf8(0x80), "\xC2\x80");
    EXPECT_EQ(utf8(0xE9), "\xC3\xA9");  // é
    EXPECT_EQ(utf8(0x7FF), "\xDF\xBF");
    EXPECT_EQ(utf8(0x800), "\xE0\xA0\x80");
    EXPECT_EQ(utf8(0x20AC), "\xE2\x82\xAC");  // €
    EXPECT_EQ(utf8(0xFFFF), "\xEF\xBF\xBF");
    EXPECT_EQ(utf8(0x10000), "\xF0\x90\x80\x80");
    EXPECT_EQ(utf8(0x1F600), "\xF0\x9F\x98\x80");  // 😀
    EXPECT_EQ(utf8(0x10FFFF), "\xF4\x8F\xBF\xBF");
    std::string appended = "x";
    append_utf8(appended, 0xE9);
    EXPECT_EQ(appended, "x\xC3\xA9");
}

}  // namespace
}  // namespace ember::text

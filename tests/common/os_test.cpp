// os_test.cpp: the /proc readings of common/os.h on lines the kernel writes, and the
// affinity mask against the CPU the test runs on.
#include "common/os.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>

namespace ember::os {
namespace {

TEST(MapsLine, ReadsEveryFieldOfAFileMapping) {
    MapsLine entry;
    ASSERT_TRUE(parse_maps_line("7f1c2a400000-7f1c2a5d5000 r-xp 00028000 fe:01 1311232    /usr/lib/x86_64-linux-gnu/libc.so.6",
                                entry));
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
    ASSERT_TRUE(parse_maps_line("7ffd4b1e0000-7ffd4b201000 rw-p 00000000 00:00 0                          [stack]", entry));
    EXPECT_EQ(entry.path, "[stack]");
}

TEST(MapsLine, RefusesWhatIsNotAMapsLine) {
    MapsLine entry;
    EXPECT_FALSE(parse_maps_line("", entry));
    EXPECT_FALSE(parse_maps_line("7f1c00000000 rwxp 00000000 00:00 0", entry));  // no range
    EXPECT_FALSE(parse_maps_line("7f1c00000000-7f1c00021000 rwxp", entry));       // cut short
}

TEST(AllowedCpus, HoldsTheCpuThisThreadRunsOn) {
    const std::vector<int> cpus = allowed_cpus();
    ASSERT_FALSE(cpus.empty());
    EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
    const int here = sched_getcpu();
    if (here >= 0) EXPECT_NE(std::find(cpus.begin(), cpus.end(), here), cpus.end()) << "CPU " << here;
}

}  // namespace
}  // namespace ember::os

// screenshot_test.cpp: runs `ember-view --screenshot` under Xvfb on fixture traces
// and checks the pictures: expected colors in the expected lanes (kernels blue in
// the compute stream, copies green in the copy stream, NVTX ranges warm in the main
// thread, counter lines orange), a flamegraph, a difference flamegraph with red
// (slower) boxes, the stats tables, the idle gaps and queue track under each stream
// and the GPU breakdown panel, the sampled Python stacks under the thread lanes (idle
// samples hidden, then dimmed); and that bad files or a missing display end with a
// clear message, not a crash.
#include "tests/viewer/fixture_trace.h"
#include "tests/support/generated_job.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_dir.h"
#include "viewer/ui/colors.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>

namespace ember::viewer {
namespace {

struct Image {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgba;
    std::uint32_t pixel(int x, int y) const {
        const std::uint8_t* p = &rgba[(static_cast<std::size_t>(y) * width + x) * 4];
        return colors::rgb(p[0], p[1], p[2]);
    }
};

bool read_png(const std::string& path, Image& image) {
    png_image header{};
    header.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&header, path.c_str())) return false;
    header.format = PNG_FORMAT_RGBA;
    image.width = static_cast<int>(header.width);
    image.height = static_cast<int>(header.height);
    image.rgba.resize(PNG_IMAGE_SIZE(header));
    return png_image_finish_read(&header, nullptr, image.rgba.data(), 0, nullptr) != 0;
}

struct LaneBox {
    int kind = 0;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    std::string title;
    int lane = -1;
};

// The rectangles of one kind of track from --layout: "lane" (a lane's events), "idle"
// (a stream's idle gaps), "queue" (its queue length).
std::vector<LaneBox> read_layout(const std::string& path, const std::string& track = "lane") {
    std::vector<LaneBox> lanes;
    std::ifstream in(path);
    std::string word;
    LaneBox box;
    while (in >> word >> box.lane >> box.kind >> box.x0 >> box.y0 >> box.x1 >> box.y1) {
        std::getline(in, box.title);
        if (word == track) lanes.push_back(box);
    }
    return lanes;
}

// Runs a command; returns its exit code (or 128 + signal) and its output.
int run(const std::string& command, std::string* output) {
    // xvfb-run removes its temporary folder before it stops Xvfb, which may still be
    // writing there: "problem while cleaning up temporary directory", exit 5, whatever
    // the viewer returned. That is the harness, not the viewer: run it again.
    for (int attempt = 0;; ++attempt) {
        const std::string log = testing::temporary_trace_path("command") + ".log";
        const int status = std::system((command + " > " + log + " 2>&1").c_str());
        const std::string said = test_support::read_file(log);
        std::filesystem::remove(log);
        const bool harness_failed = WIFEXITED(status) && WEXITSTATUS(status) == 5 &&
                                    said.find("problem while cleaning up temporary directory") != std::string::npos;
        if (harness_failed && attempt < 3) continue;
        if (output) *output = said;
        if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
    }
}

bool is_kernel_blue(std::uint32_t c) {
    return colors::blue(c) >= 150 && colors::blue(c) > colors::red(c) + 60 && colors::blue(c) > colors::green(c) + 20;
}
bool is_copy_green(std::uint32_t c) {
    return colors::green(c) >= 150 && colors::green(c) > colors::red(c) + 60 && colors::green(c) > colors::blue(c) + 60;
}
bool is_warm(std::uint32_t c) {
    return colors::red(c) >= 150 && colors::red(c) > colors::blue(c) + 60;
}
bool is_counter_orange(std::uint32_t c) {
    // kCounterLine (255, 150, 30): redder than any NVTX range shade (red <= 232).
    return colors::red(c) >= 245 && colors::green(c) >= 120 && colors::green(c) <= 180 && colors::blue(c) < 70;
}
bool is_diff_red(std::uint32_t c) {
    return colors::red(c) >= 180 && colors::green(c) < 110 && colors::blue(c) < 110;
}
// Idle gaps: host_wait (232, 72, 85), other (120, 130, 160); the queue area (215, 125, 35);
// the breakdown's compute blue (60, 120, 225).
bool near(std::uint32_t c, std::uint32_t target, int tolerance = 12) {
    return std::abs(static_cast<int>(colors::red(c)) - static_cast<int>(colors::red(target))) <= tolerance &&
           std::abs(static_cast<int>(colors::green(c)) - static_cast<int>(colors::green(target))) <= tolerance &&
           std::abs(static_cast<int>(colors::blue(c)) - static_cast<int>(colors::blue(target))) <= tolerance;
}
bool is_host_wait(std::uint32_t c) {
    return near(c, colors::kIdleHostWait);
}
bool is_idle_other(std::uint32_t c) {
    return near(c, colors::kIdleOther);
}
bool is_queue(std::uint32_t c) {
    return near(c, colors::kQueueFill);
}
bool is_compute_blue(std::uint32_t c) {
    return near(c, colors::kCompute, 6);
}
bool is_dataloader_or_cpu(std::uint32_t c) {
    return near(c, colors::step_category_color(6), 6);
}

int count_in(const Image& image, const LaneBox& box, bool (*test)(std::uint32_t)) {
    int count = 0;
    for (int y = static_cast<int>(box.y0); y < static_cast<int>(box.y1) && y < image.height; ++y)
        for (int x = static_cast<int>(box.x0); x < static_cast<int>(box.x1) && x < image.width; ++x)
            count += test(image.pixel(x, y)) ? 1 : 0;
    return count;
}

int count_all(const Image& image, bool (*test)(std::uint32_t)) {
    return count_in(image, {0, 0, 0, static_cast<float>(image.width), static_cast<float>(image.height), ""}, test);
}

std::size_t distinct_colors(const Image& image) {
    std::set<std::uint32_t> seen;
    for (int y = 0; y < image.height; y += 2)
        for (int x = 0; x < image.width; x += 2) seen.insert(image.pixel(x, y));
    return seen.size();
}

class ScreenshotTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (std::system("command -v xvfb-run > /dev/null 2>&1") != 0) GTEST_SKIP() << "xvfb-run is not installed";
        trace_ = testing::temporary_trace_path("shot");
        testing::write_fixture_trace(trace_);
        png_ = trace_ + ".png";
        layout_ = trace_ + ".layout";
    }
    void TearDown() override {
        for (const std::string& path : {trace_, png_, layout_}) std::filesystem::remove(path);
    }
    std::string viewer(const std::string& arguments) const {
        return std::string("xvfb-run -a -s '-screen 0 1600x1000x24' ") + EMBER_VIEW_PATH + " " + arguments;
    }
    // The fixture's timeline at 1400x700 into `image`, its lane boxes into layout_.
    void take_timeline(Image& image) const {
        std::string output;
        ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --view timeline --size 1400x700 --layout " + layout_),
                      &output),
                  0)
            << output;
        ASSERT_TRUE(read_png(png_, image));
    }
    std::string trace_, png_, layout_;
};

TEST_F(ScreenshotTest, TimelineShowsEachKindInItsLane) {
    Image image;
    ASSERT_NO_FATAL_FAILURE(take_timeline(image));
    EXPECT_EQ(image.width, 1400);
    EXPECT_EQ(image.height, 700);
    EXPECT_GT(distinct_colors(image), 20u);
    const auto lanes = read_layout(layout_);
    ASSERT_EQ(lanes.size(), 6u);
    auto lane = [&lanes](const std::string& title) {
        for (const LaneBox& box : lanes)
            if (box.title.find(title) != std::string::npos) return box;
        ADD_FAILURE() << "no lane " << title;
        return LaneBox{};
    };
    const LaneBox main_thread = lane("main"), compute = lane("compute"), copy = lane("copy"), loss = lane("loss");
    EXPECT_GT(count_in(image, main_thread, is_warm), 5000);    // step/forward/backward rows
    EXPECT_GT(count_in(image, compute, is_kernel_blue), 300);  // 24 kernels
    EXPECT_EQ(count_in(image, compute, is_copy_green), 0);
    EXPECT_GT(count_in(image, copy, is_copy_green), 20);  // 4 copies, a few pixels wide
    EXPECT_EQ(count_in(image, copy, is_kernel_blue), 0);
    EXPECT_GT(count_in(image, loss, is_counter_orange), 200);  // the loss line
    EXPECT_EQ(count_in(image, main_thread, is_counter_orange), 0);
}

TEST_F(ScreenshotTest, RangeZoomsTheTimeline) {
    // The first 100 us hold no kernel (they start 10 us after forward) except the first.
    ASSERT_EQ(
        run(viewer(trace_ + " --screenshot " + png_ + " --range 0:30us --size 1400x700 --layout " + layout_), nullptr),
        0);
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    const auto lanes = read_layout(layout_);
    ASSERT_EQ(lanes.size(), 6u);
    // 10..30 us of a 30 us window: the first kernel fills about two thirds of the lane.
    const LaneBox compute = lanes[2];
    const int blue = count_in(image, compute, is_kernel_blue);
    const int area = static_cast<int>((compute.x1 - compute.x0) * (compute.y1 - compute.y0));
    EXPECT_GT(blue, area / 2);
    EXPECT_LT(blue, area * 3 / 4);
}

TEST_F(ScreenshotTest, FlamegraphAndStatsAreDrawn) {
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --view flamegraph --size 1000x600"), nullptr), 0);
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    EXPECT_GT(count_all(image, is_warm), 20000);  // "all", "step", "forward"/"backward" rows
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --view flamegraph --flame-source gpu --size 1000x600"),
                  nullptr),
              0);
    ASSERT_TRUE(read_png(png_, image));
    EXPECT_GT(count_all(image, is_kernel_blue), 5000);  // kernel leaves are blue
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --view stats --size 1000x600"), nullptr), 0);
    ASSERT_TRUE(read_png(png_, image));
    EXPECT_GT(distinct_colors(image), 10u);
}

TEST_F(ScreenshotTest, DifferenceFlamegraphIsRedWhereSlower) {
    const std::string slower = testing::temporary_trace_path("shot_slow");
    testing::FixtureShape shape;
    shape.slowdown = 2.0;
    testing::write_fixture_trace(slower, shape);
    ASSERT_EQ(run(viewer(trace_ + " " + slower + " --screenshot " + png_ +
                         " --view flamegraph --flame-source gpu --difference --size 1000x600"),
                  nullptr),
              0);
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    EXPECT_GT(count_all(image, is_diff_red), 5000);  // backward and its kernels doubled
    std::filesystem::remove(slower);
}

// The diff mode: both runs' lanes, B's kernels outlined as A's when their diff row is
// clicked, and a clear refusal with one file or a step a run does not have.
bool is_outline_yellow(std::uint32_t c) {
    return colors::red(c) >= 240 && colors::green(c) >= 240 && colors::blue(c) < 40;
}

TEST_F(ScreenshotTest, DiffModeOutlinesTheClickedRowInBothRuns) {
    const std::string slower = testing::temporary_trace_path("shot_diff_b");
    testing::FixtureShape shape;
    shape.slowdown = 2.0;
    shape.origin_ns = 1'003'000'000;  // 3 ms later: only the alignment puts it under A
    testing::write_fixture_trace(slower, shape);
    // Without the sampled stacks, both runs' streams fit the default window.
    ASSERT_EQ(run(viewer(trace_ + " " + slower + " --diff --diff-row sgemm_128x64 --no-stacks --screenshot " + png_ +
                         " --layout " + layout_),
                  nullptr),
              0);
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    std::vector<LaneBox> compute;
    for (const LaneBox& box : read_layout(layout_))
        if (box.title.find("compute") != std::string::npos) compute.push_back(box);
    ASSERT_EQ(compute.size(), 2u);  // A's stream, then B's below it
    EXPECT_LT(compute[0].y1, compute[1].y0);
    for (const LaneBox& box : compute) EXPECT_GT(count_in(image, box, is_outline_yellow), 40) << box.title;
    // Aligned: B's first outlined kernel starts within a pixel or two of A's.
    auto first_outline_x = [&](const LaneBox& box) {
        for (int x = static_cast<int>(box.x0); x < static_cast<int>(box.x1); ++x)
            for (int y = static_cast<int>(box.y0); y < static_cast<int>(box.y1); ++y)
                if (is_outline_yellow(image.pixel(x, y))) return x;
        return -1;
    };
    EXPECT_NEAR(first_outline_x(compute[0]), first_outline_x(compute[1]), 2);

    std::string output;
    EXPECT_EQ(run(viewer(trace_ + " --diff --screenshot " + png_), &output), 2);
    EXPECT_NE(output.find("--diff needs two trace files"), std::string::npos) << output;
    EXPECT_EQ(run(viewer(trace_ + " " + slower + " --diff --align-step 9 --screenshot " + png_), &output), 2);
    EXPECT_NE(output.find("--align-step 9"), std::string::npos) << output;
    std::filesystem::remove(slower);
}

TEST_F(ScreenshotTest, StreamsShowIdleGapsByCategoryAndTheQueue) {
    // The fixture's compute stream: every kernel launched ahead of the stream except
    // the first of each phase (host_wait), 70 µs between the others (other); the copy
    // stream: one copy per step, each launched after the previous one ended (host_wait).
    Image image;
    ASSERT_NO_FATAL_FAILURE(take_timeline(image));
    const auto lanes = read_layout(layout_);
    const auto idle = read_layout(layout_, "idle");
    const auto queue = read_layout(layout_, "queue");
    ASSERT_EQ(idle.size(), 2u);  // one per stream, none for threads or counters
    ASSERT_EQ(queue.size(), 2u);
    auto of_lane = [](const std::vector<LaneBox>& boxes, const std::string& title) {
        for (const LaneBox& box : boxes)
            if (box.title.find(title) != std::string::npos) return box;
        ADD_FAILURE() << "no track for " << title;
        return LaneBox{};
    };
    const LaneBox compute = of_lane(lanes, "compute"), compute_idle = of_lane(idle, "compute");
    const LaneBox copy_idle = of_lane(idle, "copy"), compute_queue = of_lane(queue, "compute");
    // The tracks sit below the lane's events, inside the timeline's width.
    EXPECT_GE(compute_idle.y0, compute.y1);
    EXPECT_GE(compute_queue.y0, compute_idle.y1);
    EXPECT_EQ(compute_idle.x0, compute.x0);
    // 3 steps' worth of phase starts plus the 4 x 4 shorter gaps: red and slate both,
    // and the 1 ms step boundaries (host_wait) are wide.
    EXPECT_GT(count_in(image, compute_idle, is_host_wait), 1000);
    EXPECT_GT(count_in(image, compute_idle, is_idle_other), 300);
    EXPECT_GT(count_in(image, copy_idle, is_host_wait), 3000);
    EXPECT_EQ(count_in(image, copy_idle, is_idle_other), 0);
    EXPECT_EQ(count_in(image, compute, is_host_wait), 0);  // never on the events themselves
    EXPECT_GT(count_in(image, compute_queue, is_queue), 200);
    EXPECT_EQ(count_in(image, of_lane(lanes, "main"), is_host_wait), 0);
}

TEST_F(ScreenshotTest, BreakdownPanelIsDrawn) {
    std::string output;
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --view breakdown --size 1400x800"), &output), 0)
        << output;
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    // The rank's compute share, the kernel-type bar and the steps' Kernel segments are
    // compute blue; the idle-per-stream bars host_wait red; the fixture's steps spend
    // most of their time on the host (CPU Exec, tan).
    EXPECT_GT(count_all(image, is_compute_blue), 3000);
    EXPECT_GT(count_all(image, is_host_wait), 1000);
    EXPECT_GT(count_all(image, is_dataloader_or_cpu), 3000);
}

TEST_F(ScreenshotTest, StepFramesTheTimelineAsClickingItDoes) {
    // The fixture's steps have no number of their own: they are 0..3 by position. Each
    // has one copy and 6 kernels of 50 µs: framed on one step, the copy lane shows one
    // whole copy (the whole trace shows 4; the next step's begins at the right edge, in
    // the framing's margin) and the kernels fill about a quarter of their lane.
    std::string output;
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --step 2 --size 1400x700 --layout " + layout_), &output),
              0)
        << output;
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    const auto lanes = read_layout(layout_);
    LaneBox compute, copy;
    for (const LaneBox& box : lanes) {
        if (box.title.find("compute") != std::string::npos) compute = box;
        if (box.title.find("copy") != std::string::npos) copy = box;
    }
    int copies = 0, run_start = -1;
    const int middle = static_cast<int>((copy.y0 + copy.y1) / 2);
    const int left = static_cast<int>(copy.x0) + 2, right = static_cast<int>(copy.x1) - 3;
    for (int x = static_cast<int>(copy.x0); x <= static_cast<int>(copy.x1); ++x) {
        const bool green = x < static_cast<int>(copy.x1) && is_copy_green(image.pixel(x, middle));
        if (green && run_start < 0) run_start = x;
        if (!green && run_start >= 0) {
            copies += run_start > left && x < right;  // whole, not cut by the view's edges
            run_start = -1;
        }
    }
    EXPECT_EQ(copies, 1);
    const int area = static_cast<int>((compute.x1 - compute.x0) * (compute.y1 - compute.y0));
    const int blue = count_in(image, compute, is_kernel_blue);
    EXPECT_GT(blue, area / 7);
    EXPECT_LT(blue, area * 2 / 5);
    // A step the trace does not have: a message, not a picture of something else.
    EXPECT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --step 9"), &output), 2);
    EXPECT_NE(output.find("--step 9"), std::string::npos) << output;
}

bool is_flow_magenta(std::uint32_t c) {
    return near(c, colors::kFlow, 40);
}

TEST_F(ScreenshotTest, SelectShowsTheFlowToTheLaunch) {
    // Nothing selected: no flow arrow anywhere.
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --size 1400x700"), nullptr), 0);
    Image image;
    ASSERT_TRUE(read_png(png_, image));
    EXPECT_EQ(count_all(image, is_flow_magenta), 0);
    // A kernel selected: the arrow from its launching call is drawn.
    std::string output;
    ASSERT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --size 1400x700 --select gemm"), &output), 0) << output;
    ASSERT_TRUE(read_png(png_, image));
    EXPECT_GT(count_all(image, is_flow_magenta), 20);
    // A name nothing has: exit 2, saying so.
    EXPECT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --select no-such-event"), &output), 2);
    EXPECT_NE(output.find("--select no-such-event"), std::string::npos) << output;
}

// Sampled stack frames: colors::stack_frame_color, green above red and blue; idle ones
// mixed into the background (dim).
bool is_stack_green(std::uint32_t c) {
    return colors::green(c) >= 150 && colors::green(c) > colors::red(c) + 15 && colors::green(c) > colors::blue(c) + 5;
}
bool is_dim_stack(std::uint32_t c) {
    return colors::green(c) >= 70 && colors::green(c) < 130 && colors::green(c) > colors::red(c) + 5 &&
           colors::green(c) > colors::blue(c);
}

TEST_F(ScreenshotTest, ThreadLanesShowTheirSampledStacks) {
    testing::FixtureShape shape;
    shape.python_stacks = true;
    testing::write_fixture_trace(trace_, shape);
    Image image;
    ASSERT_NO_FATAL_FAILURE(take_timeline(image));
    const auto stacks = read_layout(layout_, "stacks");
    auto chart = [&stacks](const std::string& title) {
        for (const LaneBox& box : stacks)
            if (box.title.find(title) != std::string::npos) return box;
        ADD_FAILURE() << "no stack chart on lane " << title;
        return LaneBox{};
    };
    // main: <module> > train > forward/backward, 3 rows of 18 px nearly filled.
    const LaneBox main_stacks = chart("main");
    EXPECT_NEAR(main_stacks.y1 - main_stacks.y0, 3 * 18.0f, 0.5f);
    const int area = static_cast<int>((main_stacks.x1 - main_stacks.x0) * (main_stacks.y1 - main_stacks.y0));
    EXPECT_GT(count_in(image, main_stacks, is_stack_green), area / 2);
    EXPECT_EQ(count_in(image, main_stacks, is_kernel_blue), 0);
    // The event rows above keep their ranges, and no stack color leaks into them.
    const auto lanes = read_layout(layout_);
    for (const LaneBox& lane : lanes) {
        if (lane.title.find("main") == std::string::npos) continue;
        EXPECT_EQ(count_in(image, lane, is_stack_green), 0);
    }
    // The loader is idle most of the time: by default a few active boxes, nothing dim;
    // the samples-only pin_memory thread (all idle) has no chart.
    const LaneBox loader_stacks = chart("loader");
    const int loader_green = count_in(image, loader_stacks, is_stack_green);
    EXPECT_GT(loader_green, 100);
    EXPECT_EQ(count_in(image, loader_stacks, is_dim_stack), 0);
    for (const LaneBox& box : stacks) EXPECT_EQ(box.title.find("pin_memory"), std::string::npos);

    // --idle-samples: the idle samples appear dimmed, the active ones as before.
    std::string output;
    ASSERT_EQ(
        run(viewer(trace_ + " --screenshot " + png_ + " --idle-samples --size 1400x700 --layout " + layout_), &output),
        0)
        << output;
    ASSERT_TRUE(read_png(png_, image));
    const auto with_idle = read_layout(layout_, "stacks");
    LaneBox loader_idle{}, pin_idle{};
    for (const LaneBox& box : with_idle) {
        if (box.title.find("loader") != std::string::npos) loader_idle = box;
        if (box.title.find("pin_memory") != std::string::npos) pin_idle = box;
    }
    ASSERT_GT(loader_idle.x1, loader_idle.x0);
    ASSERT_GT(pin_idle.x1, pin_idle.x0);
    EXPECT_GT(count_in(image, loader_idle, is_dim_stack), loader_green);
    EXPECT_GT(count_in(image, pin_idle, is_dim_stack), static_cast<int>((pin_idle.x1 - pin_idle.x0) * 10));
    // --stack-depth 1: one row per chart.
    ASSERT_EQ(
        run(viewer(trace_ + " --screenshot " + png_ + " --stack-depth 1 --size 1400x700 --layout " + layout_), &output),
        0)
        << output;
    for (const LaneBox& box : read_layout(layout_, "stacks")) EXPECT_NEAR(box.y1 - box.y0, 18.0f, 0.5f);
    EXPECT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --stack-depth 0"), &output), 2);
    EXPECT_NE(output.find("--stack-depth"), std::string::npos) << output;
}

// A job of 1024 ranks, one of them a straggler, the rows ordered latest first: every
// rank has its row; the straggler's (on top) computes while every other rank waits in
// red; the clicked collective is outlined on (nearly) every rank.
TEST_F(ScreenshotTest, JobViewShows1024RanksAndTheStragglerAtTheTop) {
    synth::SyntheticJobOptions options;
    options.ranks = 1024;
    options.steps = 4;
    options.straggler = 700;
    options.straggler_extra_ns = 3'000'000;
    options.clock_skew_ns = 5'000'000;
    const test_support::GeneratedJob job(options, "ember-screenshot-job");
    std::string files;
    for (const std::string& path : job.files) files += " " + path;
    std::string output;
    const std::string png = job.dir.path("job.png"), layout = job.dir.path("job.layout");
    ASSERT_EQ(run("xvfb-run -a -s '-screen 0 1600x1400x24' " + std::string(EMBER_VIEW_PATH) + files + " --screenshot " +
                      png + " --view job --size 1500x1350 --job-order lateness --collective 5 --layout " + layout,
                  &output),
              0)
        << output;
    Image image;
    ASSERT_TRUE(read_png(png, image));
    const std::vector<LaneBox> rows = read_layout(layout, "job");
    ASSERT_EQ(rows.size(), 1024u);  // every rank fits, at least a pixel each
    EXPECT_EQ(rows.front().lane, 700) << "the latest rank first";
    std::set<int> ranks;
    for (const LaneBox& row : rows) {
        ranks.insert(row.lane);
        EXPECT_GE(row.y1 - row.y0, 1.0f);
        EXPECT_LE(row.y1, static_cast<float>(image.height));
    }
    EXPECT_EQ(ranks.size(), 1024u);
    auto is_wait_red = [](std::uint32_t c) { return near(c, colors::kJobWait, 8); };
    auto is_compute = [](std::uint32_t c) { return near(c, colors::kJobCompute, 8); };
    auto share = [&](const LaneBox& row, bool (*test)(std::uint32_t)) {
        const LaneBox line{0, row.x0, row.y0, row.x1, row.y0 + 1, ""};  // the row's first pixel line
        return static_cast<double>(count_in(image, line, test)) / static_cast<double>(row.x1 - row.x0);
    };
    // The straggler computes most of the time; a typical rank waits most of it.
    EXPECT_GT(share(rows.front(), is_compute), 0.4);
    EXPECT_LT(share(rows.front(), is_wait_red), 0.2);
    for (std::size_t i : {std::size_t{1}, std::size_t{300}, std::size_t{1023}}) {
        EXPECT_GT(share(rows[i], is_wait_red), 0.4) << "row " << i;
        EXPECT_LT(share(rows[i], is_compute), 0.4) << "row " << i;
    }
    // The selected collective: white pixels on nearly every row.
    int outlined = 0;
    for (const LaneBox& row : rows)
        outlined += count_in(image, {0, row.x0, row.y0, row.x1, row.y0 + 1, ""},
                             [](std::uint32_t c) { return near(c, colors::kSelection, 10); }) > 0;
    EXPECT_GT(outlined, 1000);
}

// A profiler trace with GPU [memory] events: a click on its memory lane lists the live
// blocks in the details panel (the largest opened: its op, line and time).
TEST_F(ScreenshotTest, MemoryLaneClickListsTheLiveBlocks) {
    const test_support::TempDir dir("ember-memory-shot");
    const std::string kineto = dir.path("memory.json");
    {
        std::ofstream out(kineto);
        out << R"({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 110, "dur": 10},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 300, "dur": 100},
  {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 115,
   "args": {"Addr": 4096, "Bytes": 8388608, "Total Allocated": 8388608, "Total Reserved": 20971520,
            "Device Type": 1, "Device Id": 0}},
  {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 310,
   "args": {"Addr": 8192, "Bytes": 2097152, "Total Allocated": 10485760, "Total Reserved": 20971520,
            "Device Type": 1, "Device Id": 0}}]})";
    }
    const std::string plain = dir.path("plain.png"), clicked = dir.path("clicked.png");
    std::string output;
    ASSERT_EQ(run(viewer(kineto + " --screenshot " + plain + " --size 1400x700"), &output), 0) << output;
    ASSERT_EQ(run(viewer(kineto + " --screenshot " + clicked + " --size 1400x700 --memory-at 250us"), &output), 0)
        << output;
    Image before, after;
    ASSERT_TRUE(read_png(plain, before));
    ASSERT_TRUE(read_png(clicked, after));
    ASSERT_EQ(before.rgba.size(), after.rgba.size());
    int changed = 0;
    for (int y = 0; y < after.height; ++y)
        for (int x = 0; x < after.width; ++x) changed += before.pixel(x, y) != after.pixel(x, y) ? 1 : 0;
    EXPECT_GT(changed, 2000);  // the details panel's lines and the live blocks
    // A trace without memory events: a message, not a picture of something else.
    EXPECT_EQ(run(viewer(trace_ + " --screenshot " + png_ + " --memory-at 1us"), &output), 2);
    EXPECT_NE(output.find("no GPU memory lane"), std::string::npos) << output;
}

TEST_F(ScreenshotTest, BadFilesEndWithAMessage) {
    const std::string foreign = testing::temporary_trace_path("foreign");
    {
        std::ofstream out(foreign);
        out << "not a trace\n";
    }
    std::string output;
    EXPECT_EQ(run(viewer(foreign + " --screenshot " + png_), &output), 2);
    EXPECT_NE(output.find(foreign), std::string::npos) << output;
    EXPECT_EQ(run(viewer("/nonexistent/trace.db --screenshot " + png_), &output), 2);
    EXPECT_NE(output.find("/nonexistent/trace.db"), std::string::npos) << output;
    std::filesystem::remove(foreign);
    // No display at all: a clear message and a non-crash exit code.
    EXPECT_EQ(run(std::string("env -u DISPLAY ") + EMBER_VIEW_PATH + " " + trace_, &output), 3);
    EXPECT_NE(output.find("no display"), std::string::npos) << output;
}

TEST_F(ScreenshotTest, AttachFindsTheFileAProcessHasOpen) {
    // A stand-in for a recording process: a shell holding the trace open on fd 3.
    FILE* child = popen(("sleep 30 3<" + trace_ + " > /dev/null 2>&1 & echo $!").c_str(), "r");
    ASSERT_NE(child, nullptr);
    long long pid = 0;
    ASSERT_EQ(std::fscanf(child, "%lld", &pid), 1);
    pclose(child);
    std::string output;
    EXPECT_EQ(run(viewer("--attach " + std::to_string(pid) + " --screenshot " + png_ + " --size 800x500"), &output), 0)
        << output;
    Image image;
    EXPECT_TRUE(read_png(png_, image));
    run("kill " + std::to_string(pid), nullptr);
    // A process without a trace: a clear message.
    EXPECT_EQ(run(viewer("--attach " + std::to_string(::getpid()) + " --screenshot " + png_), &output), 2);
    EXPECT_NE(output.find("no SQLite trace file open"), std::string::npos) << output;
}

}  // namespace
}  // namespace ember::viewer

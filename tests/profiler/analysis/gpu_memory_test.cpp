// The gpu_memory report (gpu_memory.h) on a hand-built trace whose answers are known:
// two steps, memory allocated before the trace began, a block freed in one step and
// its bytes released only at free_completed, segments, an OOM, and the allocator state.
#include "profiler/analysis/advice.h"
#include "profiler/analysis/gpu_memory.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/store/reader.h"
#include "tests/support/trace_builder.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace {

using namespace ember;
using trace::MemoryAction;
using trace::TimeNs;

constexpr TimeNs kOrigin = 1'000'000'000;
constexpr TimeNs us(TimeNs micros) {
    return kOrigin + micros * 1000;
}
constexpr std::int64_t MiB = 1 << 20;

class GpuMemoryTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = test_support::unique_temp_path("gpu_memory", ".db").string();
        ember::testing::TraceBuilder b(path_, ember::testing::TraceBuilder::run_info(kOrigin));
        store::TraceWriter& w = b.writer();
        const trace::ThreadId main = b.thread("main");
        b.range(main, "", "ProfilerStep#1", us(10), us(100));
        b.range(main, "", "ProfilerStep#2", us(100), us(200));
        b.range(main, "", "forward", us(110), us(150), 0, 1);
        const trace::FrameId module = w.intern_frame("<module>", "/home/user/train.py", 0, 3);
        const trace::FrameId forward = w.intern_frame("forward", "/home/user/model.py", 0, 21);
        const trace::FrameId linear =
            w.intern_frame("forward", "/usr/lib/python3/dist-packages/torch/nn/linear.py", 0, 114);
        const trace::FrameId malloc = w.intern_frame("c10::cuda::CUDACachingAllocator::Native::malloc()", "", 0);
        const trace::FrameId model_frames[] = {module, forward, linear, malloc};
        model_stack_ = w.intern_stack(model_frames);
        const ember::testing::MemoryContext model{.stack = model_stack_};
        b.memory(us(1), MemoryAction::segment_live_at_start, 0x1000000, 64 * MiB);
        b.memory(us(1), MemoryAction::live_at_start, 0x1000000, 8 * MiB);
        b.memory(us(20), MemoryAction::alloc, 0x2000000, 4 * MiB, model);           // step 1
        b.memory(us(30), MemoryAction::free_requested, 0x2000000, 4 * MiB, model);  // still counted
        b.memory(us(40), MemoryAction::segment_alloc, 0x8000000, 32 * MiB);
        b.memory(us(120), MemoryAction::alloc, 0x8000000, 16 * MiB, model);  // step 2: the peak, 28 MiB
        b.memory(us(130), MemoryAction::free_completed, 0x2000000, 4 * MiB, model);
        b.memory(us(140), MemoryAction::oom, 0, 512 * MiB, {.stack = model_stack_, .device_free = 3 * MiB});
        b.memory(us(160), MemoryAction::free_completed, 0x8000000, 16 * MiB, model);
        b.memory(us(170), MemoryAction::segment_free, 0x8000000, 32 * MiB);
        trace::MemoryBlock free_block;
        free_block.time_ns = us(170);
        free_block.state = trace::MemoryBlockState::inactive;
        free_block.segment_address = 0x1000000;
        free_block.segment_bytes = 64 * MiB;
        free_block.address = 0x1800000;
        free_block.bytes = 56 * MiB;
        ASSERT_TRUE(w.record_memory_block(free_block));
        b.close();
    }
    void TearDown() override { std::filesystem::remove(path_); }

    std::string path_;
    trace::StackId model_stack_ = 0;
};

TEST_F(GpuMemoryTest, PeaksWhenAndWhere) {
    store::TraceReader reader(path_);
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    ASSERT_EQ(report.devices.size(), 1u);
    const analysis::GpuMemoryDevice& d = report.devices[0];
    EXPECT_EQ(d.peak_allocated_bytes, 28 * MiB);  // 8 before the trace + 4 (freed only at 130 us) + 16
    EXPECT_EQ(d.peak_allocated_ns, us(120));
    EXPECT_EQ(d.peak_step, "step 2");
    EXPECT_EQ(d.peak_range, "forward");
    EXPECT_EQ(d.peak_reserved_bytes, 96 * MiB);
    EXPECT_EQ(d.peak_reserved_ns, us(40));
    EXPECT_EQ(d.reserved_at_peak_bytes, 96 * MiB);
    EXPECT_EQ(d.allocated_before_trace_bytes, 8 * MiB);
    EXPECT_EQ(d.largest_free_block_bytes, 56 * MiB);
    EXPECT_EQ(d.live_blocks_at_peak, 3);
    // By line: the program's own frame (model.py), not the installed package's.
    ASSERT_EQ(d.at_peak_by_line.size(), 2u);
    EXPECT_EQ(d.at_peak_by_line[0].place, "forward (/home/user/model.py:21)");
    EXPECT_EQ(d.at_peak_by_line[0].bytes, 20 * MiB);
    EXPECT_EQ(d.at_peak_by_line[0].blocks, 2);
    EXPECT_EQ(d.at_peak_by_line[1].place, "(allocated before the trace began)");
    EXPECT_TRUE(d.at_peak_by_op.empty());  // no event names its thread
    EXPECT_EQ(d.at_peak_by_line[0].largest_block_bytes, 16 * MiB);
    EXPECT_EQ(d.at_peak_by_stack[0].place,
              "<module> (/home/user/train.py:3);forward (/home/user/model.py:21);"
              "forward (/usr/lib/python3/dist-packages/torch/nn/linear.py:114)");
    // Churn per step.
    ASSERT_EQ(d.churn.size(), 2u);
    EXPECT_EQ(d.churn[0].step, "step 1");
    EXPECT_EQ(d.churn[0].allocs, 1);
    EXPECT_EQ(d.churn[0].frees, 0);
    EXPECT_EQ(d.churn[1].step, "step 2");
    EXPECT_EQ(d.churn[1].allocs, 1);
    EXPECT_EQ(d.churn[1].frees, 2);
    EXPECT_EQ(d.churn[1].freed_bytes, 20 * MiB);
    // The OOM: 24 MiB live (8 + 16), none releasable.
    ASSERT_EQ(d.ooms.size(), 1u);
    EXPECT_EQ(d.ooms[0].request_bytes, 512 * MiB);
    EXPECT_EQ(d.ooms[0].device_free_bytes, 3 * MiB);
    EXPECT_EQ(d.ooms[0].allocated_bytes, 24 * MiB);
    EXPECT_EQ(d.ooms[0].live_blocks, 2);
}

TEST_F(GpuMemoryTest, JsonRowsCarryTheDeviceAndItsPeaks) {
    store::TraceReader reader(path_);
    analysis::StatsOptions options;
    options.reports = {"gpu_memory"};
    options.format = analysis::OutputFormat::json;
    std::ostringstream out;
    analysis::write_stats(out, reader, options);
    const nlohmann::json document = nlohmann::json::parse(out.str());
    const nlohmann::json& row = document["reports"]["gpu_memory"][0];
    EXPECT_EQ(row["device"], 0);
    EXPECT_EQ(row["peak_allocated_bytes"], 28 * MiB);
    EXPECT_EQ(row["peak_reserved_bytes"], 96 * MiB);
    EXPECT_EQ(row["peak_allocated_at_ns"], 120'000);
    EXPECT_EQ(document["reports"]["gpu_memory_oom"][0]["request_bytes"], 512 * MiB);
}

// Blocks allocated by named threads: each is the op's open on its thread then. Worked out
// by hand from the ranges below (µs; depth in brackets):
//   main:   ProfilerStep#1 [0,1000) (0); layer1 [100,300) (1); aten::linear [110,200) (2);
//           aten::empty [120,130) (3); layer2 [300,600) (1); aten::empty [310,320) (2);
//           layer3 [600,700) (1); aten::mm [600,650) (2); an async range [0,1000) (-1)
//   loader: prefetch [50,900) (0)        idle: no ranges
// allocations: 4 MiB before the trace; A 8 MiB at 125 main (inside aten::empty inside
// aten::linear: aten::linear); B 2 MiB at 150 main (aten::linear); G 1 MiB at 300 main
// (layer1 ended, layer2 began: layer2); C 16 MiB at 315 main (aten::empty under layer2:
// layer2); D 1 MiB at 400 loader (prefetch); H 2 MiB at 600 main (layer3 and aten::mm
// both begin: aten::mm); E 3 MiB at 700 idle (none open); F 5 MiB at 710, no thread.
// The peak is at 710: 42 MiB in 9 blocks; B is freed at 800.
class GpuMemoryOpsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = test_support::unique_temp_path("gpu_memory_ops", ".db").string();
        ember::testing::TraceBuilder b(path_, ember::testing::TraceBuilder::run_info(kOrigin));
        main_ = b.thread("main");
        loader_ = b.thread("loader");
        idle_ = b.thread("idle");
        b.range(main_, "", "ProfilerStep#1", us(0), us(1000));
        b.range(main_, "", "layer1", us(100), us(300), 0, 1);
        b.range(main_, "", "aten::linear", us(110), us(200), 0, 2);
        b.range(main_, "", "aten::empty", us(120), us(130), 0, 3);
        b.range(main_, "", "layer2", us(300), us(600), 0, 1);
        b.range(main_, "", "aten::empty", us(310), us(320), 0, 2);
        b.range(main_, "", "aten::mm", us(600), us(650), 0, 2);  // recorded before its parent
        b.range(main_, "", "layer3", us(600), us(700), 0, 1);
        b.range(main_, "", "async", us(0), us(1000), 0, -1);
        b.range(loader_, "", "prefetch", us(50), us(900));
        b.memory(us(1), MemoryAction::live_at_start, 0x10, 4 * MiB);
        b.memory(us(125), MemoryAction::alloc, 0x100, 8 * MiB, {.thread = main_});
        b.memory(us(150), MemoryAction::alloc, 0x200, 2 * MiB, {.thread = main_});
        b.memory(us(300), MemoryAction::alloc, 0x700, 1 * MiB, {.thread = main_});
        b.memory(us(315), MemoryAction::alloc, 0x300, 16 * MiB, {.thread = main_});
        b.memory(us(400), MemoryAction::alloc, 0x400, 1 * MiB, {.thread = loader_});
        b.memory(us(600), MemoryAction::alloc, 0x800, 2 * MiB, {.thread = main_});
        b.memory(us(700), MemoryAction::alloc, 0x500, 3 * MiB, {.thread = idle_});
        b.memory(us(710), MemoryAction::alloc, 0x600, 5 * MiB);
        b.memory(us(800), MemoryAction::free_completed, 0x200, 2 * MiB, {.thread = main_});
        b.close();
    }
    void TearDown() override { std::filesystem::remove(path_); }

    std::string path_;
    trace::ThreadId main_ = 0, loader_ = 0, idle_ = 0;
};

TEST_F(GpuMemoryOpsTest, LiveAtThePeakByAllocatingOp) {
    store::TraceReader reader(path_);
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    ASSERT_EQ(report.devices.size(), 1u);
    const analysis::GpuMemoryDevice& d = report.devices[0];
    EXPECT_EQ(d.peak_allocated_bytes, 42 * MiB);
    EXPECT_EQ(d.peak_allocated_ns, us(710));
    EXPECT_EQ(d.live_blocks_at_peak, 9);
    struct Want {
        const char* place;
        std::int64_t blocks, bytes, largest;
    };
    const Want want[] = {{"layer2", 2, 17 * MiB, 16 * MiB},
                         {"aten::linear", 2, 10 * MiB, 8 * MiB},
                         {analysis::kNoThreadRecorded, 1, 5 * MiB, 5 * MiB},
                         {analysis::kAllocatedBeforeTrace, 1, 4 * MiB, 4 * MiB},
                         {analysis::kNoOpOpen, 1, 3 * MiB, 3 * MiB},
                         {"aten::mm", 1, 2 * MiB, 2 * MiB},
                         {"prefetch", 1, 1 * MiB, 1 * MiB}};
    ASSERT_EQ(d.at_peak_by_op.size(), std::size(want));
    for (std::size_t i = 0; i < std::size(want); ++i) {
        EXPECT_EQ(d.at_peak_by_op[i].place, want[i].place) << i;
        EXPECT_EQ(d.at_peak_by_op[i].blocks, want[i].blocks) << want[i].place;
        EXPECT_EQ(d.at_peak_by_op[i].bytes, want[i].bytes) << want[i].place;
        EXPECT_EQ(d.at_peak_by_op[i].largest_block_bytes, want[i].largest) << want[i].place;
    }
}

TEST_F(GpuMemoryOpsTest, EachLiveBlockNamesItsOpAsTheOneBlockLookupDoes) {
    store::TraceReader reader(path_);
    const analysis::GpuMemoryAt at = analysis::gpu_memory_at(reader, 0, us(900), 100);
    EXPECT_EQ(at.allocated_bytes, 40 * MiB);  // B freed at 800
    ASSERT_EQ(at.blocks.size(), 8u);
    EXPECT_EQ(at.blocks[0].address, 0x300u);  // the largest first
    EXPECT_EQ(at.blocks[0].op, "layer2");
    EXPECT_EQ(at.blocks[0].alloc_ns, us(315));
    EXPECT_EQ(at.blocks[0].thread_id, main_);
    for (const analysis::GpuMemoryBlock& block : at.blocks) {
        // The batch answer (one pass over the thread's ranges) and the single lookup
        // (the ranges overlapping the instant) agree.
        const std::optional<trace::RangeEvent> single =
            analysis::allocating_range(reader, block.thread_id, block.alloc_ns);
        ASSERT_EQ(single.has_value(), block.op_range.has_value()) << block.address;
        if (single) {
            EXPECT_EQ(single->range_id, block.op_range->range_id) << block.address;
            EXPECT_EQ(reader.string(single->name_id), block.op) << block.address;
        }
    }
    EXPECT_FALSE(analysis::allocating_range(reader, idle_, us(700)));
    // Only the helper open: it is the op.
    EXPECT_EQ(reader.string(analysis::allocating_range(reader, main_, us(125))->name_id), "aten::linear");
    std::set<std::string> ops;
    for (const analysis::GpuMemoryPlace& place : at.by_op) ops.insert(place.place);
    EXPECT_EQ(ops.count("aten::empty"), 0u);
}

TEST_F(GpuMemoryOpsTest, OpRowsInTextJsonAndCsv) {
    store::TraceReader reader(path_);
    analysis::StatsOptions options;
    options.reports = {"gpu_memory"};
    options.format = analysis::OutputFormat::json;
    std::ostringstream json;
    analysis::write_stats(json, reader, options);
    const nlohmann::json document = nlohmann::json::parse(json.str());
    const nlohmann::json& rows = document["reports"]["gpu_memory_at_peak_by_op"];
    ASSERT_EQ(rows.size(), 7u);
    EXPECT_EQ(rows[0]["place"], "layer2");
    EXPECT_EQ(rows[0]["bytes"], 17 * MiB);
    EXPECT_EQ(rows[0]["largest_block_bytes"], 16 * MiB);
    EXPECT_EQ(document["reports"]["gpu_memory"][0]["peak_step"], "step 1");
    options.format = analysis::OutputFormat::csv;
    std::ostringstream csv;
    analysis::write_stats(csv, reader, options);
    EXPECT_NE(csv.str().find("# gpu_memory_at_peak_by_op"), std::string::npos) << csv.str();
    EXPECT_NE(csv.str().find("aten::linear"), std::string::npos);
    options.format = analysis::OutputFormat::text;
    std::ostringstream text;
    analysis::write_stats(text, reader, options);
    EXPECT_NE(text.str().find("by allocating op"), std::string::npos) << text.str();
}

// The advice the memory report leads to, by topic.
std::map<std::string, std::vector<analysis::AdviceItem>> memory_advice(const std::string& path,
                                                                       const analysis::RunSettings& settings = {}) {
    store::TraceReader reader(path);
    std::vector<analysis::AdviceItem> items;
    analysis::advise_gpu_memory(analysis::gpu_memory(reader), settings, items);
    std::map<std::string, std::vector<analysis::AdviceItem>> by_topic;
    for (analysis::AdviceItem& item : items) by_topic[item.topic].push_back(std::move(item));
    return by_topic;
}

TEST_F(GpuMemoryOpsTest, AdviceNamesTheOpHoldingMuchOfThePeak) {
    // layer2 holds 17 of 42 MiB (40%) in 2 blocks, the largest 16 MiB: recomputing it
    // would keep that block, so the peak would fall by about 1 MiB.
    auto by_topic = memory_advice(path_);
    ASSERT_EQ(by_topic["gpu_memory_holder"].size(), 1u);
    const analysis::AdviceItem& item = by_topic["gpu_memory_holder"][0];
    EXPECT_EQ(item.finding,
              "on GPU 0, blocks allocated in `layer2` hold 40% of the allocated peak (17.0 MiB of 42.0 MiB, 2 blocks, "
              "the largest 16.0 MiB)");
    EXPECT_NE(item.advice.find("cut the peak by about 1.0 MiB"), std::string::npos) << item.advice;
    EXPECT_NE(item.advice.find("activation checkpointing on that block"), std::string::npos) << item.advice;
    EXPECT_FALSE(item.recoverable_ns);
    EXPECT_EQ(by_topic.count("gpu_memory_fragmentation"), 0u);  // nothing reserved
    EXPECT_EQ(by_topic.count("gpu_memory_oom"), 0u);
    // A run that already checkpoints is told so.
    analysis::RunSettings settings = analysis::parse_run_settings("[switches]\nactivation_checkpointing = true\n");
    const analysis::AdviceItem applied = memory_advice(path_, settings)["gpu_memory_holder"].at(0);
    EXPECT_NE(applied.advice.find("already"), std::string::npos) << applied.advice;
    // Through `ember stats --report advice`.
    store::TraceReader reader(path_);
    analysis::StatsOptions options;
    options.reports = {"advice"};
    options.format = analysis::OutputFormat::json;
    std::ostringstream out;
    analysis::write_stats(out, reader, options);
    EXPECT_NE(out.str().find("gpu_memory_holder"), std::string::npos) << out.str();
}

// A trace of device-0 memory events: (time µs, action, address, bytes, device free,
// allocated by the thread "main" or by no thread named), and with `ops`, ops op0, op1, ...
// of 10 µs each on "main", one after the other from 0.
struct Ev {
    TimeNs micros;
    MemoryAction action;
    std::uint64_t address;
    std::int64_t bytes;
    std::int64_t device_free = -1;
    bool on_main = false;
};
std::string memory_trace(const char* name, std::initializer_list<Ev> events, int ops = 0) {
    const std::string path = test_support::unique_temp_path(name, ".db").string();
    ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(kOrigin));
    const trace::ThreadId main = b.thread("main");
    for (int i = 0; i < ops; ++i) b.range(main, "", ("op" + std::to_string(i)).c_str(), us(10 * i), us(10 * i + 10));
    for (const Ev& ev : events)
        b.memory(us(ev.micros), ev.action, ev.address, ev.bytes,
                 {.thread = ev.on_main ? main : 0, .device_free = ev.device_free});
    b.close();
    return path;
}

TEST(GpuMemoryAdvice, NoHolderAdviceWhenNoOpHoldsAQuarterOrItIsOneBlock) {
    // Five ops of 2 blocks of 5 MiB each: 20% each.
    const std::string spread = memory_trace("advice_spread",
                                            {{1, MemoryAction::alloc, 0x1, 5 * MiB, -1, true},
                                             {2, MemoryAction::alloc, 0x2, 5 * MiB, -1, true},
                                             {11, MemoryAction::alloc, 0x3, 5 * MiB, -1, true},
                                             {12, MemoryAction::alloc, 0x4, 5 * MiB, -1, true},
                                             {21, MemoryAction::alloc, 0x5, 5 * MiB, -1, true},
                                             {22, MemoryAction::alloc, 0x6, 5 * MiB, -1, true},
                                             {31, MemoryAction::alloc, 0x7, 5 * MiB, -1, true},
                                             {32, MemoryAction::alloc, 0x8, 5 * MiB, -1, true},
                                             {41, MemoryAction::alloc, 0x9, 5 * MiB, -1, true},
                                             {42, MemoryAction::alloc, 0xa, 5 * MiB, -1, true}},
                                            5);
    EXPECT_EQ(memory_advice(spread).count("gpu_memory_holder"), 0u);
    std::filesystem::remove(spread);
    // op0 holds 60 of 80 MiB, in one block: recomputation would still need it.
    const std::string single = memory_trace("advice_single",
                                            {{1, MemoryAction::alloc, 0x1, 60 * MiB, -1, true},
                                             {11, MemoryAction::alloc, 0x2, 10 * MiB, -1, true},
                                             {21, MemoryAction::alloc, 0x3, 10 * MiB, -1, true}},
                                            3);
    store::TraceReader reader(single);
    EXPECT_EQ(analysis::gpu_memory(reader).devices.at(0).at_peak_by_op.at(0).place, "op0");
    EXPECT_EQ(memory_advice(single).count("gpu_memory_holder"), 0u);
    std::filesystem::remove(single);
    // No stacks, no threads: every block is "(no stack recorded)", which names no place.
    const std::string unnamed = memory_trace(
        "advice_unnamed", {{1, MemoryAction::alloc, 0x1, 8 * MiB}, {2, MemoryAction::alloc, 0x2, 8 * MiB}});
    EXPECT_EQ(memory_advice(unnamed).count("gpu_memory_holder"), 0u);
    std::filesystem::remove(unnamed);
}

TEST(GpuMemoryAdvice, APeakOutsideTheTrainingStepsIsNotForCheckpointing) {
    // A training step [0, 10) µs, then "evaluate" [10, 20) µs on the same thread: the
    // evaluation holds 40 of 44 MiB in two blocks at the peak, outside every step.
    const std::string path = test_support::unique_temp_path("advice_outside_steps", ".db").string();
    {
        ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(kOrigin));
        const trace::ThreadId main = b.thread("main");
        b.range(main, "", "step", us(0), us(10));
        b.range(main, "", "forward", us(1), us(9));
        b.range(main, "", "evaluate", us(10), us(20));
        b.memory(us(2), MemoryAction::alloc, 0x1, 4 * MiB, {.thread = main});  // forward, inside the step
        b.memory(us(11), MemoryAction::alloc, 0x2, 20 * MiB, {.thread = main});
        b.memory(us(12), MemoryAction::alloc, 0x3, 20 * MiB, {.thread = main});
        b.close();
    }
    store::TraceReader reader(path);
    const analysis::GpuMemoryReport report = analysis::gpu_memory(reader);
    EXPECT_TRUE(report.has_steps);
    ASSERT_EQ(report.devices.size(), 1u);
    EXPECT_EQ(report.devices[0].peak_step, "");
    auto by_topic = memory_advice(path);
    ASSERT_EQ(by_topic["gpu_memory_holder"].size(), 1u);
    const analysis::AdviceItem& item = by_topic["gpu_memory_holder"][0];
    EXPECT_EQ(item.finding,
              "on GPU 0, blocks allocated in `evaluate` hold 91% of the allocated peak (40.0 MiB of 44.0 MiB, 2 "
              "blocks, the largest 20.0 MiB)");
    EXPECT_NE(item.advice.find("outside the training steps (in `evaluate`)"), std::string::npos) << item.advice;
    EXPECT_EQ(item.advice.find("activation checkpointing on that block"), std::string::npos) << item.advice;
    std::filesystem::remove(path);
}

TEST(GpuMemoryAdvice, TheHostIsNamedAsTheHost) {
    EXPECT_EQ(analysis::memory_device_text(trace::kNoDevice), "the host");
    EXPECT_EQ(analysis::memory_device_text(3), "GPU 3");
}

TEST_F(GpuMemoryTest, AdviceByLineWhenNoThreadIsRecorded) {
    // By line (no threads): model.py:21 holds 20 of 28 MiB in 2 blocks, the largest 16.
    auto by_topic = memory_advice(path_);
    ASSERT_EQ(by_topic["gpu_memory_holder"].size(), 1u);
    EXPECT_NE(by_topic["gpu_memory_holder"][0].finding.find("`forward (/home/user/model.py:21)` hold 71%"),
              std::string::npos)
        << by_topic["gpu_memory_holder"][0].finding;
    EXPECT_NE(by_topic["gpu_memory_holder"][0].advice.find("about 4.0 MiB"), std::string::npos);
    // 68 MiB reserved and unused at the peak: 71% of it, but under 256 MiB.
    EXPECT_EQ(by_topic.count("gpu_memory_fragmentation"), 0u);
    // The OOM: 512 MiB asked, 3 MiB free on the device, 72 MiB reserved and unused
    // (96 reserved, 24 allocated): 437 MiB short.
    ASSERT_EQ(by_topic["gpu_memory_oom"].size(), 1u);
    const analysis::AdviceItem& oom = by_topic["gpu_memory_oom"][0];
    EXPECT_EQ(oom.finding,
              "on GPU 0, an allocation of 512.0 MiB failed with 3.0 MiB free on the device; 24.0 MiB in 2 live "
              "blocks, 96.0 MiB reserved; the most held by `forward (/home/user/model.py:21)` (16.0 MiB)");
    EXPECT_NE(oom.advice.find("437.0 MiB more than was reserved-but-unused and free on the device"), std::string::npos)
        << oom.advice;
}

TEST(GpuMemoryAdvice, ReservedButUnusedAtThePeak) {
    // 1 GiB reserved, 256 MiB allocated at the peak: 768 MiB (75%) unused.
    const std::string loose = memory_trace(
        "advice_loose", {{1, MemoryAction::segment_alloc, 0x0, 1024 * MiB}, {2, MemoryAction::alloc, 0x1, 256 * MiB}});
    auto by_topic = memory_advice(loose);
    ASSERT_EQ(by_topic["gpu_memory_fragmentation"].size(), 1u);
    EXPECT_EQ(by_topic["gpu_memory_fragmentation"][0].finding,
              "on GPU 0, 768.0 MiB of the 1.0 GiB reserved at the allocated peak held no live block (75%)");
    EXPECT_NE(by_topic["gpu_memory_fragmentation"][0].advice.find("expandable_segments:True"), std::string::npos);
    std::filesystem::remove(loose);
    // 1 GiB reserved, 800 MiB allocated: 224 MiB unused (22%): no advice.
    const std::string tight = memory_trace(
        "advice_tight", {{1, MemoryAction::segment_alloc, 0x0, 1024 * MiB}, {2, MemoryAction::alloc, 0x1, 800 * MiB}});
    EXPECT_EQ(memory_advice(tight).count("gpu_memory_fragmentation"), 0u);
    std::filesystem::remove(tight);
}

TEST(GpuMemoryAdvice, AnOomTheReservedMemoryCouldHaveServed) {
    // 1 GiB reserved, 512 MiB live, 64 MiB asked: the memory was there, not in one piece.
    const std::string path = memory_trace("advice_oom", {{1, MemoryAction::segment_alloc, 0x0, 1024 * MiB},
                                                         {2, MemoryAction::alloc, 0x1, 512 * MiB},
                                                         {3, MemoryAction::oom, 0x0, 64 * MiB, 0}});
    auto by_topic = memory_advice(path);
    ASSERT_EQ(by_topic["gpu_memory_oom"].size(), 1u);
    EXPECT_NE(by_topic["gpu_memory_oom"][0].advice.find("512.0 MiB reserved but unused, more than the request"),
              std::string::npos)
        << by_topic["gpu_memory_oom"][0].advice;
    std::filesystem::remove(path);
}

TEST(GpuMemory, ATraceWithoutMemoryEventsSaysSo) {
    const std::string path = test_support::unique_temp_path("gpu_memory_none", ".db").string();
    {
        ember::testing::TraceBuilder b(path, ember::testing::TraceBuilder::run_info(kOrigin));
        b.range(b.thread("main"), "", "step", us(0), us(10));
        b.close();
    }
    store::TraceReader reader(path);
    EXPECT_TRUE(analysis::gpu_memory(reader).devices.empty());
    analysis::StatsOptions options;
    options.reports = {"gpu_memory"};
    std::ostringstream out;
    analysis::write_stats(out, reader, options);
    EXPECT_NE(out.str().find("no GPU memory events"), std::string::npos) << out.str();
    std::filesystem::remove(path);
}

}  // namespace

// export_test.cpp: every `ember export` format on the fixture trace, checked
// against the rules of its own specification (Trace Event Format, speedscope's
// file-format schema, folded stacks, SVG/XML, RFC 4180 CSV) and against the
// fixture's known numbers.
#include "profiler/export/chrome_trace.h"
#include "profiler/export/csv_tables.h"
#include "profiler/export/flamegraph_svg.h"
#include "profiler/export/folded_stacks.h"
#include "profiler/analysis/cpu_profile.h"
#include "profiler/export/json_text.h"
#include "profiler/trace/chrome_layout.h"
#include "profiler/export/perfetto_trace.h"
#include "profiler/export/pprof_profile.h"
#include "profiler/export/proto/perfetto_trace.pb.h"
#include "profiler/export/proto/pprof_profile.pb.h"
#include "profiler/export/speedscope.h"
#include "profiler/store/writer.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/read_file.h"
#include "tests/support/gunzip.h"
#include "tests/support/store.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

namespace ember::exporting {
namespace {

using nlohmann::json;

using ember::test_support::read_file;

// Each key of `expected` has its count in `counts` (which may hold other keys too).
template <typename Count>
void expect_counts(const std::map<std::string, Count>& counts, const std::map<std::string, Count>& expected) {
    for (const auto& [key, count] : expected) {
        auto found = counts.find(key);
        EXPECT_EQ(found == counts.end() ? Count{0} : found->second, count) << key;
    }
}

class Exports : public ::testing::Test {
  protected:
    // One fixture trace for the suite, in a folder of its own that goes with it.
    static void SetUpTestSuite() {
        folder_ = std::make_unique<test_support::TempDir>("ember-export-test");
        ember::testing::write_fixture_trace(trace());
    }
    static void TearDownTestSuite() { folder_.reset(); }
    static std::string trace() { return folder_->path("fixture.db"); }

    // What `write(reader, out)` exports of the trace at `path` (the fixture by default).
    template <typename Write>
    static std::string exported(Write write, const std::string& path = trace()) {
        const std::string out_path = folder_->path("export.out");
        {
            store::TraceReader reader(path);
            OutputFile out(out_path);
            write(reader, out);
            out.close();
        }
        std::string text = read_file(out_path);
        std::remove(out_path.c_str());
        return text;
    }
    inline static std::unique_ptr<test_support::TempDir> folder_;
};

TEST(JsonText, EscapesAndMicroseconds) {
    std::string out;
    append_json_string(out, "a\"b\\c\n\x01");
    EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\"");
    EXPECT_EQ(json::parse(out).get<std::string>(), "a\"b\\c\n\x01");
    out.clear();
    append_microseconds(out, 1234567);
    out += ' ';
    append_microseconds(out, -1500);
    out += ' ';
    append_microseconds(out, 7);
    EXPECT_EQ(out, "1234.567 -1.500 0.007");
}

// --- Chrome Trace Event Format --------------------------------------------------------

TEST_F(Exports, ChromeTraceIsWellFormedWithPairedFlows) {
    json document = json::parse(exported([](auto& reader, auto& out) { export_chrome_trace(reader, out); }));
    ASSERT_TRUE(document["traceEvents"].is_array());
    EXPECT_EQ(document["displayTimeUnit"], "ns");
    std::map<std::string, int> phases;
    struct Slice {
        double ts, dur;
        std::string cat;
    };
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Slice>> slices;  // (pid, tid)
    std::map<std::int64_t, std::vector<json>> flow_starts, flow_ends, async_begins, async_ends;
    for (const json& event : document["traceEvents"]) {
        ASSERT_TRUE(event.contains("ph") && event["ph"].is_string()) << event;
        ASSERT_TRUE(event["pid"].is_number_integer()) << event;
        ASSERT_TRUE(event["tid"].is_number_integer()) << event;
        ASSERT_TRUE(event["name"].is_string()) << event;
        std::string ph = event["ph"];
        ++phases[ph];
        if (ph != "M") {
            ASSERT_TRUE(event["ts"].is_number()) << event;
        }
        if (ph == "X") {
            ASSERT_TRUE(event["dur"].is_number()) << event;
            ASSERT_GE(event["dur"].get<double>(), 0.0) << event;
            slices[{event["pid"], event["tid"]}].push_back({event["ts"], event["dur"], event["cat"]});
        } else if (ph == "s" || ph == "f") {
            ASSERT_TRUE(event["id"].is_number_integer()) << event;
            (ph == "s" ? flow_starts : flow_ends)[event["id"]].push_back(event);
            if (ph == "f") {
                EXPECT_EQ(event["bp"], "e");
            }
        } else if (ph == "b" || ph == "e") {
            (ph == "b" ? async_begins : async_ends)[event["id"]].push_back(event);
        } else if (ph == "C") {
            ASSERT_TRUE(event["args"]["value"].is_number()) << event;
        } else if (ph == "M") {
            ASSERT_TRUE(event["args"].is_object()) << event;
        } else {
            EXPECT_EQ(ph, "i");
        }
    }
    // "X": 6 kernels + 3 memcpys + 1 memset + 1 sync + 10 API calls + 9 push/pop ranges.
    // Every GPU operation with a launching call (5 kernels, 3 memcpys, 1 memset) has a
    // flow start "s" and finish "f".
    expect_counts(phases, {{"X", 30}, {"C", 2}, {"i", 1}, {"b", 1}, {"e", 1}, {"s", 9}, {"f", 9}});
    auto encloses = [&](const json& point, const char* cat) {
        for (const Slice& slice : slices[{point["pid"], point["tid"]}]) {
            double ts = point["ts"];
            if (slice.cat == cat && slice.ts <= ts + 1e-9 && ts <= slice.ts + slice.dur + 1e-9) return true;
        }
        return false;
    };
    for (const auto& [id, starts] : flow_starts) {
        ASSERT_EQ(starts.size(), 1u) << id;
        ASSERT_EQ(flow_ends[id].size(), 1u) << id;
        const json& start = starts[0];
        const json& end = flow_ends[id][0];
        EXPECT_TRUE(encloses(start, "cuda_api")) << start;
        EXPECT_LE(start["ts"].get<double>(), end["ts"].get<double>()) << start;
        EXPECT_EQ(end["pid"], trace::chrome::gpu_pid(0));
        EXPECT_TRUE(encloses(end, "kernel") || encloses(end, "memcpy") || encloses(end, "memset")) << end;
    }
    EXPECT_EQ(flow_ends.size(), flow_starts.size());
    for (const auto& [id, begins] : async_begins) {
        ASSERT_EQ(begins.size(), 1u);
        ASSERT_EQ(async_ends[id].size(), 1u);
        EXPECT_EQ(begins[0]["name"], "epoch");
        EXPECT_DOUBLE_EQ(begins[0]["ts"].get<double>(), -0.1);  // 900 ns, 100 before the run start
        EXPECT_DOUBLE_EQ(async_ends[id][0]["ts"].get<double>(), 4.1);
    }
    // Nested slices on a thread: properly nested (Trace Event Format "X" rule).
    for (auto& [track, list] : slices) {
        std::sort(list.begin(), list.end(),
                  [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur; });
        std::vector<double> ends;
        for (const Slice& slice : list) {
            while (!ends.empty() && ends.back() <= slice.ts + 1e-9) ends.pop_back();
            if (!ends.empty() && track.first != trace::chrome::gpu_pid(0)) {
                EXPECT_LE(slice.ts + slice.dur, ends.back() + 1e-9) << "overlapping slices on tid " << track.second;
            }
            ends.push_back(slice.ts + slice.dur);
        }
    }
    // The first gemm: [1300, 1400) ns is ts 0.3 us, dur 0.1 us, on stream 1 of GPU 0.
    bool found = false;
    for (const json& event : document["traceEvents"]) {
        if (event["ph"] == "X" && event["name"] == "gemm" && event["ts"] == 0.3) {
            EXPECT_EQ(event["dur"], 0.1);
            EXPECT_EQ(event["tid"], 1);
            EXPECT_EQ(event["args"]["grid"], json::array({128, 1, 1}));
            found = true;
        }
    }
    EXPECT_TRUE(found);
}

// --- speedscope ------------------------------------------------------------------------

// The rules of https://www.speedscope.app/file-format-schema.json plus the import
// rules speedscope enforces for evented profiles (non-decreasing times, a close
// matches the innermost open frame, nothing left open).
void validate_speedscope(const json& file) {
    ASSERT_EQ(file["$schema"], "https://www.speedscope.app/file-format-schema.json");
    ASSERT_TRUE(file["shared"]["frames"].is_array());
    std::size_t frame_count = file["shared"]["frames"].size();
    for (const json& frame : file["shared"]["frames"]) ASSERT_TRUE(frame["name"].is_string()) << frame;
    ASSERT_TRUE(file["profiles"].is_array());
    const std::set<std::string> units = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"};
    for (const json& profile : file["profiles"]) {
        ASSERT_TRUE(profile["name"].is_string());
        ASSERT_TRUE(units.count(profile["unit"].get<std::string>()));
        double start = profile["startValue"], end = profile["endValue"];
        ASSERT_LE(start, end);
        if (profile["type"] == "evented") {
            std::vector<std::int64_t> stack;
            double last = start;
            for (const json& event : profile["events"]) {
                std::string type = event["type"];
                ASSERT_TRUE(type == "O" || type == "C") << event;
                std::int64_t frame = event["frame"];
                ASSERT_GE(frame, 0);
                ASSERT_LT(static_cast<std::size_t>(frame), frame_count);
                double at = event["at"];
                ASSERT_GE(at, last) << "events out of order in " << profile["name"];
                ASSERT_LE(at, end);
                last = at;
                if (type == "O") {
                    stack.push_back(frame);
                } else {
                    ASSERT_FALSE(stack.empty()) << "close without open in " << profile["name"];
                    ASSERT_EQ(stack.back(), frame) << "close of a frame that is not innermost in " << profile["name"];
                    stack.pop_back();
                }
            }
            ASSERT_TRUE(stack.empty()) << "frames left open in " << profile["name"];
        } else {
            ASSERT_EQ(profile["type"], "sampled");
            ASSERT_EQ(profile["samples"].size(), profile["weights"].size());
            for (const json& sample : profile["samples"]) {
                for (const json& frame : sample) ASSERT_LT(frame.get<std::size_t>(), frame_count);
            }
        }
    }
}

TEST_F(Exports, SpeedscopeFollowsTheSchemaAndHoldsTheFixture) {
    json file = json::parse(exported([](auto& reader, auto& out) { export_speedscope(reader, out); }));
    validate_speedscope(file);
    ASSERT_EQ(file["profiles"].size(), 5u);  // 2 threads, 2 streams, GPU time by range
    auto frame_name = [&](const json& index) {
        return file["shared"]["frames"][index.get<std::size_t>()]["name"].get<std::string>();
    };

    const json& main_thread = file["profiles"][0];
    EXPECT_EQ(main_thread["name"], "thread main (tid 100)");
    EXPECT_EQ(main_thread["startValue"], 0);   // step opens at 1000 = run start
    EXPECT_EQ(main_thread["endValue"], 4210);  // last cudaLaunchKernel closes at 5210
    const json& first = main_thread["events"][0];
    EXPECT_EQ(first["type"], "O");
    EXPECT_EQ(frame_name(first["frame"]), "step");
    // 8 push/pop ranges + 10 API calls, each opened and closed once.
    EXPECT_EQ(main_thread["events"].size(), 2u * (8 + 10));

    const json& stream = file["profiles"][2];
    EXPECT_EQ(stream["name"], "GPU 0 stream 7 default");
    std::vector<std::string> opened;
    for (const json& event : stream["events"]) {
        if (event["type"] == "O") opened.push_back(frame_name(event["frame"]));
    }
    EXPECT_EQ(opened,
              (std::vector<std::string>{"gemm", "gemm", "Memcpy HtoD", "gemm", "Memcpy DtoH", "Memset", "relu"}));

    const json& by_range = file["profiles"][4];
    EXPECT_EQ(by_range["name"], kGpuTimeByRangeProfileName);
    std::map<std::string, std::int64_t> weights;
    std::int64_t total = 0;
    for (std::size_t i = 0; i < by_range["samples"].size(); ++i) {
        std::string stack;
        for (const json& frame : by_range["samples"][i]) stack += (stack.empty() ? "" : ";") + frame_name(frame);
        weights[stack] += by_range["weights"][i].get<std::int64_t>();
        total += by_range["weights"][i].get<std::int64_t>();
    }
    EXPECT_EQ(total, 810);
    EXPECT_EQ(by_range["endValue"], 810);
    expect_counts(weights, {{"step;forward;gemm", 400},
                            {"step;forward;relu", 50},
                            {"step;backward;gemm", 200},
                            {"(no range);relu", 60},
                            {"(no launching call);nccl_allreduce", 100}});
}

// --- folded stacks ----------------------------------------------------------------------

std::map<std::string, std::int64_t> parse_folded(const std::string& text) {
    std::map<std::string, std::int64_t> stacks;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        std::size_t space = line.rfind(' ');
        EXPECT_NE(space, std::string::npos) << line;
        std::string count = line.substr(space + 1);
        EXPECT_TRUE(std::regex_match(count, std::regex("[0-9]+"))) << line;
        EXPECT_FALSE(stacks.count(line.substr(0, space))) << "duplicate stack " << line;
        stacks[line.substr(0, space)] = std::stoll(count);
    }
    return stacks;
}

TEST_F(Exports, FoldedGpuStacksSumToKernelTime) {
    auto stacks = parse_folded(
        exported([](auto& reader, auto& out) { write_folded(build_stacks(reader, StackSource::gpu), out); }));
    std::int64_t total = 0;
    for (const auto& [stack, count] : stacks) total += count;
    EXPECT_EQ(total, 810);  // every kernel nanosecond once
    EXPECT_EQ(stacks.size(), 5u);
    EXPECT_EQ(stacks["step;forward;gemm"], 400);
}

TEST_F(Exports, FoldedHostStacksAreSelfTimes) {
    auto stacks = parse_folded(
        exported([](auto& reader, auto& out) { write_folded(build_stacks(reader, StackSource::host), out); }));
    std::int64_t total = 0;
    for (const auto& [stack, count] : stacks) total += count;
    // main: two steps (4000) + the launch after them (10); loader: 500.
    EXPECT_EQ(total, 4510);
    // step self time: 4000 - forward 1000 - backward 800 - dataloader/wait 600
    //   - allreduce/wait 300 - cudaMemcpy 100 - cudaMemsetAsync 5 - cudaStreamSynchronize 50.
    EXPECT_EQ(stacks["thread main (tid 100);step"], 1145);
    EXPECT_EQ(stacks["thread main (tid 100);step;forward;cudaLaunchKernel"], 30);
    EXPECT_EQ(stacks["thread main (tid 100);step;dataloader/wait;cudaMemcpy"], 100);
    EXPECT_EQ(stacks["thread loader (tid 101);dataloader/load"], 500);
}

// --- SVG flamegraph ---------------------------------------------------------------------

TEST_F(Exports, FlamegraphWidthsAddUp) {
    std::string svg = exported([](auto& reader, auto& out) {
        write_flamegraph_svg(build_stacks(reader, StackSource::gpu), FlamegraphOptions{}, out);
    });
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
    EXPECT_NE(svg.find("<script"), std::string::npos);
    std::regex frame_pattern(
        "<g class=\"frame\" data-node=\"(\\d+)\" data-parent=\"(-?\\d+)\" data-depth=\"(\\d+)\" data-weight=\"(\\d+)\" "
        "data-x=\"([0-9.]+)\" data-w=\"([0-9.]+)\" data-name=\"([^\"]*)\"><title>([^<]*)</title><rect x=\"[0-9.]+\" "
        "y=\"[0-9.]+\" width=\"([0-9.]+)\"");
    struct Frame {
        std::int64_t parent, weight;
        double x, width;
        std::string name, title;
    };
    std::map<std::int64_t, Frame> frames;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), frame_pattern); it != std::sregex_iterator(); ++it) {
        const std::smatch& m = *it;
        frames[std::stoll(m[1])] = {std::stoll(m[2]), std::stoll(m[4]), std::stod(m[5]), std::stod(m[6]), m[7], m[8]};
        EXPECT_DOUBLE_EQ(std::stod(m[6]), std::stod(m[9]));
    }
    // all, 3 range roots, 2 ranges under step, 5 kernel leaves.
    ASSERT_EQ(frames.size(), 11u);
    ASSERT_EQ(frames[0].name, "all");
    EXPECT_EQ(frames[0].weight, 810);
    EXPECT_NEAR(frames[0].width, 1200.0, 1e-3);
    std::map<std::int64_t, double> child_width;
    std::map<std::int64_t, std::int64_t> child_weight;
    for (const auto& [node, frame] : frames) {
        EXPECT_NEAR(frame.width, 1200.0 * frame.weight / 810.0, 1e-3) << frame.name;
        EXPECT_NE(frame.title.find(frame.name), std::string::npos);
        if (frame.parent >= 0) {
            ASSERT_TRUE(frames.count(frame.parent));
            const Frame& parent = frames[frame.parent];
            EXPECT_GE(frame.x, parent.x - 1e-3);
            EXPECT_LE(frame.x + frame.width, parent.x + parent.width + 1e-3);
            child_width[frame.parent] += frame.width;
            child_weight[frame.parent] += frame.weight;
        }
    }
    // The GPU stacks have no self time above the kernels: children fill their parent.
    for (const auto& [node, width] : child_width) {
        EXPECT_NEAR(width, frames[node].width, 1e-2) << frames[node].name;
        EXPECT_EQ(child_weight[node], frames[node].weight) << frames[node].name;
    }
    EXPECT_NE(svg.find("<title>step (650 ns, 80.25%)</title>"), std::string::npos);
}

TEST(XmlEscape, EscapesMarkup) {
    EXPECT_EQ(xml_escape("void k<float>(a&b, \"c\")"), "void k&lt;float&gt;(a&amp;b, &quot;c&quot;)");
}

// --- CSV ------------------------------------------------------------------------------

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    // RFC 4180: CRLF line ends, quoted fields double their quotes.
    std::vector<std::vector<std::string>> rows(1);
    std::string field;
    bool quoted = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
                field += '"', ++i;
            else if (c == '"')
                quoted = false;
            else
                field += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            rows.back().push_back(field), field.clear();
        } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
            rows.back().push_back(field), field.clear();
            rows.emplace_back();
            ++i;
        } else {
            field += c;
        }
    }
    EXPECT_TRUE(rows.back().empty() && field.empty()) << "last row not terminated by CRLF";
    rows.pop_back();
    return rows;
}

TEST_F(Exports, CsvTablesHaveOneRowPerEvent) {
    const std::map<std::string, std::size_t> expected_rows = {
        {"kernels", 6},         {"memcpys", 3},          {"memsets", 1},       {"synchronizations", 1},
        {"api_calls", 10},      {"ranges", 10},          {"marks", 1},         {"counter_samples", 2},
        {"dropped_records", 2}, {"collective_calls", 0}, {"memory_events", 0}, {"memory_blocks", 0}};
    for (const char* table : kCsvTables) {
        auto rows = parse_csv(exported([table](auto& reader, auto& out) { export_csv_table(reader, table, out); }));
        ASSERT_FALSE(rows.empty()) << table;
        EXPECT_EQ(rows.size() - 1, expected_rows.at(table)) << table;
        for (const auto& row : rows) EXPECT_EQ(row.size(), rows[0].size()) << table;
    }
    auto memcpys = parse_csv(exported([](auto& reader, auto& out) { export_csv_table(reader, "memcpys", out); }));
    EXPECT_EQ(memcpys[2], (std::vector<std::string>{"2460", "2660", "200", "0", "1", "6", "HtoD", "2000", "pageable",
                                                    "device", "-1"}));
    auto kernels = parse_csv(exported([](auto& reader, auto& out) { export_csv_table(reader, "kernels", out); }));
    EXPECT_EQ(kernels[1][6], "gemm");
    EXPECT_EQ(kernels[1][2], "100");
}

TEST_F(Exports, CsvCollectiveCallsNameTheirGroup) {
    const std::string path = folder_->path("collectives.db");
    {
        store::TraceWriter writer(path, trace::RunInfo{}, store::testing::quiet_options());
        trace::StreamId stream = writer.register_stream({0, 0, 0, 13, 0, ""});
        trace::CollectiveCall call;
        call.start_ns = 1000;
        call.track_id = stream;
        call.name_id = writer.intern("_allgather_base");
        call.group_name_id = writer.intern("1");
        call.group_desc_id = writer.intern("mesh, dp");
        call.group_ranks_id = writer.intern("[0, 2]");
        call.group_size = 2;
        call.sequence = 7;
        call.in_elements = 10;
        call.out_elements = 20;
        call.dtype_id = writer.intern("Float");
        writer.record_collective_call(call);
        writer.close();
    }
    auto rows =
        parse_csv(exported([](auto& reader, auto& out) { export_csv_table(reader, "collective_calls", out); }, path));
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1], (std::vector<std::string>{"1000", "stream", "1", "_allgather_base", "1", "mesh, dp", "[0, 2]",
                                                 "2", "7", "10", "20", "Float"}));
}

TEST_F(Exports, CsvDirectoryHoldsEveryTable) {
    const std::string directory = folder_->path("csv");
    {
        store::TraceReader reader(trace());
        export_csv_directory(reader, directory);
    }
    for (const char* table : kCsvTables) {
        EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(directory) / (std::string(table) + ".csv"))) << table;
    }
}

// --- Perfetto --------------------------------------------------------------------------

struct DecodedSlice {
    std::uint64_t track = 0;
    std::uint64_t begin = 0, end = 0;
    std::string name;
    std::set<std::string> categories;
    std::map<std::string, std::string> args;  // every value as text
    std::vector<std::uint64_t> flows;
};

struct DecodedPerfetto {
    std::map<std::uint64_t, perfetto::TrackDescriptor> tracks;
    std::vector<DecodedSlice> slices;  // in begin order per track
    int instants = 0;
    int counter_values = 0;
};

// A Perfetto trace read back by the rules its consumers apply: every packet on one
// trusted sequence whose first packet clears the incremental state; an interned id
// defined (in its packet or an earlier one) before it is used; every event on a track
// described before it; on each track, times that never go back and ends that close the
// innermost open slice, none left open.
DecodedPerfetto decode_perfetto(const std::string& bytes) {
    perfetto::Trace trace;
    EXPECT_TRUE(trace.ParseFromString(bytes));
    DecodedPerfetto decoded;
    std::map<std::uint64_t, std::string> names, categories, annotation_names;
    std::map<std::uint64_t, std::vector<std::size_t>> open;  // track -> open slices
    std::map<std::uint64_t, std::uint64_t> last_time;        // track -> last event time
    for (int index = 0; index < trace.packet_size(); ++index) {
        const perfetto::TracePacket& packet = trace.packet(index);
        EXPECT_EQ(packet.trusted_packet_sequence_id(), 1u) << index;
        if (index == 0) {
            EXPECT_TRUE(packet.sequence_flags() & perfetto::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
        }
        for (const auto& entry : packet.interned_data().event_names())
            EXPECT_TRUE(names.emplace(entry.iid(), entry.name()).second);
        for (const auto& entry : packet.interned_data().event_categories())
            EXPECT_TRUE(categories.emplace(entry.iid(), entry.name()).second);
        for (const auto& entry : packet.interned_data().debug_annotation_names())
            EXPECT_TRUE(annotation_names.emplace(entry.iid(), entry.name()).second);
        if (packet.has_track_descriptor()) {
            const perfetto::TrackDescriptor& track = packet.track_descriptor();
            EXPECT_NE(track.uuid(), 0u);
            if (track.has_parent_uuid()) {
                EXPECT_TRUE(decoded.tracks.count(track.parent_uuid())) << track.uuid();
            }
            EXPECT_TRUE(decoded.tracks.emplace(track.uuid(), track).second)
                << "track described twice: " << track.uuid();
            continue;
        }
        if (!packet.has_track_event()) continue;
        const perfetto::TrackEvent& event = packet.track_event();
        EXPECT_TRUE(packet.sequence_flags() & perfetto::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
        EXPECT_TRUE(decoded.tracks.count(event.track_uuid())) << "event on an undescribed track " << event.track_uuid();
        EXPECT_GE(packet.timestamp(), last_time[event.track_uuid()])
            << "time goes back on track " << event.track_uuid();
        last_time[event.track_uuid()] = packet.timestamp();
        if (event.type() == perfetto::TrackEvent::TYPE_SLICE_BEGIN) {
            DecodedSlice slice;
            slice.track = event.track_uuid();
            slice.begin = packet.timestamp();
            EXPECT_TRUE(names.count(event.name_iid())) << "name iid " << event.name_iid() << " used before defined";
            slice.name = names[event.name_iid()];
            for (std::uint64_t iid : event.category_iids()) {
                EXPECT_TRUE(categories.count(iid));
                slice.categories.insert(categories[iid]);
            }
            for (const perfetto::DebugAnnotation& annotation : event.debug_annotations()) {
                EXPECT_TRUE(annotation_names.count(annotation.name_iid()));
                std::string value = annotation.has_string_value() ? annotation.string_value()
                                    : annotation.has_int_value()  ? std::to_string(annotation.int_value())
                                                                  : std::to_string(annotation.double_value());
                slice.args[annotation_names[annotation.name_iid()]] = value;
            }
            slice.flows.assign(event.flow_ids().begin(), event.flow_ids().end());
            open[slice.track].push_back(decoded.slices.size());
            decoded.slices.push_back(std::move(slice));
        } else if (event.type() == perfetto::TrackEvent::TYPE_SLICE_END) {
            std::vector<std::size_t>& stack = open[event.track_uuid()];
            EXPECT_FALSE(stack.empty()) << "end without begin on track " << event.track_uuid();
            if (stack.empty()) continue;
            decoded.slices[stack.back()].end = packet.timestamp();
            stack.pop_back();
        } else if (event.type() == perfetto::TrackEvent::TYPE_INSTANT) {
            ++decoded.instants;
        } else {
            EXPECT_EQ(event.type(), perfetto::TrackEvent::TYPE_COUNTER);
            EXPECT_TRUE(decoded.tracks[event.track_uuid()].has_counter());
            ++decoded.counter_values;
        }
    }
    for (const auto& [track, stack] : open) EXPECT_TRUE(stack.empty()) << "slices left open on track " << track;
    return decoded;
}

TEST_F(Exports, PerfettoTraceFollowsTrackEventRulesAndHoldsTheFixture) {
    PerfettoCounts counts;
    DecodedPerfetto decoded =
        decode_perfetto(exported([&](auto& reader, auto& out) { counts = export_perfetto_trace(reader, out); }));
    std::map<std::string, int> by_category;
    for (const DecodedSlice& slice : decoded.slices) {
        for (const std::string& category : slice.categories) ++by_category[category];
    }
    // 6 kernels, 3 copies, 1 memset, 1 sync, 10 API calls, 9 push/pop ranges and the
    // start/end "epoch"; the mark is an instant; two counter values.
    expect_counts(by_category,
                  {{"kernel", 6}, {"memcpy", 3}, {"memset", 1}, {"sync", 1}, {"cuda_api", 10}, {"nvtx", 10}});
    EXPECT_EQ(decoded.slices.size(), 31u);
    EXPECT_EQ(counts.slices, 31);
    EXPECT_EQ(decoded.instants, 1);
    EXPECT_EQ(decoded.counter_values, 2);
    EXPECT_EQ(counts.tracks, static_cast<std::int64_t>(decoded.tracks.size()));

    // Every GPU operation with a launching call (5 kernels, 3 copies, 1 memset) shares a
    // flow id with an API call that began no later.
    std::map<std::uint64_t, std::uint64_t> api_flow_begin;
    for (const DecodedSlice& slice : decoded.slices) {
        if (slice.categories.count("cuda_api")) {
            for (std::uint64_t flow : slice.flows) api_flow_begin[flow] = slice.begin;
        }
    }
    int linked = 0;
    for (const DecodedSlice& slice : decoded.slices) {
        if (!slice.categories.count("kernel") && !slice.categories.count("memcpy") && !slice.categories.count("memset"))
            continue;
        for (std::uint64_t flow : slice.flows) {
            auto found = api_flow_begin.find(flow);
            ASSERT_NE(found, api_flow_begin.end()) << slice.name;
            EXPECT_LE(found->second, slice.begin) << slice.name;
            ++linked;
        }
    }
    EXPECT_EQ(linked, 9);

    // The first gemm, [1300, 1400) on stream 7 of GPU 0, with its launch shape.
    bool found_gemm = false;
    for (const DecodedSlice& slice : decoded.slices) {
        if (slice.name != "gemm" || slice.begin != 1300) continue;
        found_gemm = true;
        EXPECT_EQ(slice.end, 1400u);
        EXPECT_EQ(slice.args.at("grid"), "[128, 1, 1]");
        const perfetto::TrackDescriptor& stream = decoded.tracks[slice.track];
        EXPECT_EQ(stream.name(), "Stream 7 default");
        EXPECT_EQ(decoded.tracks[stream.parent_uuid()].name(), "GPU 0 Fixture GPU");
    }
    EXPECT_TRUE(found_gemm);
    // Push/pop ranges on their thread's track; the start/end range on a lane of the process.
    for (const DecodedSlice& slice : decoded.slices) {
        const perfetto::TrackDescriptor& track = decoded.tracks.at(slice.track);
        if (slice.name == "forward") {
            ASSERT_TRUE(track.has_thread());
            EXPECT_EQ(track.thread().thread_name(), "main");
            EXPECT_EQ(track.thread().pid(), 100);
            EXPECT_EQ(track.thread().tid(), 100);
            EXPECT_TRUE(slice.categories.count("ember"));
        }
        if (slice.name == "epoch") {
            EXPECT_EQ(track.name(), "ranges");
            EXPECT_EQ(slice.begin, 900u);
            EXPECT_EQ(slice.end, 5100u);
            EXPECT_TRUE(decoded.tracks[track.parent_uuid()].has_process());
        }
    }
}

// A memory lane per GPU: the allocator's events replayed (live_at_start and alloc add,
// free_completed takes its block's bytes, segments reserve), one value per instant.
TEST_F(Exports, PerfettoMemoryLanesReplayTheAllocator) {
    const std::string path = folder_->path("memory.db");
    {
        ember::testing::TraceBuilder b(path, trace::RunInfo{});
        b.memory(10, trace::MemoryAction::live_at_start, 0x100, 100);
        b.memory(20, trace::MemoryAction::segment_alloc, 0x1000, 200);
        b.memory(20, trace::MemoryAction::alloc, 0x200, 50);
        b.memory(30, trace::MemoryAction::free_requested, 0x200, 50);  // not yet free
        b.memory(40, trace::MemoryAction::free_completed, 0x200, 50);
        b.memory(40, trace::MemoryAction::alloc, 0x300, 70);  // the same instant: one value
        b.memory(50, trace::MemoryAction::segment_free, 0x1000, 200);
        b.close();
    }
    perfetto::Trace trace;
    ASSERT_TRUE(
        trace.ParseFromString(exported([](auto& reader, auto& out) { export_perfetto_trace(reader, out); }, path)));
    std::map<std::uint64_t, std::string> names;
    std::map<std::string, std::vector<std::pair<std::uint64_t, double>>> values;
    for (const perfetto::TracePacket& packet : trace.packet()) {
        if (packet.has_track_descriptor() && packet.track_descriptor().has_counter()) {
            names[packet.track_descriptor().uuid()] = packet.track_descriptor().name();
            EXPECT_EQ(packet.track_descriptor().counter().unit(), perfetto::CounterDescriptor::UNIT_SIZE_BYTES);
        }
        if (packet.has_track_event() && packet.track_event().type() == perfetto::TrackEvent::TYPE_COUNTER)
            values[names.at(packet.track_event().track_uuid())].push_back(
                {packet.timestamp(), packet.track_event().double_counter_value()});
    }
    using Series = std::vector<std::pair<std::uint64_t, double>>;
    EXPECT_EQ(values["GPU memory allocated"], (Series{{10, 100}, {20, 150}, {30, 150}, {40, 170}, {50, 170}}));
    EXPECT_EQ(values["GPU memory reserved"], (Series{{10, 0}, {20, 200}, {30, 200}, {40, 200}, {50, 0}}));

    // The same events as CSV: one row each, in time order, actions by name.
    auto rows =
        parse_csv(exported([](auto& reader, auto& out) { export_csv_table(reader, "memory_events", out); }, path));
    ASSERT_EQ(rows.size(), 8u);
    EXPECT_EQ(rows[0], (std::vector<std::string>{"time_ns", "device_id", "action", "address", "bytes", "cuda_stream",
                                                 "device_free_bytes", "thread_id", "stack"}));
    EXPECT_EQ(rows[1], (std::vector<std::string>{"10", "0", "live_at_start", "256", "100", "0", "-1", "0", ""}));
    EXPECT_EQ(rows[4][2], "free_requested");
    EXPECT_EQ(rows[7][2], "segment_free");
}

// --- pprof -----------------------------------------------------------------------------

// The profile's bytes: a whole gzip stream.
std::string gunzip(const std::string& compressed) {
    test_support::Inflated inflated = test_support::gunzip(compressed);
    EXPECT_TRUE(inflated.complete);
    return std::move(inflated.bytes);
}

// Per function, as `pprof -top` counts them: flat = samples whose innermost frame it
// is, cum = samples with it anywhere on the stack (once per sample).
struct PprofFunctionTotals {
    std::map<std::string, std::int64_t> flat, cum;
    std::int64_t samples = 0;
};

PprofFunctionTotals pprof_totals(const pprof::Profile& profile) {
    auto text = [&](std::int64_t index) { return profile.string_table(static_cast<int>(index)); };
    std::map<std::uint64_t, std::string> function_name, location_function;
    for (const pprof::Function& function : profile.function()) function_name[function.id()] = text(function.name());
    for (const pprof::Location& location : profile.location()) {
        EXPECT_EQ(location.line_size(), 1);
        location_function[location.id()] = function_name[location.line(0).function_id()];
    }
    PprofFunctionTotals totals;
    for (const pprof::Sample& sample : profile.sample()) {
        EXPECT_EQ(sample.value_size(), profile.sample_type_size());
        std::int64_t count = sample.value(0);
        totals.samples += count;
        std::set<std::string> seen;
        for (int i = 0; i < sample.location_id_size(); ++i) {
            const std::string& name = location_function[sample.location_id(i)];
            if (i == 0) totals.flat[name] += count;
            if (seen.insert(name).second) totals.cum[name] += count;
        }
    }
    return totals;
}

TEST_F(Exports, PprofProfileHoldsTheCpuTablesSamples) {
    const std::string path = folder_->path("samples.db");
    ember::testing::FixtureOptions options;
    options.with_cpu_samples = true;
    ember::testing::write_fixture_trace(path, options);
    store::TraceReader reader(path);
    for (bool include_idle : {false, true}) {
        PprofCounts counts;
        const std::string gz =
            exported([&](auto& samples, auto& out) { counts = export_pprof(samples, out, include_idle); }, path);
        pprof::Profile profile;
        ASSERT_TRUE(profile.ParseFromString(gunzip(gz)));
        ASSERT_GT(profile.string_table_size(), 0);
        EXPECT_EQ(profile.string_table(0), "");
        ASSERT_EQ(profile.sample_type_size(), 2);
        EXPECT_EQ(profile.string_table(profile.sample_type(0).type()), "samples");
        EXPECT_EQ(profile.string_table(profile.sample_type(1).type()), "cpu");
        EXPECT_EQ(profile.string_table(profile.sample_type(1).unit()), "nanoseconds");
        EXPECT_EQ(profile.period(), 100);
        std::int64_t cpu_ns = 0;
        for (const pprof::Sample& sample : profile.sample()) cpu_ns += sample.value(1);

        const analysis::CpuProfile expected = analysis::cpu_profile(reader, include_idle);
        const PprofFunctionTotals totals = pprof_totals(profile);
        EXPECT_EQ(totals.samples, include_idle ? 9 : 8);
        EXPECT_EQ(totals.samples, expected.samples);
        EXPECT_EQ(counts.samples, expected.samples);
        EXPECT_EQ(cpu_ns, expected.samples * 100);
        // Native functions as the CPU tables name them; the Python frame is its function
        // with its file and line.
        for (const analysis::CpuFunctionRow& row : expected.functions) {
            std::string name = row.function == "forward (model.py:12)" ? "forward" : row.function;
            EXPECT_EQ(totals.flat.count(name) ? totals.flat.at(name) : 0, row.self_samples) << row.function;
            EXPECT_EQ(totals.cum.count(name) ? totals.cum.at(name) : 0, row.total_samples) << row.function;
        }
        EXPECT_EQ(totals.flat.at("[waiting on GPU]"), 1);
        EXPECT_EQ(totals.flat.at("[libopenblas.so.0]"), 3);
        EXPECT_EQ(totals.cum.at("train_step"), include_idle ? 7 : 6);
    }
    // The Python frame: function "forward" in model.py at line 12; native frames at
    // their address in their module's mapping; each sample labelled with its thread.
    pprof::Profile profile;
    ASSERT_TRUE(
        profile.ParseFromString(gunzip(exported([](auto& samples, auto& out) { export_pprof(samples, out); }, path))));
    auto text = [&](std::int64_t index) { return profile.string_table(static_cast<int>(index)); };
    std::map<std::uint64_t, const pprof::Function*> functions;
    for (const pprof::Function& function : profile.function()) functions[function.id()] = &function;
    std::map<std::uint64_t, std::string> mappings;
    for (const pprof::Mapping& mapping : profile.mapping()) mappings[mapping.id()] = text(mapping.filename());
    bool python_seen = false, blas_seen = false;
    for (const pprof::Location& location : profile.location()) {
        const pprof::Function& function = *functions.at(location.line(0).function_id());
        if (text(function.name()) == "forward") {
            python_seen = true;
            EXPECT_EQ(text(function.filename()), "model.py");
            EXPECT_EQ(location.line(0).line(), 12);
        }
        if (text(function.name()) == "[libopenblas.so.0]") {
            blas_seen = true;
            EXPECT_EQ(location.address(), 0x7f0000001000u);
            EXPECT_EQ(mappings[location.mapping_id()], "/usr/lib/libopenblas.so.0");
        }
    }
    EXPECT_TRUE(python_seen);
    EXPECT_TRUE(blas_seen);
    std::map<std::string, std::int64_t> by_thread;
    for (const pprof::Sample& sample : profile.sample()) {
        std::string thread;
        std::int64_t tid = 0;
        for (const pprof::Label& label : sample.label()) {
            if (text(label.key()) == "thread") thread = text(label.str());
            if (text(label.key()) == "tid") tid = label.num();
        }
        EXPECT_EQ(tid, thread == "main" ? 100 : 101) << thread;
        by_thread[thread] += sample.value(0);
    }
    expect_counts(by_thread, {{"main", std::int64_t{6}}, {"loader", std::int64_t{2}}});
}

}  // namespace
}  // namespace ember::exporting

// nsys_versions_test.cpp: the Nsight Systems exports of every era in
// ../shared/real-traces/nsys-versions (before 2021 without metadata, 2022.4 with
// EXPORT_META_DATA, 2023.3 / 2024.5 / 2025.3 with META_DATA_EXPORT; x64 and Jetson a64)
// import, and ember's kernel, CUDA API, memory (time and size), NVTX and OS runtime
// summaries equal SQL over the file's own tables, computed as nsys stats defines them
// (Total, Instances, Min, Max, Med and Avg in ns; grouped by name). CPU samples: one
// per COMPOSITE_EVENTS row with a call chain, and the innermost frames equal
// SAMPLING_CALLCHAINS' stackDepth 0. Skips, saying why, when ../shared is absent.
// CUDA graphs: none of those exports launched any (their graphNodeId is 0 or NULL
// throughout), so a fixture export with the columns and tables of the newest
// versions (graphId, graphNodeId, CUDA_GRAPH_EVENTS, CUDA_GRAPH_NODE_EVENTS) checks
// that mapping, and the real ones that ember finds as many graph kernels as they hold.
#include "profiler/analysis/cuda_graphs.h"
#include "profiler/analysis/duration_summary.h"
#include "profiler/analysis/stats_report.h"
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/import_fixtures.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace {

using namespace ember;
using import_test::TempDir;

// What nsys stats gives for one row, computed in SQL.
struct Truth {
    std::int64_t instances = 0;
    std::int64_t total = 0;
    std::int64_t min = 0;
    std::int64_t max = 0;
    double median = 0.0;
};

class Export {
  public:
    explicit Export(const std::string& path) : path_(path) {
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
            throw std::runtime_error("cannot open " + path);
    }
    ~Export() { sqlite3_close(db_); }
    Export(const Export&) = delete;
    Export& operator=(const Export&) = delete;

    bool has_table(const std::string& table) const {
        return !rows(fmt::format("SELECT name FROM sqlite_master WHERE type = 'table' AND name = '{}'", table)).empty();
    }

    // Every row of `sql` as text cells.
    std::vector<std::vector<std::string>> rows(const std::string& sql) const {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK)
            throw std::runtime_error(path_ + ": " + sqlite3_errmsg(db_) + " in " + sql);
        std::vector<std::vector<std::string>> out;
        while (sqlite3_step(statement) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int i = 0; i < sqlite3_column_count(statement); ++i) {
                const unsigned char* text = sqlite3_column_text(statement, i);
                row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
            }
            out.push_back(std::move(row));
        }
        sqlite3_finalize(statement);
        return out;
    }

    // nsys stats' numbers per name for `named_durations`, a SELECT of (name, duration).
    std::map<std::string, Truth> summary(const std::string& named_durations) const {
        std::map<std::string, Truth> out;
        const std::string with = fmt::format("WITH d(name, dur) AS ({}) ", named_durations);
        for (const auto& row :
             rows(with + "SELECT name, COUNT(*), SUM(dur), MIN(dur), MAX(dur) FROM d GROUP BY name")) {
            Truth& truth = out[row[0]];
            truth.instances = std::stoll(row[1]);
            truth.total = std::stoll(row[2]);
            truth.min = std::stoll(row[3]);
            truth.max = std::stoll(row[4]);
            // The median: the middle duration, or the mean of the middle two.
            std::string name = row[0];
            std::string quoted;
            for (char c : name) quoted += c == '\'' ? std::string("''") : std::string(1, c);
            auto median =
                rows(with + fmt::format("SELECT AVG(dur) FROM (SELECT dur FROM d WHERE name = '{}' ORDER BY dur "
                                        "LIMIT {} OFFSET {})",
                                        quoted, 2 - truth.instances % 2, (truth.instances - 1) / 2));
            truth.median = std::stod(median.at(0).at(0));
        }
        return out;
    }

  private:
    std::string path_;
    sqlite3* db_ = nullptr;
};

void expect_equal(
    const std::vector<analysis::DurationSummaryRow>& rows, const std::map<std::string, Truth>& truth,
    const std::string& what,
    const std::function<std::string(const analysis::DurationSummaryRow&)>& name_of =
        [](const analysis::DurationSummaryRow& row) { return row.name; }) {
    std::map<std::string, const analysis::DurationStats*> ember_rows;
    for (const auto& row : rows) ember_rows[name_of(row)] = &row.stats;
    ASSERT_EQ(ember_rows.size(), rows.size()) << what << ": two ember rows of one name";
    std::set<std::string> ember_names, sql_names;
    for (const auto& [name, stats] : ember_rows) ember_names.insert(name);
    for (const auto& [name, expected] : truth) sql_names.insert(name);
    ASSERT_EQ(ember_names, sql_names) << what;
    for (const auto& [name, expected] : truth) {
        SCOPED_TRACE(what + ": " + name);
        const analysis::DurationStats& stats = *ember_rows.at(name);
        EXPECT_EQ(stats.instances, expected.instances);
        EXPECT_EQ(stats.total_ns, expected.total);
        EXPECT_EQ(stats.min_ns, expected.min);
        EXPECT_EQ(stats.max_ns, expected.max);
        EXPECT_EQ(stats.median_ns, expected.median);
        EXPECT_EQ(fmt::format("{:.1f}", stats.average_ns),
                  fmt::format("{:.1f}", static_cast<double>(expected.total) / static_cast<double>(expected.instances)));
    }
}

// nsys' memcpy kind -> "[CUDA memcpy HtoD]": the file's ENUM_CUDA_MEMCPY_OPER names
// (CUDA_MEMCPY_KIND_HTOD), else CUPTI's numbers (exports before 2021 have no ENUM_* tables).
std::string memcpy_label_sql(const Export& file) {
    std::map<std::int64_t, std::string> short_names;
    if (file.has_table("ENUM_CUDA_MEMCPY_OPER")) {
        for (const auto& row : file.rows("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER")) {
            std::string name = row[1].substr(row[1].rfind('_') + 1);  // HTOD
            if (name.size() == 4 && name[1] == 'T' && name[2] == 'O')
                short_names[std::stoll(row[0])] = fmt::format("{}to{}", name[0], name[3]);
        }
    } else {
        short_names = {{1, "HtoD"}, {2, "DtoH"}, {8, "DtoD"}, {9, "HtoH"}, {10, "PtoP"}};
    }
    std::string cases = "CASE copyKind";
    for (const auto& [id, name] : short_names) cases += fmt::format(" WHEN {} THEN '[CUDA memcpy {}]'", id, name);
    return cases + " ELSE '[CUDA memcpy Unknown]' END";
}

// "cudaMemcpy_v3020" -> "cudaMemcpy" (nsys stats' names), in SQL.
const char* kApiName =
    "CASE WHEN rtrim(s.value, '0123456789') != s.value AND rtrim(s.value, '0123456789') LIKE '%\\_v' ESCAPE '\\' "
    "THEN substr(s.value, 1, length(rtrim(s.value, '0123456789')) - 2) ELSE s.value END";

class NsysVersions : public ::testing::TestWithParam<const char*> {};

TEST_P(NsysVersions, ImportsAndItsSummariesEqualSqlOverTheFile) {
    const std::string folder = import_test::real_traces_dir();
    if (folder.empty() || !std::filesystem::exists(folder + "/nsys-versions"))
        GTEST_SKIP()
            << "../shared/real-traces/nsys-versions is absent (a fresh clone has no ../shared): nothing to compare";
    const std::string input = folder + "/nsys-versions/" + GetParam();
    TempDir dir;
    const std::string output = dir.path("trace.db");
    ASSERT_EQ(importing::detect_format(input), importing::SourceFormat::nsys);
    const importing::ImportedFile imported = importing::import_file(input, output);
    EXPECT_TRUE(imported.counts.notes.empty());  // every schema here is one seen before
    store::TraceReader reader(output);
    Export file(input);

    // Kernels: by demangled name (nsys stats' default).
    if (file.has_table("CUPTI_ACTIVITY_KIND_KERNEL")) {
        expect_equal(
            analysis::kernel_summary(reader),
            file.summary("SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON "
                         "s.id = k.demangledName"),
            "kernels");
    }
    // Kernels run from a CUDA graph: a graphId or graphNodeId other than 0 (whichever the export has).
    if (file.has_table("CUPTI_ACTIVITY_KIND_KERNEL")) {
        std::string condition;
        for (const char* column : {"graphId", "graphNodeId"}) {
            if (file.rows(fmt::format("SELECT 1 FROM pragma_table_info('CUPTI_ACTIVITY_KIND_KERNEL') WHERE name = '{}'",
                                      column))
                    .empty())
                continue;
            condition += fmt::format("{}COALESCE({}, 0) != 0", condition.empty() ? "" : " OR ", column);
        }
        const std::int64_t expected =
            condition.empty()
                ? 0
                : std::stoll(
                      file.rows("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE " + condition).at(0).at(0));
        EXPECT_EQ(analysis::cuda_graph_summary(reader).graph_kernels, expected);
    }
    // CUDA API: runtime and driver calls, names without the version suffix.
    std::string api_sql;
    for (const char* table : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"}) {
        if (!file.has_table(table)) continue;
        if (!api_sql.empty()) api_sql += " UNION ALL ";
        api_sql +=
            fmt::format("SELECT {}, r.end - r.start FROM {} r JOIN StringIds s ON s.id = r.nameId", kApiName, table);
    }
    if (!api_sql.empty()) expect_equal(analysis::api_summary(reader), file.summary(api_sql), "CUDA API");
    // Memory operations by time: copies by kind, memsets together.
    std::string memory_sql;
    if (file.has_table("CUPTI_ACTIVITY_KIND_MEMCPY"))
        memory_sql = fmt::format("SELECT {}, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY", memcpy_label_sql(file));
    if (file.has_table("CUPTI_ACTIVITY_KIND_MEMSET"))
        memory_sql += std::string(memory_sql.empty() ? "" : " UNION ALL ") +
                      "SELECT '[CUDA memset]', end - start FROM CUPTI_ACTIVITY_KIND_MEMSET";
    if (!memory_sql.empty()) {
        expect_equal(analysis::memory_time_summary(reader), file.summary(memory_sql), "memory by time");
        // By size: the same groups over bytes (ember's size summary keeps bytes in the ns fields).
        std::string size_sql = memory_sql;
        for (std::size_t at; (at = size_sql.find("end - start")) != std::string::npos;)
            size_sql.replace(at, 11, "bytes");
        expect_equal(analysis::memory_size_summary(reader), file.summary(size_sql), "memory by size");
    }
    // NVTX push/pop and start/end ranges that ended: text or a registered string,
    // "DOMAIN:name" outside the default domain. OS runtime calls: by function name.
    std::vector<analysis::DurationSummaryRow> nvtx_rows, osrt_rows;
    std::vector<analysis::DurationSummaryRow> graph_event_rows;
    for (const auto& row : analysis::range_summary(reader)) {
        if (row.domain == "OS runtime")
            osrt_rows.push_back(row);
        else if (row.domain == "CUDA graphs")
            graph_event_rows.push_back(row);
        else
            nvtx_rows.push_back(row);
    }
    EXPECT_EQ(graph_event_rows.empty(),
              !file.has_table("CUDA_GRAPH_EVENTS") && !file.has_table("CUDA_GRAPH_NODE_EVENTS"));
    std::map<std::string, Truth> nvtx;
    if (file.has_table("NVTX_EVENTS")) {
        nvtx = file.summary(
            "SELECT CASE WHEN COALESCE(e.domainId, 0) = 0 THEN '' ELSE (SELECT d.text FROM NVTX_EVENTS d WHERE "
            "d.eventType = 75 AND d.domainId = e.domainId) || ':' END || COALESCE(e.text, (SELECT s.value FROM StringIds "
            "s WHERE s.id = e.textId), ''), e.end - e.start FROM NVTX_EVENTS e WHERE e.eventType IN (59, 60) AND e.end "
            "IS NOT NULL");
    }
    expect_equal(nvtx_rows, nvtx, "NVTX", [](const analysis::DurationSummaryRow& row) {
        return row.domain.empty() ? row.name : row.domain + ":" + row.name;
    });
    std::map<std::string, Truth> osrt;
    if (file.has_table("OSRT_API"))
        osrt = file.summary("SELECT s.value, o.end - o.start FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId");
    expect_equal(osrt_rows, osrt, "OS runtime");

    // CPU samples: one per sample with a call chain; the innermost frame is stackDepth 0.
    std::map<std::string, std::int64_t> leaves, expected_leaves;
    reader.for_each_stack_sample({}, [&](const trace::StackSample& sample) {
        ++leaves[reader.stack_frames(sample.stack_id).back().function];
        return true;
    });
    if (file.has_table("COMPOSITE_EVENTS")) {
        for (const auto& row :
             file.rows("SELECT s.value, COUNT(*) FROM SAMPLING_CALLCHAINS c JOIN COMPOSITE_EVENTS e ON "
                       "e.id = c.id JOIN StringIds s ON s.id = c.symbol WHERE c.stackDepth = 0 GROUP BY "
                       "s.value")) {
            expected_leaves[row[0]] = std::stoll(row[1]);
        }
    }
    EXPECT_EQ(leaves, expected_leaves);

    // The GPUs: TARGET_INFO_GPU's names (its id column is `deviceId` before 2021).
    if (file.has_table("TARGET_INFO_GPU")) {
        std::set<std::string> expected, devices;
        for (const auto& row : file.rows("SELECT name FROM TARGET_INFO_GPU")) expected.insert(row[0]);
        for (const trace::DeviceInfo& device : reader.devices()) devices.insert(device.name);
        EXPECT_EQ(devices, expected);
    }

    // Every GPU event is linked to its launch or counted as unlinked; tables left
    // unread are named in the report with their row count.
    EXPECT_EQ(imported.counts.kernels + imported.counts.memcpys + imported.counts.memsets,
              imported.counts.flows + imported.counts.unlinked_gpu_events);
    EXPECT_FALSE(imported.counts.skipped.count("SCHED_EVENTS rows (not imported)"));
    if (file.has_table("OSRT_CALLCHAINS")) {
        EXPECT_EQ(imported.counts.skipped.at("OSRT_CALLCHAINS rows (not imported)"),
                  std::stoll(file.rows("SELECT COUNT(*) FROM OSRT_CALLCHAINS").at(0).at(0)));
    }

    // Thread scheduling: one "on CPU (tid N)" counter per thread, a sample per
    // SCHED_EVENTS row, 1 for a schedule-in.
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> sched, expected_sched;  // rows, schedule-ins
    std::map<trace::CounterId, std::string> counter_names;
    for (const trace::CounterInfo& counter : reader.counters()) counter_names[counter.counter_id] = counter.name;
    reader.for_each_counter_sample({}, [&](const trace::CounterSample& sample) {
        const std::string& name = counter_names[sample.counter_id];
        if (name.rfind("on CPU (tid ", 0) == 0) {
            ++sched[name].first;
            sched[name].second += sample.value == 1.0 ? 1 : 0;
        }
        return true;
    });
    if (file.has_table("SCHED_EVENTS")) {
        for (const auto& row : file.rows("SELECT 'on CPU (tid ' || (globalTid & 16777215) || ')', COUNT(*), "
                                         "SUM(isSchedIn != 0) FROM SCHED_EVENTS GROUP BY globalTid & 16777215")) {
            expected_sched[row[0]] = {std::stoll(row[1]), std::stoll(row[2])};
        }
    }
    EXPECT_EQ(sched, expected_sched);
}

// The newest exports' graph columns and tables, added to the schema 3 fixture with
// the real column names and types (docs/import.md): a cudaGraphLaunch (corr 6) of
// graph 9 runs kernels "relu(float*)" from nodes 91 [3100, 3200) and 92 [3200, 3350)
// and a memset from node 94 [3460, 3470); a copy from node 93 [3400, 3450) names its
// node only (the memcpy table has graphNodeId but no graphId, as in 2025.3). The graph
// was captured (cudaStreamEndCapture [2500, 2600), nodes created at 2510 and 2520) and
// instantiated (cudaGraphInstantiate [2700, 2900)) on the main thread.
TEST(NsysGraphs, GraphIdsAndGraphEventsOfTheNewestExports) {
    TempDir dir;
    const std::string input = dir.path("graphs.sqlite");
    import_test::NsysFixtureOptions options;
    options.schema_major = 3;
    options.schema_version_text = "3.25.0";
    options.metadata_table = "META_DATA_EXPORT";
    import_test::write_nsys_fixture(input, options);
    const std::int64_t main_thread = import_test::nsys_global_tid(4242, 4242);
    const std::int64_t process = import_test::nsys_global_tid(4242, 0);
    import_test::exec_sql(
        input,
        fmt::format(
            "INSERT INTO StringIds VALUES (100, 'cudaGraphLaunch_v10000'), (101, 'cudaStreamEndCapture_v10000'), "
            "(102, 'cudaGraphInstantiate_v12000'), (103, 'Graph Node Creation'), (104, 'relu(float*)');"
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
            "returnValue) VALUES (3000, 3010, 0, {0}, 6, 100, 0);"
            "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN graphNodeId INTEGER;"
            "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN graphId INTEGER;"
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
            "demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
            "staticSharedMemory, dynamicSharedMemory, graphNodeId, graphId) VALUES "
            "(3100, 3200, 0, 1, 7, 6, {1}, 104, 104, 16, 1, 1, 1, 128, 1, 1, 0, 0, 91, 9), "
            "(3200, 3350, 0, 1, 7, 6, {1}, 104, 104, 16, 1, 1, 1, 128, 1, 1, 0, 0, 92, 9);"
            "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY ADD COLUMN graphNodeId INTEGER;"
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
            "bytes, copyKind, graphNodeId) SELECT 3400, 3450, 0, 1, 7, 6, {1}, 64, copyKind, 93 FROM "
            "CUPTI_ACTIVITY_KIND_MEMCPY LIMIT 1;"
            "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMSET ADD COLUMN graphNodeId INTEGER;"
            "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMSET ADD COLUMN graphId INTEGER;"
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
            "value, bytes, graphNodeId, graphId) VALUES (3460, 3470, 0, 1, 7, 6, {1}, 0, 32, 94, 9);"
            "CREATE TABLE CUDA_GRAPH_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
            "globalTid INTEGER, nameId INTEGER NOT NULL, graphId INTEGER, originalGraphId INTEGER, graphExecId INTEGER);"
            "INSERT INTO CUDA_GRAPH_EVENTS VALUES (2500, 2600, 0, {0}, 101, 9, NULL, NULL), "
            "(2700, 2900, 0, {0}, 102, 9, NULL, 1);"
            "CREATE TABLE CUDA_GRAPH_NODE_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT "
            "NULL, globalTid INTEGER, nameId INTEGER NOT NULL, graphNodeId INTEGER NOT NULL, originalGraphNodeId "
            "INTEGER);"
            "INSERT INTO CUDA_GRAPH_NODE_EVENTS VALUES (2510, 2510, 0, {0}, 103, 91, NULL), "
            "(2520, 2520, 0, {0}, 103, 92, NULL);",
            main_thread, process));
    const importing::ImportedFile imported = importing::import_file(input, dir.path("graphs.db"));
    EXPECT_TRUE(imported.counts.notes.empty());
    // Both graph tables are read (the fixture's CUPTI_ACTIVITY_KIND_GRAPH_TRACE stays unread, counted).
    for (const auto& [what, rows] : imported.counts.skipped)
        EXPECT_EQ(what.find("CUDA_GRAPH"), std::string::npos) << what;
    EXPECT_EQ(imported.counts.skipped.count("CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows (not imported)"), 1u);
    store::TraceReader reader(dir.path("graphs.db"));

    std::vector<trace::KernelEvent> kernels;
    reader.for_each_kernel({}, [&](const trace::KernelEvent& e) { return kernels.push_back(e), true; });
    ASSERT_EQ(kernels.size(), 3u);
    EXPECT_EQ(std::make_pair(kernels[0].graph_id, kernels[0].graph_node_id), std::make_pair(0u, std::uint64_t{0}));
    EXPECT_EQ(std::make_pair(kernels[1].graph_id, kernels[1].graph_node_id), std::make_pair(9u, std::uint64_t{91}));
    EXPECT_EQ(std::make_pair(kernels[2].graph_id, kernels[2].graph_node_id), std::make_pair(9u, std::uint64_t{92}));
    EXPECT_EQ(reader.string(kernels[2].name_id), "relu(float*)");
    const std::vector<trace::MemcpyEvent> copies = reader.memcpys_by_correlation(6);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(std::make_pair(copies[0].graph_id, copies[0].graph_node_id), std::make_pair(0u, std::uint64_t{93}));
    EXPECT_EQ(reader.memcpys_by_correlation(3).at(0).graph_node_id, 0u);  // the plain cudaMemcpy
    const std::vector<trace::MemsetEvent> sets = reader.memsets_by_correlation(6);
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(std::make_pair(sets[0].graph_id, sets[0].graph_node_id), std::make_pair(9u, std::uint64_t{94}));
    // The launch links to what it ran.
    ASSERT_TRUE(reader.api_call_by_correlation(6).has_value());
    EXPECT_EQ(reader.string(reader.api_call_by_correlation(6)->name_id), "cudaGraphLaunch");

    // Graph and node events: host ranges of "CUDA graphs" on the main thread, the
    // node creations nested in the capture, the id as payload.
    std::vector<std::tuple<std::string, trace::TimeNs, trace::TimeNs, std::int32_t, trace::Payload>> events;
    reader.for_each_range({}, [&](const trace::RangeEvent& e) {
        if (reader.string(e.domain_id) == "CUDA graphs")
            events.emplace_back(std::string(reader.string(e.name_id)), e.start_ns, e.end_ns, e.depth, e.payload);
        return true;
    });
    using Payload = trace::Payload;
    const decltype(events) expected = {{"cudaStreamEndCapture", 2500, 2600, 0, Payload::of_integer(9)},
                                       {"Graph Node Creation", 2510, 2510, 1, Payload::of_integer(91)},
                                       {"Graph Node Creation", 2520, 2520, 1, Payload::of_integer(92)},
                                       {"cudaGraphInstantiate", 2700, 2900, 0, Payload::of_integer(9)}};
    EXPECT_EQ(events, expected);

    // The graphs report: graph 9 (two kernels, a memset, three nodes), then the copy
    // whose graph is not recorded.
    const analysis::CudaGraphSummary summary = analysis::cuda_graph_summary(reader);
    EXPECT_EQ(summary.kernels, 3);
    EXPECT_EQ(summary.kernel_ns, 1000 + 100 + 150);
    EXPECT_EQ(summary.graph_kernels, 2);
    EXPECT_EQ(summary.graph_kernel_ns, 250);
    EXPECT_EQ(summary.graph_operations, 4);
    ASSERT_EQ(summary.graphs.size(), 2u);
    EXPECT_EQ(summary.graphs[0].graph_id, 9u);
    EXPECT_EQ(summary.graphs[0].kernels, 2);
    EXPECT_EQ(summary.graphs[0].memsets, 1);
    EXPECT_EQ(summary.graphs[0].nodes, 3);
    EXPECT_EQ(summary.graphs[0].gpu_ns, 260);
    EXPECT_EQ(summary.graphs[1].graph_id, 0u);
    EXPECT_EQ(summary.graphs[1].memcpys, 1);
    EXPECT_EQ(summary.graphs[1].gpu_ns, 50);
    const analysis::Table table = analysis::cuda_graphs_table(summary);
    EXPECT_EQ(table.title, "CUDA graphs: 2 of 3 kernels (20.0% of kernel time) ran from 1 graph");
    ASSERT_EQ(table.rows.size(), 2u);
    EXPECT_EQ(std::get<std::string>(table.rows[1][0]), "(graph id not recorded)");
    // `ember stats` shows it without being asked, right after the kernels.
    const std::vector<analysis::Table> tables = analysis::build_stats_tables(reader, {});
    ASSERT_GE(tables.size(), 2u);
    EXPECT_EQ(tables[0].key, "kernels");
    EXPECT_EQ(tables[1].key, "graphs");
    EXPECT_EQ(tables[1].title, table.title);
}

// The plain fixture (no graph columns, no graph tables): no graph work, said so.
TEST(NsysGraphs, ExportWithoutGraphsHasNoGraphWork) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("plain.sqlite"));
    importing::import_file(dir.path("plain.sqlite"), dir.path("plain.db"));
    store::TraceReader reader(dir.path("plain.db"));
    const analysis::CudaGraphSummary summary = analysis::cuda_graph_summary(reader);
    EXPECT_FALSE(summary.any());
    EXPECT_EQ(summary.kernels, 1);
    const analysis::Table table = analysis::cuda_graphs_table(summary);
    EXPECT_TRUE(table.rows.empty());
    EXPECT_EQ(table.empty_note, "no kernel, copy or memset ran from a CUDA graph");
    // `ember stats` leaves the report out unless it is asked for.
    for (const analysis::Table& shown : analysis::build_stats_tables(reader, {})) EXPECT_NE(shown.key, "graphs");
    analysis::StatsOptions options;
    options.reports = {"graphs"};
    const std::vector<analysis::Table> asked = analysis::build_stats_tables(reader, options);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].empty_note, table.empty_note);
}

INSTANTIATE_TEST_SUITE_P(Exports, NsysVersions,
                         ::testing::Values("PolPuigPuy_OpenACC_Project_PolPuig_report12.sqlite",
                                           "Lianhang666_gpu4_report2.sqlite",
                                           "caoye310_Lower-Triangular-Solves_report1.sqlite",
                                           "SamuelAmsih_CUDA_report14.sqlite", "IkerCanut_fire_spread_report1.sqlite"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             std::string name = info.param;
                             name = name.substr(0, name.find('_'));
                             return name;
                         });

}  // namespace

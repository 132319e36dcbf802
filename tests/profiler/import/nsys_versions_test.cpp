// nsys_versions_test.cpp: the Nsight Systems exports of every era in
// ../shared/real-traces/nsys-versions (before 2021 without metadata, 2022.4 with
// EXPORT_META_DATA, 2023.3 / 2024.5 / 2025.3 with META_DATA_EXPORT; x64 and Jetson a64)
// import, and ember's kernel, CUDA API, memory (time and size), NVTX and OS runtime
// summaries equal SQL over the file's own tables, computed as nsys stats defines them
// (Total, Instances, Min, Max, Med and Avg in ns; grouped by name). CPU samples: one
// per COMPOSITE_EVENTS row with a call chain, and the innermost frames equal
// SAMPLING_CALLCHAINS' stackDepth 0. Skips, saying why, when ../shared is absent.
#include "profiler/analysis/duration_summary.h"
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
        for (const auto& row : rows(with + "SELECT name, COUNT(*), SUM(dur), MIN(dur), MAX(dur) FROM d GROUP BY name")) {
            Truth& truth = out[row[0]];
            truth.instances = std::stoll(row[1]);
            truth.total = std::stoll(row[2]);
            truth.min = std::stoll(row[3]);
            truth.max = std::stoll(row[4]);
            // The median: the middle duration, or the mean of the middle two.
            std::string name = row[0];
            std::string quoted;
            for (char c : name) quoted += c == '\'' ? std::string("''") : std::string(1, c);
            auto median = rows(with + fmt::format("SELECT AVG(dur) FROM (SELECT dur FROM d WHERE name = '{}' ORDER BY dur "
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

void expect_equal(const std::vector<analysis::DurationSummaryRow>& rows, const std::map<std::string, Truth>& truth,
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
        GTEST_SKIP() << "../shared/real-traces/nsys-versions is absent (a fresh clone has no ../shared): nothing to compare";
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
        expect_equal(analysis::kernel_summary(reader),
                     file.summary("SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON "
                                  "s.id = k.demangledName"),
                     "kernels");
    }
    // CUDA API: runtime and driver calls, names without the version suffix.
    std::string api_sql;
    for (const char* table : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"}) {
        if (!file.has_table(table)) continue;
        if (!api_sql.empty()) api_sql += " UNION ALL ";
        api_sql += fmt::format("SELECT {}, r.end - r.start FROM {} r JOIN StringIds s ON s.id = r.nameId", kApiName, table);
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
        for (std::size_t at; (at = size_sql.find("end - start")) != std::string::npos;) size_sql.replace(at, 11, "bytes");
        expect_equal(analysis::memory_size_summary(reader), file.summary(size_sql), "memory by size");
    }
    // NVTX push/pop and start/end ranges that ended: text or a registered string,
    // "DOMAIN:name" outside the default domain. OS runtime calls: by function name.
    std::vector<analysis::DurationSummaryRow> nvtx_rows, osrt_rows;
    for (const auto& row : analysis::range_summary(reader)) (row.domain == "OS runtime" ? osrt_rows : nvtx_rows).push_back(row);
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
        for (const auto& row : file.rows("SELECT s.value, COUNT(*) FROM SAMPLING_CALLCHAINS c JOIN COMPOSITE_EVENTS e ON "
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

// table_sql_test.cpp: a store::TableSql names only what tables.h declares (checked at
// compile time: the static_asserts below are the same check the constructor makes),
// and store::query() reads a column an older file lacks as its declared default, per
// SELECT of a compound query. tests/profiler/store/table_sql_compile_test.sh checks
// that an undeclared name stops the build.
#include "profiler/store/table_sql.h"

#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ember::store {
namespace {

using namespace ember::trace;
using table_sql::first_undeclared_name;
using testing::run_sql;
using testing::ScratchDir;

// Queries of the forms the reports and exports use.
static_assert(first_undeclared_name("SELECT device_id, start_ns, end_ns, name_id FROM kernels ORDER BY device_id") ==
              "");
static_assert(first_undeclared_name("SELECT direction, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) FROM memcpys "
                                    "GROUP BY direction") == "");
static_assert(first_undeclared_name("SELECT start_ns FROM kernels WHERE stream_id = ?1 UNION ALL SELECT start_ns "
                                    "FROM memsets WHERE stream_id = ?1 ORDER BY 1, 2 DESC") == "");
static_assert(first_undeclared_name("SELECT a.thread_id, g.start_ns FROM api_calls AS a JOIN (SELECT correlation_id, "
                                    "start_ns FROM kernels) AS g ON g.correlation_id = a.correlation_id") == "");
static_assert(first_undeclared_name("SELECT k.name_id FROM kernels k WHERE NOT EXISTS (SELECT 1 FROM api_calls a "
                                    "WHERE a.correlation_id = k.correlation_id)") == "");
static_assert(first_undeclared_name("SELECT start_ns, typeof(payload), payload, 'thread_name' FROM ranges") == "");
static_assert(first_undeclared_name("SELECT COUNT(*) AS n FROM stack_samples ORDER BY n") == "");

// What fails: a column no table of the query declares, a column of another table, an
// unknown function, a table that is not declared, and a query of no table.
static_assert(first_undeclared_name("SELECT start_time FROM kernels") == "start_time");
static_assert(first_undeclared_name("SELECT bytes FROM kernels") == "bytes");
static_assert(first_undeclared_name("SELECT median(start_ns) FROM kernels") == "median");
static_assert(first_undeclared_name("SELECT start_ns FROM kernels JOIN kernel_launches USING (start_ns)") ==
              "kernel_launches");
static_assert(first_undeclared_name("SELECT start_ns FROM events") == "(no table)");
static_assert(first_undeclared_name("SELECT g.bogus FROM kernels AS g") == "bogus");

TEST(TableSql, FileDefaultsAreJudgedPerSelect) {
    // A file whose memcpys lack graph_id (and only they): the kernels' graph_id stays.
    auto memcpys_lack_graph_id = [](const TableInfo& table, const ColumnInfo& column) {
        return std::string_view(table.name) == "memcpys" && std::string_view(column.name) == "graph_id";
    };
    EXPECT_EQ(with_file_defaults("SELECT graph_id FROM kernels WHERE graph_id != 0 UNION ALL SELECT graph_id FROM "
                                 "memcpys WHERE graph_id != 0",
                                 memcpys_lack_graph_id),
              "SELECT graph_id FROM kernels WHERE graph_id != 0 UNION ALL SELECT (0) FROM memcpys WHERE (0) != 0");
    // A query joining both reads the column of the table that has it.
    EXPECT_EQ(
        with_file_defaults("SELECT graph_id FROM kernels JOIN memcpys USING (correlation_id)", memcpys_lack_graph_id),
        "SELECT graph_id FROM kernels JOIN memcpys USING (correlation_id)");
    // Names inside string literals are text, not columns.
    EXPECT_EQ(with_file_defaults("SELECT 'graph_id', graph_id FROM memcpys", memcpys_lack_graph_id),
              "SELECT 'graph_id', (0) FROM memcpys");
}

// A trace with one kernel and one copy, both in a graph.
std::string write_trace(ScratchDir& dir) {
    const std::string path = dir.file("t.db");
    RunInfo run;
    TraceWriter writer(path, run, testing::quiet_options());
    writer.register_thread({0, 1, 1, "main"});
    writer.register_device({0, "gpu", "", 9, 0, 132, 1ll << 30, 1e12});
    const StreamId stream = writer.register_stream({0, 0, 1, 7, 0, "compute"});
    KernelEvent kernel{1000, 2000, 0, stream, 1, writer.intern("gemm"), {}};
    kernel.graph_id = 5;
    kernel.graph_node_id = 50;
    MemcpyEvent copy{
        3000,     3500, 0, stream, 2, MemcpyDirection::device_to_device, 64, MemoryKind::device, MemoryKind::device,
        kNoDevice};
    copy.graph_id = 6;
    copy.graph_node_id = 60;
    EXPECT_TRUE(writer.record_kernel(kernel));
    EXPECT_TRUE(writer.record_memcpy(copy));
    writer.close();
    return path;
}

std::vector<std::string> rows_of(Statement statement) {
    std::vector<std::string> rows;
    while (statement.next_row())
        rows.push_back(std::to_string(statement.column_int64(0)) + "|" + std::to_string(statement.column_int64(1)));
    return rows;
}

TEST(TableSql, QueryReadsColumnsAnOlderFileLacksAsTheirDefaults) {
    ScratchDir dir;
    const std::string path = write_trace(dir);
    constexpr TableSql kGraphs =
        "SELECT graph_id, graph_node_id FROM kernels UNION ALL SELECT graph_id, graph_node_id FROM memcpys";
    {
        TraceReader reader(path);
        EXPECT_EQ(rows_of(query(reader, kGraphs)), (std::vector<std::string>{"5|50", "6|60"}));
    }
    // The copies as a version 2 file stored them: no graph columns (declared default 0).
    run_sql(path, "ALTER TABLE memcpys DROP COLUMN graph_id; ALTER TABLE memcpys DROP COLUMN graph_node_id;");
    TraceReader reader(path);
    EXPECT_EQ(rows_of(query(reader, kGraphs)), (std::vector<std::string>{"5|50", "0|0"}));
}

TEST(TableSql, AnSqlErrorNamesTheFile) {
    ScratchDir dir;
    const std::string path = write_trace(dir);
    run_sql(path, "DROP TABLE collective_calls;");
    TraceReader reader(path);
    try {
        rows_of(query(reader, "SELECT start_ns, sequence FROM collective_calls"));
        FAIL() << "a query of a missing table ran";
    } catch (const TraceError& error) {
        EXPECT_EQ(error.path(), path);
        EXPECT_NE(std::string(error.what()).find("collective_calls"), std::string::npos) << error.what();
    }
}

}  // namespace
}  // namespace ember::store

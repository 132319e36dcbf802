// store_errors_test.cpp: files the reader must refuse — not a trace, another
// SQLite database, truncated, from a newer or older schema, missing a table,
// missing altogether — each with a TraceError whose message names the file
// (and, for versions, both versions), never a crash.
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

namespace ember::store {
namespace {

using testing::run_sql;
using testing::ScratchDir;

// Opens `path` expecting a TraceError of `kind`; returns its message.
std::string open_error(const std::string& path, TraceErrorKind kind) {
    try {
        TraceReader reader(path);
        ADD_FAILURE() << "opened " << path << " without error";
    } catch (const TraceError& error) {
        EXPECT_EQ(static_cast<int>(error.kind()), static_cast<int>(kind)) << error.what();
        EXPECT_EQ(error.path(), path);
        std::string message = error.what();
        EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << "message does not start with the path: " << message;
        return message;
    }
    return {};
}

TEST(TraceStoreErrors, MissingFile) {
    ScratchDir dir;
    std::string message = open_error(dir.file("absent.db"), TraceErrorKind::not_found);
    EXPECT_NE(message.find("no such trace file"), std::string::npos) << message;
}

TEST(TraceStoreErrors, TextFileIsNotATrace) {
    ScratchDir dir;
    std::string path = dir.file("passwd");
    std::ofstream(path) << "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n";
    std::string message = open_error(path, TraceErrorKind::not_a_trace);
    EXPECT_NE(message.find("not an ember trace"), std::string::npos) << message;
}

TEST(TraceStoreErrors, EmptyFileAndDirectoryAreNotTraces) {
    ScratchDir dir;
    std::string path = dir.file("empty.db");
    std::ofstream(path).close();
    open_error(path, TraceErrorKind::not_a_trace);
    std::filesystem::create_directories(dir.file("folder.db"));
    open_error(dir.file("folder.db"), TraceErrorKind::not_a_trace);
}

TEST(TraceStoreErrors, OtherSqliteDatabaseIsNotATrace) {
    ScratchDir dir;
    std::string path = dir.file("other.sqlite");
    run_sql(path, "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');");
    std::string message = open_error(path, TraceErrorKind::not_a_trace);
    EXPECT_NE(message.find("not an ember trace"), std::string::npos) << message;
}

TEST(TraceStoreErrors, TruncatedCopyIsRefused) {
    ScratchDir dir;
    std::string path = dir.file("full.db");
    testing::write_sample_trace(path, 200);
    auto size = std::filesystem::file_size(path);
    ASSERT_GT(size, 16384u);
    for (std::uintmax_t cut : {size / 2, size - 8192, size - 100, std::uintmax_t{50}}) {
        std::string cut_path = dir.file("cut_" + std::to_string(cut) + ".db");
        std::filesystem::copy_file(path, cut_path);
        std::filesystem::resize_file(cut_path, cut);
        std::string message = open_error(cut_path, TraceErrorKind::truncated);
        EXPECT_NE(message.find("truncated"), std::string::npos) << message;
    }
}

// Garbage where pages should be: the reader reports corruption (at open or while
// reading), as a TraceError, never a crash.
TEST(TraceStoreErrors, DamagedPagesGiveATraceError) {
    ScratchDir dir;
    std::string path = dir.file("damaged.db");
    testing::write_sample_trace(path, 300);
    auto size = std::filesystem::file_size(path);
    {
        std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
        std::string garbage(static_cast<std::size_t>(size - 8192), '\x5a');
        file.seekp(8192);
        file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    }
    try {
        TraceReader reader(path);
        reader.for_each_kernel({}, [](const trace::KernelEvent&) { return true; });
        reader.for_each_range({}, [](const trace::RangeEvent&) { return true; });
        ADD_FAILURE() << "read a damaged file without error";
    } catch (const TraceError& error) {
        EXPECT_EQ(std::string(error.what()).rfind(path, 0), 0u) << error.what();
    }
}

TEST(TraceStoreErrors, NewerSchemaIsRefusedNamingBothVersions) {
    ScratchDir dir;
    std::string path = dir.file("future.db");
    testing::write_sample_trace(path, 1);
    // A file from a future ember that needs a reader newer than this one.
    const int future = kSchemaVersion + 3, needs = kSchemaVersion + 1;
    run_sql(path, "UPDATE run_metadata SET value = " + std::to_string(future) + " WHERE key = 'schema_version';" +
                      "UPDATE run_metadata SET value = " + std::to_string(needs) +
                      " WHERE key = 'min_reader_version';");
    std::string message = open_error(path, TraceErrorKind::version_too_new);
    EXPECT_NE(message.find("version " + std::to_string(future)), std::string::npos) << message;
    EXPECT_NE(message.find(">= " + std::to_string(needs)), std::string::npos) << message;
    EXPECT_NE(message.find("version " + std::to_string(kSchemaVersion)), std::string::npos) << message;
}

// A newer writer that only added tables keeps min_reader_version low: we open it.
TEST(TraceStoreErrors, NewerButCompatibleSchemaOpens) {
    ScratchDir dir;
    std::string path = dir.file("compatible.db");
    testing::write_sample_trace(path, 2);
    run_sql(path, "UPDATE run_metadata SET value = " + std::to_string(kSchemaVersion + 1) +
                      " WHERE key = 'schema_version';"
                      "CREATE TABLE gpu_metrics (time_ns INTEGER, value REAL);");
    TraceReader reader(path);
    EXPECT_EQ(reader.schema_version(), kSchemaVersion + 1);
    EXPECT_EQ(reader.min_reader_version(), kMinReaderVersionWritten);
    EXPECT_EQ(reader.event_count("kernels"), 2);
}

TEST(TraceStoreErrors, OlderSchemaIsRefusedNamingBothVersions) {
    ScratchDir dir;
    std::string path = dir.file("ancient.db");
    testing::write_sample_trace(path, 1);
    run_sql(path, "UPDATE run_metadata SET value = 0 WHERE key IN ('schema_version', 'min_reader_version');");
    std::string message = open_error(path, TraceErrorKind::version_too_old);
    EXPECT_NE(message.find("version 0"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(kOldestReadableSchemaVersion)), std::string::npos) << message;
}

TEST(TraceStoreErrors, MissingTableIsNamed) {
    ScratchDir dir;
    std::string path = dir.file("no_kernels.db");
    testing::write_sample_trace(path, 1);
    run_sql(path, "DROP TABLE kernels;");
    std::string message = open_error(path, TraceErrorKind::missing_table);
    EXPECT_NE(message.find("'kernels'"), std::string::npos) << message;

    std::string no_metadata = dir.file("no_metadata.db");
    testing::write_sample_trace(no_metadata, 1);
    run_sql(no_metadata, "DROP TABLE run_metadata;");
    open_error(no_metadata, TraceErrorKind::missing_table);
}

}  // namespace
}  // namespace ember::store

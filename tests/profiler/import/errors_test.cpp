// errors_test.cpp: bad input of every kind gives a store::TraceError whose message
// names the file and where (byte offset, element, or table and row) and what was
// wrong — never a crash — and leaves no output that looks complete: nothing at the
// output path (or the previous file there, untouched), no temporary files.
#include "profiler/import/import.h"
#include "profiler/store/reader.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

namespace {

using namespace ember;
using import_test::TempDir;
using store::TraceErrorKind;

struct Failure {
    TraceErrorKind kind;
    std::string message;
};

// Imports `input` expecting failure; checks the message names the input and that only
// `input` (and `keep`) is left in the folder.
Failure expect_import_failure(const TempDir& dir, const std::string& input,
                              const importing::ImportOptions& options = {}, std::vector<std::string> keep = {}) {
    Failure failure{TraceErrorKind::io, ""};
    const std::string output = dir.path("out.db");
    try {
        importing::import_file(input, output, options);
        ADD_FAILURE() << input << " imported without an error";
    } catch (const store::TraceError& error) {
        failure = {error.kind(), error.what()};
        EXPECT_NE(failure.message.find(input), std::string::npos)
            << "the message must name the file: " << failure.message;
    } catch (const std::exception& error) {
        ADD_FAILURE() << "not a TraceError: " << error.what();
    }
    keep.push_back(std::filesystem::path(input).filename().string());
    std::sort(keep.begin(), keep.end());
    EXPECT_EQ(dir.files(), keep) << "nothing but the input may be left: " << failure.message;
    return failure;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Imports the nsys fixture after `sql` has changed it; the import must fail.
importing::ImportOptions strict() {
    importing::ImportOptions options;
    options.strict = true;
    return options;
}

// The nsys fixture with `sql` applied, imported under ImportOptions::strict: the failure.
Failure nsys_fixture_failure(const std::string& sql) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    import_test::exec_sql(dir.path("r.sqlite"), sql);
    return expect_import_failure(dir, dir.path("r.sqlite"), strict());
}

// The same, imported as the reading commands do: the row skipped, counted and named.
importing::ImportCounts nsys_fixture_lenient(const std::string& sql) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    import_test::exec_sql(dir.path("r.sqlite"), sql);
    return importing::import_file(dir.path("r.sqlite"), dir.path("r.db")).counts;
}

importing::ImportOptions as_chrome() {
    importing::ImportOptions options;
    options.format = importing::SourceFormat::chrome;
    return options;
}

// --- JSON -----------------------------------------------------------------------------

TEST(ImportErrors, TruncatedGzipNamesTheByteWhereTheFileEnds) {
    TempDir dir;
    std::string gz = import_test::gzip_bytes(import_test::kineto_fixture());
    import_test::write_file(dir.path("cut.json.gz"), gz.substr(0, gz.size() / 2));
    Failure failure = expect_import_failure(dir, dir.path("cut.json.gz"));
    EXPECT_EQ(failure.kind, TraceErrorKind::truncated);
    EXPECT_TRUE(contains(failure.message, "truncated gzip")) << failure.message;
    EXPECT_TRUE(contains(failure.message, std::to_string(gz.size() / 2))) << failure.message;
}

TEST(ImportErrors, CorruptGzipNamesTheByte) {
    TempDir dir;
    std::string gz = import_test::gzip_bytes(import_test::kineto_fixture());
    for (std::size_t i = 20; i < 60; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
    import_test::write_file(dir.path("bad.json.gz"), gz);
    Failure failure = expect_import_failure(dir, dir.path("bad.json.gz"));
    EXPECT_TRUE(failure.kind == TraceErrorKind::corrupt || failure.kind == TraceErrorKind::not_a_trace)
        << failure.message;
    EXPECT_TRUE(contains(failure.message, "byte")) << failure.message;
}

TEST(ImportErrors, MalformedJsonNamesTheByteOffset) {
    TempDir dir;
    // A missing comma between two elements, at a known offset.
    std::string json =
        R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1} {"ph": "X"}]})";
    import_test::write_file(dir.path("comma.json"), json);
    Failure failure = expect_import_failure(dir, dir.path("comma.json"), as_chrome());
    EXPECT_EQ(failure.kind, TraceErrorKind::corrupt);
    EXPECT_TRUE(
        contains(failure.message, "malformed JSON at byte " + std::to_string(json.find(" {\"ph\": \"X\"}") + 1)))
        << failure.message;
    EXPECT_TRUE(contains(failure.message, "expected ',' or ']'")) << failure.message;
}

TEST(ImportErrors, AMalformedElementNamesItsNumberAndOffset) {
    TempDir dir;
    std::string json =
        R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, {"ph": "X", "ts": [1], "pid": 1}]})";
    import_test::write_file(dir.path("element.json"), json);
    Failure failure = expect_import_failure(dir, dir.path("element.json"), as_chrome());
    EXPECT_EQ(failure.kind, TraceErrorKind::corrupt);
    EXPECT_TRUE(contains(failure.message, "element #1 at byte " + std::to_string(json.find("{\"ph\": \"X\", \"ts\""))))
        << failure.message;
    EXPECT_TRUE(contains(failure.message, "\"ts\"")) << failure.message;
}

TEST(ImportErrors, TruncatedJsonSaysWhereItEnds) {
    TempDir dir;
    std::string json = import_test::kineto_fixture();
    json.resize(json.size() / 3);
    import_test::write_file(dir.path("short.json"), json);
    Failure failure = expect_import_failure(dir, dir.path("short.json"));
    EXPECT_EQ(failure.kind, TraceErrorKind::truncated);
    EXPECT_TRUE(contains(failure.message, "ends at byte " + std::to_string(json.size()))) << failure.message;
}

TEST(ImportErrors, NegativeDurationIsSkippedAndNamedOrAnErrorWhenStrict) {
    TempDir dir;
    std::string json = R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": -5, "args": {"device": 0, "stream": 7}}]})";
    import_test::write_file(dir.path("negative.json"), json);
    Failure failure = expect_import_failure(dir, dir.path("negative.json"), strict());
    EXPECT_EQ(failure.kind, TraceErrorKind::bad_value);
    EXPECT_TRUE(contains(failure.message, "negative duration (-5000 ns)")) << failure.message;
    EXPECT_TRUE(contains(failure.message, "element #0 at byte " + std::to_string(json.find("{\"ph\""))))
        << failure.message;
    importing::ImportedFile imported =
        import_test::import_skipping_invalid(dir.path("negative.json"), dir.path("out.db"));
    EXPECT_EQ(imported.counts.kernels, 0);
    ASSERT_EQ(imported.counts.invalid.count("negative duration"), 1u);
    EXPECT_EQ(imported.counts.invalid.at("negative duration").count, 1);
    const std::string summary = imported.counts.invalid_summary();
    EXPECT_TRUE(contains(summary,
                         "skipped 1 event that breaks the format's rules: 1 x negative duration (first: "
                         "traceEvents element #0 at byte " +
                             std::to_string(json.find("{\"ph\""))))
        << summary;
    EXPECT_TRUE(contains(summary, "--strict")) << summary;
}

TEST(ImportErrors, JsonThatIsNotATrace) {
    TempDir dir;
    import_test::write_file(dir.path("config.json"), R"({"learning_rate": 0.1, "layers": [1, 2, 3]})");
    Failure failure = expect_import_failure(dir, dir.path("config.json"));
    EXPECT_EQ(failure.kind, TraceErrorKind::not_a_trace);
    EXPECT_TRUE(contains(failure.message, "no traceEvents")) << failure.message;

    import_test::write_file(dir.path("empty.json"), "");
    EXPECT_EQ(expect_import_failure(dir, dir.path("empty.json"), {}, {"config.json"}).kind,
              TraceErrorKind::not_a_trace);
    import_test::write_file(dir.path("garbage.bin"), std::string("\x00\x01\x02garbage", 10));
    EXPECT_EQ(expect_import_failure(dir, dir.path("garbage.bin"), {}, {"config.json", "empty.json"}).kind,
              TraceErrorKind::not_a_trace);
}

TEST(ImportErrors, AFailedImportLeavesThePreviousOutputUntouched) {
    TempDir dir;
    import_test::write_file(dir.path("good.json"), import_test::kineto_fixture());
    importing::import_file(dir.path("good.json"), dir.path("out.db"));
    std::string before = import_test::read_file(dir.path("out.db"));
    import_test::write_file(dir.path("bad.json"), R"({"traceEvents": [{"ph": "X", "ts": "soon"}]})");
    EXPECT_THROW(importing::import_file(dir.path("bad.json"), dir.path("out.db"), as_chrome()), store::TraceError);
    EXPECT_EQ(import_test::read_file(dir.path("out.db")), before);
    EXPECT_EQ(dir.files(), (std::vector<std::string>{"bad.json", "good.json", "out.db"}));
}

TEST(ImportErrors, AnUnwritableOutputNamesIt) {
    TempDir dir;
    import_test::write_file(dir.path("good.json"), import_test::kineto_fixture());
    const std::string output = dir.path("no/such/folder/out.db");
    try {
        importing::import_file(dir.path("good.json"), output);
        FAIL() << "imported into a missing folder";
    } catch (const store::TraceError& error) {
        EXPECT_NE(std::string(error.what()).find("no/such/folder"), std::string::npos) << error.what();
    }
}

// --- Nsight Systems ------------------------------------------------------------------------

TEST(ImportErrors, AMissingRequiredColumnNamesTableAndColumn) {
    Failure failure = nsys_fixture_failure("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId;");
    EXPECT_EQ(failure.kind, TraceErrorKind::missing_table);
    EXPECT_TRUE(contains(failure.message, "table CUPTI_ACTIVITY_KIND_KERNEL has no column streamId"))
        << failure.message;
}

TEST(ImportErrors, AnIdThatPointsNowhereNamesTableAndRow) {
    Failure failure = nsys_fixture_failure("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 999 WHERE rowid = 3;");
    EXPECT_EQ(failure.kind, TraceErrorKind::bad_value);
    EXPECT_TRUE(contains(failure.message, "table CUPTI_ACTIVITY_KIND_RUNTIME row 3: nameId 999 is not in StringIds"))
        << failure.message;

    Failure domain = nsys_fixture_failure("UPDATE NVTX_EVENTS SET domainId = 42 WHERE text = 'inner';");
    EXPECT_TRUE(contains(domain.message, "table NVTX_EVENTS row 5: domainId 42 names no domain")) << domain.message;

    // Without --strict the row is skipped, counted and named.
    const importing::ImportCounts counts =
        nsys_fixture_lenient("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 999 WHERE rowid = 3;");
    EXPECT_EQ(counts.invalid_total(), 1);
    EXPECT_TRUE(
        contains(counts.invalid_summary(), "table CUPTI_ACTIVITY_KIND_RUNTIME row 3: nameId 999 is not in StringIds"))
        << counts.invalid_summary();
}

TEST(ImportErrors, NsysNegativeDurationAndWrongTypesNameTheRow) {
    Failure failure = nsys_fixture_failure("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = start - 7 WHERE rowid = 1;");
    EXPECT_TRUE(contains(failure.message, "table CUPTI_ACTIVITY_KIND_MEMCPY row 1: end 1503 lies before start 1510"))
        << failure.message;

    Failure text = nsys_fixture_failure("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon';");
    EXPECT_TRUE(contains(text.message, "table CUPTI_ACTIVITY_KIND_KERNEL row 1: start is text")) << text.message;
}

TEST(ImportErrors, ASqliteFileThatIsNeitherEmberNorNsys) {
    TempDir dir;
    import_test::exec_sql(dir.path("other.sqlite"),
                          "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');");
    Failure failure = expect_import_failure(dir, dir.path("other.sqlite"));
    EXPECT_EQ(failure.kind, TraceErrorKind::not_a_trace);
}

TEST(ImportErrors, ACorruptSqliteFileIsAnError) {
    TempDir dir;
    import_test::write_nsys_fixture(dir.path("r.sqlite"));
    std::string bytes = import_test::read_file(dir.path("r.sqlite"));
    for (std::size_t i = 100; i < bytes.size(); i += 97) bytes[i] = static_cast<char>(bytes[i] ^ 0xff);
    import_test::write_file(dir.path("r.sqlite"), bytes);
    expect_import_failure(dir, dir.path("r.sqlite"));
}

}  // namespace

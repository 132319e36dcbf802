// api_test.cpp: what the command line builds on — format detection from content,
// format names, default output names, several inputs into one job file (through
// merge) or one file each, and open_trace(): an ember trace as it is, anything else
// imported once into a cache keyed by path, size and modification time, then reused.
#include "profiler/export/chrome_trace.h"
#include "profiler/import/import.h"
#include "profiler/job/import_job.h"
#include "profiler/import/import_sink.h"
#include "profiler/store/reader.h"
#include "profiler/synth/synthetic_trace.h"
#include "tests/profiler/import/import_fixtures.h"
#include "tests/profiler/import/import_steps.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

namespace {

using namespace ember;
using import_test::TempDir;
using importing::SourceFormat;

synth::SyntheticTraceOptions small_synthetic() {
    synth::SyntheticTraceOptions options;
    options.events = 1000;
    return options;
}

// The linked-GPU-event count kept while importing equals the definition (a GPU event
// with a nonzero correlation id that some API call has), computed here from the ids;
// ids it cannot hold leave the count to the query.
TEST(ImportApi, LinkTallyCountsWhatTheQueryWould) {
    import_test::XorShift64 next{0x2545F4914F6CDD1Dull};
    for (int round = 0; round < 50; ++round) {
        importing::LinkTally tally;
        std::set<std::uint64_t> api;
        std::map<std::uint64_t, std::int64_t> gpu;
        // A run of ids from anywhere (CUPTI's start where the process had got to), across
        // page boundaries; 0 included (never linked).
        const std::uint64_t base = round % 3 == 0 ? 0 : next() % (std::uint64_t{1} << (round % 2 ? 24 : 62));
        const std::uint64_t range = 1 + next() % 200000;
        for (int i = 0; i < 3000; ++i) {
            std::uint64_t id = next() % 8 == 0 ? 0 : base + next() % range;
            if (next() % 2) {
                tally.api_call(id);
                api.insert(id);
            } else {
                tally.gpu_event(id);
                ++gpu[id];
            }
        }
        std::int64_t expected = 0;
        for (const auto& [id, count] : gpu) expected += (id != 0 && api.count(id)) ? count : 0;
        ASSERT_TRUE(tally.linked().has_value());
        EXPECT_EQ(*tally.linked(), expected) << "round " << round;
    }
    importing::LinkTally scattered;  // ids in more than 256 pages of 65,536
    for (std::uint64_t page = 0; page <= 256; ++page) scattered.gpu_event((page << 16) + 1);
    EXPECT_FALSE(scattered.linked().has_value());
    importing::LinkTally crowded;
    crowded.api_call(3);
    for (int i = 0; i < 300; ++i) crowded.gpu_event(3);
    EXPECT_FALSE(crowded.linked().has_value());
}

TEST(ImportApi, DetectsTheFormatFromContentNotName) {
    TempDir dir;
    import_test::write_file(dir.path("a.txt"), import_test::kineto_fixture());
    import_test::write_file(dir.path("b.bin"), import_test::gzip_bytes(import_test::kineto_2021_fixture()));
    import_test::write_file(dir.path("c.json"), R"([{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 0, "dur": 1}])");
    import_test::write_nsys_fixture(dir.path("d.db"));
    synth::SyntheticTraceOptions options;
    options.events = 2000;
    synth::write_synthetic_traces(dir.path("e.sqlite"), options);
    import_test::export_chrome(dir.path("e.sqlite"), dir.path("f.json"));
    EXPECT_EQ(importing::detect_format(dir.path("a.txt")), SourceFormat::kineto);
    EXPECT_EQ(importing::detect_format(dir.path("b.bin")), SourceFormat::kineto);
    EXPECT_EQ(importing::detect_format(dir.path("c.json")), SourceFormat::chrome);
    EXPECT_EQ(importing::detect_format(dir.path("d.db")), SourceFormat::nsys);
    EXPECT_EQ(importing::detect_format(dir.path("e.sqlite")), SourceFormat::ember);
    EXPECT_EQ(importing::detect_format(dir.path("f.json")),
              SourceFormat::chrome);  // ember's export, cat "kernel" and all
    try {
        importing::detect_format(dir.path("missing.json"));
        FAIL() << "a missing file was detected";
    } catch (const store::TraceError& error) {
        EXPECT_EQ(error.kind(), store::TraceErrorKind::not_found);
        EXPECT_NE(std::string(error.what()).find("missing.json"), std::string::npos);
    }
}

TEST(ImportApi, FormatNamesRoundTrip) {
    for (SourceFormat format : {SourceFormat::auto_detect, SourceFormat::kineto, SourceFormat::nsys,
                                SourceFormat::chrome, SourceFormat::ember}) {
        EXPECT_EQ(importing::parse_source_format(importing::source_format_name(format)), format);
    }
    EXPECT_FALSE(importing::parse_source_format("perfetto").has_value());
}

TEST(ImportApi, DefaultOutputNames) {
    EXPECT_EQ(importing::default_output_path("run/rank0.pt.trace.json.gz"), "run/rank0.db");
    EXPECT_EQ(importing::default_output_path("trace.json"), "trace.db");
    EXPECT_EQ(importing::default_output_path("report.sqlite"), "report.db");
    EXPECT_EQ(importing::default_output_path("job.db"), "job.ember.db");
}

TEST(ImportApi, AnEmberTraceIsNotImported) {
    TempDir dir;
    synth::write_synthetic_traces(dir.path("t.db"), small_synthetic());
    EXPECT_THROW(importing::import_file(dir.path("t.db"), dir.path("u.db")), store::TraceError);
    import_test::write_file(dir.path("k.json"), import_test::kineto_fixture());
    EXPECT_THROW(importing::import_file(dir.path("k.json"), dir.path("k.json")), store::TraceError);
}

std::string kineto_rank(int rank) {
    std::string json = import_test::kineto_fixture();
    std::string from = R"("rank": 3)";
    json.replace(json.find(from), from.size(), "\"rank\": " + std::to_string(rank));
    return json;
}

TEST(ImportApi, SeveralRanksGoIntoOneJobFile) {
    TempDir dir;
    import_test::write_file(dir.path("rank1.json"), kineto_rank(1));
    import_test::write_file(dir.path("rank0.json.gz"), import_test::gzip_bytes(kineto_rank(0)));
    synth::SyntheticTraceOptions synthetic;
    synthetic.events = 3000;
    synth::write_synthetic_traces(dir.path("ember_rank.db"), synthetic);  // an ember trace joins as it is
    importing::ImportReport report = job::import_job_file(
        {dir.path("rank1.json"), dir.path("rank0.json.gz"), dir.path("ember_rank.db")}, dir.path("job.db"));
    EXPECT_TRUE(report.merged);
    ASSERT_EQ(report.files.size(), 3u);
    EXPECT_EQ(report.files[0].rank, 1);
    EXPECT_EQ(report.files[1].rank, 0);
    EXPECT_EQ(report.files[2].format, SourceFormat::ember);
    EXPECT_EQ(report.outputs, std::vector<std::string>{dir.path("job.db")});
    store::TraceReader job(dir.path("job.db"));
    EXPECT_EQ(job.processes().size(), 3u);
    EXPECT_EQ(job.event_count("kernels"), 3 + 3 + store::TraceReader(dir.path("ember_rank.db")).event_count("kernels"));
    EXPECT_EQ(dir.files(), (std::vector<std::string>{"ember_rank.db", "job.db", "rank0.json.gz", "rank1.json"}));
}

TEST(ImportApi, SeveralRanksIntoOneFileEach) {
    TempDir dir;
    import_test::write_file(dir.path("a.json"), kineto_rank(0));
    import_test::write_file(dir.path("b.json"), kineto_rank(1));
    importing::ImportReport report =
        importing::import_trace({dir.path("a.json"), dir.path("b.json")}, dir.path("job.db"));
    EXPECT_FALSE(report.merged);
    EXPECT_EQ(report.outputs, (std::vector<std::string>{dir.path("job.rank0.db"), dir.path("job.rank1.db")}));
    EXPECT_EQ(store::TraceReader(dir.path("job.rank1.db")).run().rank, 1);
}

TEST(ImportApi, AFailedJobLeavesNoJobFile) {
    TempDir dir;
    import_test::write_file(dir.path("a.json"), kineto_rank(0));
    import_test::write_file(dir.path("b.json"), R"({"traceEvents": [{"ph": "X", "ts": true}]})");
    EXPECT_THROW(job::import_job_file({dir.path("a.json"), dir.path("b.json")}, dir.path("job.db")), store::TraceError);
    EXPECT_EQ(dir.files(), (std::vector<std::string>{"a.json", "b.json"}));
}

TEST(ImportApi, OpenTraceImportsOnceThenReusesUntilTheInputChanges) {
    TempDir dir;
    const std::string input = dir.path("rank3.json");
    import_test::write_file(input, import_test::kineto_fixture());
    int imports = 0, reuses = 0;
    importing::OpenTraceOptions options;
    options.on_import = [&](const importing::OpenedTrace& opened) {
        imports += opened.imported;
        reuses += opened.reused;
    };
    importing::OpenedTrace first = importing::open_trace(input, options);
    EXPECT_TRUE(first.imported);
    EXPECT_EQ(first.path, input + ".ember-cache.db");
    EXPECT_EQ(first.format, SourceFormat::kineto);
    ASSERT_TRUE(first.import.has_value());
    EXPECT_EQ(first.import->counts.kernels, 3);
    importing::OpenedTrace second = importing::open_trace(input, options);
    EXPECT_TRUE(second.reused);
    EXPECT_FALSE(second.imported);
    EXPECT_EQ(second.path, first.path);
    EXPECT_EQ(imports, 1);
    EXPECT_EQ(reuses, 1);
    EXPECT_EQ(store::TraceReader(second.path).event_count("kernels"), 3);

    // A changed input (size and time) is imported again.
    import_test::write_file(input, import_test::kineto_fixture() + "\n\n");
    importing::OpenedTrace third = importing::open_trace(input, options);
    EXPECT_TRUE(third.imported);
    EXPECT_EQ(imports, 2);

    // An ember trace is itself.
    synth::write_synthetic_traces(dir.path("own.db"), small_synthetic());
    importing::OpenedTrace own = importing::open_trace(dir.path("own.db"), options);
    EXPECT_EQ(own.path, dir.path("own.db"));
    EXPECT_FALSE(own.imported || own.reused);
    EXPECT_EQ(importing::open_as_ember_trace(dir.path("own.db")), dir.path("own.db"));
}

TEST(ImportApi, TheUserCacheFollowsXdgCacheHome) {
    TempDir dir, cache;
    const std::string input = dir.path("report.sqlite");
    import_test::write_nsys_fixture(input);
    const char* previous = std::getenv("XDG_CACHE_HOME");
    std::string saved = previous != nullptr ? previous : "";
    ::setenv("XDG_CACHE_HOME", cache.folder().c_str(), 1);
    importing::OpenTraceOptions options;
    options.cache = importing::CachePlace::user_cache;
    importing::OpenedTrace opened = importing::open_trace(input, options);
    std::string path = importing::cache_path_for(input, importing::CachePlace::user_cache);
    if (previous != nullptr)
        ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else
        ::unsetenv("XDG_CACHE_HOME");
    EXPECT_TRUE(opened.imported);
    EXPECT_EQ(opened.path, path);
    EXPECT_EQ(path.rfind(cache.folder() + "/ember/report.sqlite.", 0), 0u) << path;
    EXPECT_EQ(store::TraceReader(opened.path).event_count("kernels"), 1);
    EXPECT_EQ(dir.files(), std::vector<std::string>{"report.sqlite"});  // nothing written beside the input
}

TEST(ImportApi, AnUnwritableFolderFallsBackToTheUserCache) {
    if (::geteuid() == 0) GTEST_SKIP() << "running as root: every folder is writable, nothing to fall back from";
    TempDir dir, cache;
    const std::string input = dir.path("rank3.json");
    import_test::write_file(input, import_test::kineto_fixture());
    ::chmod(dir.folder().c_str(), 0555);
    ::setenv("XDG_CACHE_HOME", cache.folder().c_str(), 1);
    importing::OpenedTrace opened = importing::open_trace(input);
    ::unsetenv("XDG_CACHE_HOME");
    ::chmod(dir.folder().c_str(), 0755);
    EXPECT_TRUE(opened.imported);
    EXPECT_EQ(opened.path.rfind(cache.folder(), 0), 0u) << opened.path;
}

}  // namespace

// names_test.cpp: names NVTX gives that are not events: category names
// (nvtxNameCategory, nvtxDomainNameCategory) land in the nvtx_categories table,
// including names given before the session opened and renames; CUDA stream names
// (nvtxNameCudaStream / nvtxNameCuStream) are kept per stream handle and given to
// the stream's row whether it is written before or after the name arrives (the
// CUPTI half with hand-made records, so no GPU is needed); and a file written
// before nvtx_categories existed still opens.
//
// NVTX reaches the collector in this test process through the static injection
// hook (nvtx_static_injection.cpp is compiled into this executable).
#include "collectors/cupti_collector.h"
#include "collectors/cupti_records.h"
#include "collectors/session.h"
#include "profiler/store/reader.h"
#include "profiler/store/writer.h"
#include "tests/collectors/subprocess.h"
#include "tests/collectors/host_session.h"

#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <sqlite3.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>

namespace ember {
namespace {

// (domain name, category) -> name, as the reader gives them back.
std::map<std::pair<std::string, std::uint32_t>, std::string> category_names(const store::TraceReader& reader) {
    std::map<std::pair<std::string, std::uint32_t>, std::string> names;
    for (const store::NvtxCategoryName& named : reader.nvtx_category_names())
        names[{std::string(reader.string(named.domain_id)), named.category}] = named.name;
    return names;
}

TEST(CollectorNames, CategoryNamesOfTheDefaultAndOtherDomainsAreStored) {
    // Named before any session exists: kept and written when one opens.
    nvtxNameCategoryA(1, "early");
    nvtxDomainHandle_t domain = nvtxDomainCreateA("names test");
    nvtxDomainNameCategoryA(domain, 1, "domain early");

    std::string path = test::temp_path("categories.db");
    collector::start_session(test::host_session_options(path));
    nvtxNameCategoryA(2, "forward");
    nvtxNameCategoryW(3, L"w\u00efde");
    nvtxDomainNameCategoryA(domain, 2, "backward");
    nvtxDomainNameCategoryW(domain, 4, L"optimizer");
    nvtxNameCategoryA(2, "forward pass");  // renamed: the last name wins
    std::string error;
    ASSERT_TRUE(collector::stop_session(&error)) << error;

    store::TraceReader reader(path);
    std::map<std::pair<std::string, std::uint32_t>, std::string> expected = {
        {{"", 1}, "early"},
        {{"", 2}, "forward pass"},
        {{"", 3},
         "w\xC3\xAF"
         "de"},
        {{"names test", 1}, "domain early"},
        {{"names test", 2}, "backward"},
        {{"names test", 4}, "optimizer"},
    };
    EXPECT_EQ(category_names(reader), expected);
    EXPECT_EQ(reader.nvtx_category_name(trace::kNoString, 2), "forward pass");
    EXPECT_EQ(reader.nvtx_category_name(trace::kNoString, 9), "");
    store::remove_trace_files(path);
}

TEST(CollectorNames, StreamNamesAreKeptPerHandle) {
    // No CUPTI here (no device): the names wait, per handle, for CUPTI to start.
    auto copies = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000});
    auto compute = reinterpret_cast<CUstream>(std::uintptr_t{0x2000});
    nvtxNameCudaStreamA(copies, "copies");
    nvtxNameCuStreamW(compute, L"compute \u00e9");
    EXPECT_EQ(collector::cuda_stream_name(0x1000), "copies");
    EXPECT_EQ(collector::cuda_stream_name(0x2000), "compute \xC3\xA9");
    nvtxNameCudaStreamA(copies, "host copies");
    EXPECT_EQ(collector::cuda_stream_name(0x1000), "host copies");
    EXPECT_EQ(collector::cuda_stream_name(0x3000), "");
}

CUpti_ActivityKernel10 kernel_on(std::uint32_t stream, std::uint64_t start) {
    CUpti_ActivityKernel10 kernel;
    std::memset(&kernel, 0, sizeof kernel);
    kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    kernel.contextId = 1;
    kernel.streamId = stream;
    kernel.start = start;
    kernel.end = start + 10;
    kernel.gridX = kernel.gridY = kernel.gridZ = 1;
    kernel.blockX = kernel.blockY = kernel.blockZ = 1;
    kernel.name = "kernel";
    return kernel;
}

TEST(CollectorNames, AStreamNameReachesItsRowBeforeOrAfterTheRowIsWritten) {
    std::string path = test::temp_path("streams.db");
    {
        store::TraceWriter writer(path, trace::RunInfo{});
        collector::ActivityRecorder recorder(writer);
        CUpti_ActivityContext3 context;
        std::memset(&context, 0, sizeof context);
        context.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
        context.contextId = 1;
        context.nullStreamId = 7;
        recorder.record(reinterpret_cast<const CUpti_Activity&>(context));

        recorder.name_stream(8, "copies");  // before stream 8 has a row
        CUpti_ActivityKernel10 first = kernel_on(7, 100);
        CUpti_ActivityKernel10 second = kernel_on(8, 200);
        CUpti_ActivityKernel10 third = kernel_on(9, 300);
        recorder.record(reinterpret_cast<const CUpti_Activity&>(first));
        recorder.record(reinterpret_cast<const CUpti_Activity&>(second));
        recorder.record(reinterpret_cast<const CUpti_Activity&>(third));
        writer.flush();                      // stream 9's row is in the file
        recorder.name_stream(9, "compute");  // after
        recorder.name_stream(7, "main");     // the NULL stream, named "default" until now
        writer.close();
    }
    store::TraceReader reader(path);
    std::map<std::uint64_t, std::string> names;
    for (const trace::StreamInfo& stream : reader.streams()) names[stream.cuda_stream_id] = stream.name;
    EXPECT_EQ(names, (std::map<std::uint64_t, std::string>{{7, "main"}, {8, "copies"}, {9, "compute"}}));
    store::remove_trace_files(path);
}

TEST(CollectorNames, AFileWithoutTheCategoryTableStillOpens) {
    // A file as written before nvtx_categories existed: the same file, table dropped.
    std::string path = test::temp_path("old.db");
    {
        store::TraceWriter writer(path, trace::RunInfo{});
        writer.name_nvtx_category(trace::kNoString, 1, "compute");
        writer.close();
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE nvtx_categories", nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);

    store::TraceReader reader(path);
    EXPECT_TRUE(reader.complete());
    EXPECT_TRUE(reader.nvtx_category_names().empty());
    EXPECT_EQ(reader.nvtx_category_name(trace::kNoString, 1), "");
    store::remove_trace_files(path);
}

}  // namespace
}  // namespace ember

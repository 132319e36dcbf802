// job_command_test.cpp: several rank files as one job on the command line: `ember stats
// FILES... --report collectives` (text and JSON), the default report of several files,
// `ember merge`, on a job generated with a known straggler and skewed clocks.
#include "tests/support/shell_command.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace {

using Result = ember::test_support::CommandResult;

Result run(const std::string& arguments, bool with_stderr = true) {
    return ember::test_support::run_shell(std::string(EMBER_CLI_BINARY) + " " + arguments +
                                          (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

class JobCommands : public ::testing::Test {
  protected:
    void SetUp() override {
        folder_ = (std::filesystem::temp_directory_path() / ("ember-job-cli-" + std::to_string(::getpid()))).string();
        std::filesystem::create_directories(folder_);
        // The job files live in a cache of their own: nothing of the user's is touched.
        setenv("XDG_CACHE_HOME", (folder_ + "/cache").c_str(), 1);
        const Result synth = run("synth -o " + folder_ +
                                 "/job.db --ranks 4 --straggler 1 --straggler-ms 3 --clock-skew-ms 6 --steps 10");
        ASSERT_EQ(synth.exit_code, 0) << synth.output;
        ASSERT_NE(synth.output.find("straggler: rank 1"), std::string::npos) << synth.output;
        for (int r = 0; r < 4; ++r) files_ += " " + folder_ + "/job.rank" + std::to_string(r) + ".db";
    }
    void TearDown() override { std::filesystem::remove_all(folder_); }
    std::string folder_;
    std::string files_;
};

TEST_F(JobCommands, CollectivesReportInJson) {
    const Result result = run("stats" + files_ + " --report collectives --format json", false);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const nlohmann::json document = nlohmann::json::parse(result.output);
    ASSERT_EQ(document["files"].size(), 4u);
    const nlohmann::json& collectives = document["reports"]["collectives"];
    EXPECT_EQ(collectives["straggler"], 1);
    ASSERT_EQ(collectives["ranks"].size(), 4u);
    for (const nlohmann::json& row : collectives["ranks"]) {
        ASSERT_TRUE(row.contains("rank") && row.contains("wait_ns") && row.contains("arrived_last")) << row.dump();
        if (row["rank"] == 1) {
            EXPECT_EQ(row["arrived_last"], 20);
            EXPECT_LT(row["wait_ns"].get<long long>(), 10'000);
        } else {
            // 3 ms a step, less what the others' own jitter makes up: about 30 ms each.
            EXPECT_GT(row["wait_ns"].get<long long>(), 25'000'000);
        }
    }
    EXPECT_EQ(collectives["collectives"].size(), 20u);  // every collective in JSON
    EXPECT_GT(collectives["recoverable_ns"].get<long long>(), 75'000'000);
    EXPECT_FALSE(collectives["doing_instead"].empty());
}

TEST_F(JobCommands, EveryReportOfSeveralFilesSpeaksOfTheJob) {
    const Result result = run("stats" + files_);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    for (const char* expected :
         {"Collectives across ranks (4 ranks, 20 collectives matched", "straggler: rank 1 arrived last",
          "Ranks (compute, wait in collectives", "What rank 1 did longer", "Communication Med"})
        EXPECT_NE(result.output.find(expected), std::string::npos) << expected << "\n" << result.output;
    // The old verdict of NVTX waits alone never stands beside collectives that waited.
    EXPECT_EQ(result.output.find("the ranks waited alike"), std::string::npos);
}

TEST_F(JobCommands, MergeAlignsOnTheCollectivesAndNamesTheStraggler) {
    const Result result = run("merge -o " + folder_ + "/merged.db" + files_);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("(ends of 20 collectives)"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("straggler: rank 1 arrived last"), std::string::npos) << result.output;
    // The merged file is one job: the same answer from it alone.
    const Result stats = run("stats " + folder_ + "/merged.db --report collectives --format json", false);
    ASSERT_EQ(stats.exit_code, 0) << stats.output;
    EXPECT_EQ(nlohmann::json::parse(stats.output)["reports"]["collectives"]["straggler"], 1);
}

TEST_F(JobCommands, DiffOfTwoJobsComparesEachRanksWait) {
    // B: the same job with rank 2 the straggler instead, 1 ms a step.
    const Result synth =
        run("synth -o " + folder_ + "/b.db --ranks 4 --straggler 2 --straggler-ms 1 --clock-skew-ms 6 --steps 10");
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
    std::string b_files;
    for (int r = 0; r < 4; ++r) b_files += " " + folder_ + "/b.rank" + std::to_string(r) + ".db";
    const Result text = run("diff" + files_ + " --vs" + b_files);
    ASSERT_EQ(text.exit_code, 0) << text.output;
    EXPECT_NE(text.output.find("Waiting in collectives, rank by rank (A -> B)"), std::string::npos) << text.output;
    EXPECT_NE(text.output.find("straggler: A rank 1 "), std::string::npos) << text.output;
    EXPECT_NE(text.output.find("; B rank 2 "), std::string::npos) << text.output;
    EXPECT_NE(text.output.find("Step time: B is faster"), std::string::npos) << text.output;
    const Result json = run("diff" + files_ + " --vs" + b_files + " --format json", false);
    ASSERT_EQ(json.exit_code, 0) << json.output;
    const nlohmann::json document = nlohmann::json::parse(json.output);
    EXPECT_EQ(document["job_diff"]["a"]["straggler"], 1);
    EXPECT_EQ(document["job_diff"]["b"]["straggler"], 2);
    ASSERT_EQ(document["job_diff"]["ranks"].size(), 4u);
    for (const nlohmann::json& row : document["job_diff"]["ranks"])
        EXPECT_EQ(row["delta_wait_ns"].get<long long>(),
                  row["b_wait_ns"].get<long long>() - row["a_wait_ns"].get<long long>());
    // One file a side is the classic diff, two files with no --vs too; one alone is an error.
    EXPECT_EQ(run("diff " + folder_ + "/job.rank0.db " + folder_ + "/b.rank0.db").exit_code, 0);
    EXPECT_EQ(run("diff " + folder_ + "/job.rank0.db").exit_code, 2);
}

TEST_F(JobCommands, ExportOfSeveralRankFilesIsTheJob) {
    EXPECT_EQ(run("export" + files_ + " --format chrome").exit_code, 2);  // one job, one output: -o is needed
    const Result result = run("export" + files_ + " --format chrome -o " + folder_ + "/job.json");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(folder_ + "/job.json");
    const nlohmann::json trace = nlohmann::json::parse(in);
    std::set<std::string> processes;
    for (const nlohmann::json& event : trace["traceEvents"])
        if (event.value("ph", "") == "M" && event.value("name", "") == "process_name")
            processes.insert(event["args"]["name"].get<std::string>());
    for (int r = 0; r < 4; ++r)
        EXPECT_TRUE(processes.count("rank " + std::to_string(r) + " (pid " + std::to_string(20000 + r) + ")")) << r;
}

// The job file of several rank files is cached (XDG_CACHE_HOME/ember/job-*.db). Written
// again, it is moved into place over a stale SQLite companion of an older job file (a
// -wal replayed into the new file would change it), which is removed, and no temporary
// is left in the cache.
TEST_F(JobCommands, TheCachedJobFileReplacesAStaleCompanion) {
    const Result first = run("stats" + files_);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::filesystem::path cache = folder_ + "/cache/ember";
    std::vector<std::filesystem::path> jobs;
    for (const auto& entry : std::filesystem::directory_iterator(cache))
        if (entry.path().filename().string().rfind("job-", 0) == 0 && entry.path().extension() == ".db")
            jobs.push_back(entry.path());
    ASSERT_EQ(jobs.size(), 1u);
    const std::string job = jobs.front().string();
    std::filesystem::remove(job);
    const std::string stale = "a -wal of an older job file";
    std::ofstream(job + "-wal") << stale;
    const Result again = run("stats" + files_);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_EQ(again.output, first.output);
    std::ifstream companion(job + "-wal");
    const std::string left((std::istreambuf_iterator<char>(companion)), std::istreambuf_iterator<char>());
    EXPECT_EQ(left.find(stale), std::string::npos) << "the stale -wal is still beside the job file";
    for (const auto& entry : std::filesystem::directory_iterator(cache))
        EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST_F(JobCommands, OneRankSaysWhatItNeeds) {
    const Result result = run("stats " + folder_ + "/job.rank0.db --report collectives");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("one rank: collectives are matched across the ranks of a job"), std::string::npos)
        << result.output;
}

TEST_F(JobCommands, TheSameFileTwiceIsExitCodeTwo) {
    const Result result = run("stats" + files_ + " " + folder_ + "/job.rank2.db --report collectives");
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("given twice"), std::string::npos) << result.output;
}

TEST_F(JobCommands, AMissingRankFileIsExitCodeTwo) {
    const Result result = run("stats" + files_ + " " + folder_ + "/no-such-rank.db --report collectives");
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("no-such-rank.db"), std::string::npos) << result.output;
}

}  // namespace

// command_test.cpp: `ember stats` and `ember export` run as a user runs them:
// exit codes, the message on bad files (not a trace, truncated, written by a
// future ember), and the files each export writes.
#include "profiler/store/schema.h"
#include "tests/support/fixture_trace.h"
#include "tests/support/read_file.h"
#include "tests/support/shell_command.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Result = ember::test_support::CommandResult;

// The build passes the path of the `ember` executable (tests/profiler/export/CMakeLists.txt).
std::string ember_binary() {
    return EMBER_CLI_BINARY;
}

Result run(const std::string& arguments) {
    return ember::test_support::run_shell(ember_binary() + " " + arguments + " 2>&1");  // stdout and stderr
}

class Commands : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(std::filesystem::exists(ember_binary())) << "no ember binary at " << ember_binary();
        trace_ = ember::testing::temporary_path("command-fixture", ".db");
        ember::testing::write_fixture_trace(trace_);
    }
    void TearDown() override {
        if (!trace_.empty()) std::remove(trace_.c_str());
    }
    std::string trace_;
};

TEST_F(Commands, StatsPrintsEveryReport) {
    Result result = run("stats " + trace_);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    for (const char* title :
         {"WARNING: 12 records were dropped", "GPU kernels", "GPU memory operations", "CUDA API calls", "NVTX ranges",
          "GPU time per NVTX range", "Training steps", "GPU busy over the run", "Longest GPU idle gaps", "Advice"}) {
        EXPECT_NE(result.output.find(title), std::string::npos) << title;
    }
}

TEST_F(Commands, StatsJsonParses) {
    Result result = run("stats " + trace_ + " --format json --report kernels,steps --time-unit us 2>/dev/null");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    nlohmann::json document = nlohmann::json::parse(result.output);
    // kernels; steps as its summary, its slowest steps and (machine-readable formats) every step.
    std::vector<std::string> keys;
    for (const auto& [key, value] : document["reports"].items()) keys.push_back(key);
    EXPECT_EQ(keys, (std::vector<std::string>{"kernels", "slowest_steps", "steps", "steps_summary"}));
    EXPECT_DOUBLE_EQ(document["reports"]["kernels"][0]["total"].get<double>(), 0.6);
}

TEST_F(Commands, StatsRefusesAFileThatIsNotATrace) {
    Result result = run("stats /etc/passwd");
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.output.find("/etc/passwd"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("not a trace"), std::string::npos) << result.output;
}

TEST_F(Commands, StatsRefusesAMissingFile) {
    Result result = run("stats /nonexistent/trace.db");
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.output.find("/nonexistent/trace.db"), std::string::npos) << result.output;
}

TEST_F(Commands, StatsRefusesATruncatedTrace) {
    std::string truncated = ember::testing::temporary_path("command-truncated", ".db");
    {
        const std::string content = ember::test_support::read_file(trace_);
        ASSERT_GT(content.size(), 8192u);
        std::ofstream out(truncated, std::ios::binary);
        out.write(content.data(), static_cast<std::streamsize>(content.size() / 2));
    }
    Result result = run("stats " + truncated);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(truncated), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("GPU kernels"), std::string::npos) << "no report from a truncated file";
    Result exported = run("export " + truncated + " --format chrome -o -");
    EXPECT_EQ(exported.exit_code, 2) << exported.output;
    std::remove(truncated.c_str());
}

TEST_F(Commands, StatsRefusesATraceFromAFutureEmber) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(trace_.c_str(), &db), SQLITE_OK);
    std::string future = std::to_string(ember::store::kSchemaVersion + 5);
    std::string sql = "UPDATE run_metadata SET value = " + future +
                      " WHERE key IN ('schema_version', 'min_reader_version');"
                      "PRAGMA user_version = " +
                      future + ";";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    Result result = run("stats " + trace_);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(trace_), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(future), std::string::npos)
        << "the message names the file's version: " << result.output;
}

TEST_F(Commands, BadOptionValuesExitTwo) {
    EXPECT_EQ(run("stats " + trace_ + " --report nonsense").exit_code, 2);
    EXPECT_EQ(run("stats " + trace_ + " --format xml").exit_code, 2);
    EXPECT_EQ(run("stats " + trace_ + " --time-unit hours").exit_code, 2);
    EXPECT_EQ(run("stats " + trace_ + " --sort speed").exit_code, 2);
    EXPECT_EQ(run("export " + trace_ + " --format pdf").exit_code, 2);
    EXPECT_EQ(run("export " + trace_ + " --format csv --table nonsense").exit_code, 2);
}

TEST_F(Commands, EveryExportWritesItsFile) {
    std::filesystem::path directory = ember::testing::temporary_path("command-exports", "");
    std::filesystem::create_directories(directory);
    struct Case {
        const char* arguments;
        const char* file;
    };
    for (const Case& c : {Case{"--format chrome", "out.json"}, Case{"--format speedscope", "out.speedscope.json"},
                          Case{"--format folded", "out.folded"}, Case{"--format folded --stacks host", "host.folded"},
                          Case{"--format svg", "out.svg"}, Case{"--format csv --table kernels", "kernels.csv"},
                          Case{"--format csv", "tables"}}) {
        std::string path = (directory / c.file).string();
        Result result = run("export " + trace_ + " " + c.arguments + " -o " + path);
        EXPECT_EQ(result.exit_code, 0) << c.arguments << ": " << result.output;
        EXPECT_TRUE(std::filesystem::exists(path)) << c.arguments;
    }
    EXPECT_TRUE(std::filesystem::exists(directory / "tables" / "ranges.csv"));
    Result folded = run("export " + trace_ + " --format folded -o -");
    EXPECT_NE(folded.output.find("step;forward;gemm 400\n"), std::string::npos) << folded.output;
    std::filesystem::remove_all(directory);
}

}  // namespace

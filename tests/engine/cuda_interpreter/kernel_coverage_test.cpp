// Every __global__ function in engine/ and samples/ is launched by some kernel-
// interpreter test, so a new kernel cannot arrive untested. The other interpreter test
// programs record what each of their tests launched (coverage_listener.cpp); CTest runs
// them first (fixture cuda_interpreter_kernels). This test lists their current tests,
// reads one record per test (a missing record means a test did not run) and compares
// the union with the kernels found in the sources.
#include "tests/support/shell_command.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Kernel = std::pair<std::string, std::string>;  // source relative to the repository, name

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::stringstream stream(text);
    for (std::string part; std::getline(stream, part, separator);)
        if (!part.empty()) parts.push_back(part);
    return parts;
}

// The kernel names of `__global__ void name(` declarations in a source text.
std::vector<std::string> kernel_names(const std::string& text) {
    std::vector<std::string> names;
    const auto skip_space = [&](std::size_t i) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        return i;
    };
    for (std::size_t at = text.find("__global__"); at != std::string::npos; at = text.find("__global__", at + 1)) {
        std::size_t i = skip_space(at + 10);
        if (text.compare(i, 4, "void") != 0) continue;
        i = skip_space(i + 4);
        const std::size_t start = i;
        while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
        if (i > start && text[skip_space(i)] == '(') names.push_back(text.substr(start, i - start));
    }
    return names;
}

// Every kernel declared in a .cu or .cuh under engine/ and samples/.
std::set<Kernel> kernels_in_sources() {
    const fs::path root = EMBER_TEST_SOURCE_DIR;
    std::set<Kernel> kernels;
    for (const char* folder : {"engine", "samples"})
        for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
            const auto extension = entry.path().extension();
            if (!entry.is_regular_file() || (extension != ".cu" && extension != ".cuh")) continue;
            std::ifstream in(entry.path());
            const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            const std::string relative = fs::relative(entry.path(), root).string();
            for (const std::string& name : kernel_names(text)) kernels.insert({relative, name});
        }
    return kernels;
}

// "Suite.Test" names of a gtest program, as its coverage records name them.
std::vector<std::string> tests_of(const std::string& program) {
    std::vector<std::string> tests;
    const std::string output =
        ember::test_support::run_shell("'" + program + "' --gtest_list_tests 2>/dev/null").output;
    std::string suite;
    for (const std::string& line : split(output, '\n')) {
        if (line.empty()) continue;
        if (line[0] != ' ') {
            suite = line.substr(0, line.find_first_of(" #"));  // "Suite." (keeps the dot)
            continue;
        }
        std::string name = line.substr(line.find_first_not_of(' '));
        name = name.substr(0, name.find_first_of(" #"));
        std::string full = suite + name;
        for (char& c : full)
            if (c == '/') c = '_';
        tests.push_back(full);
    }
    return tests;
}

TEST(KernelCoverage, EveryGlobalFunctionIsLaunchedByAnInterpreterTest) {
    const std::set<Kernel> kernels = kernels_in_sources();
    ASSERT_GE(kernels.size(), 60u) << "the scan of engine/ and samples/ found too few kernels";

    std::set<Kernel> launched;
    std::vector<std::string> not_run;
    const fs::path records = fs::path(EMBER_TEST_BINARY_DIR) / "cuda_interpreter_coverage";
    for (const std::string& program : split(EMBER_INTERPRETER_TEST_PROGRAMS, ':')) {
        const std::vector<std::string> tests = tests_of(program);
        EXPECT_FALSE(tests.empty()) << program << " lists no tests";
        for (const std::string& test : tests) {
            std::ifstream in(records / fs::path(program).filename() / (test + ".kernels"));
            if (!in) {
                not_run.push_back(fs::path(program).filename().string() + " " + test);
                continue;
            }
            for (std::string line; std::getline(in, line);) {
                const auto tab = line.find('\t');
                if (tab != std::string::npos) launched.insert({line.substr(0, tab), line.substr(tab + 1)});
            }
        }
    }
    EXPECT_TRUE(not_run.empty()) << not_run.size() << " interpreter tests have no launch record (first: "
                                 << (not_run.empty() ? "" : not_run.front())
                                 << "); run the whole label: ctest -L cuda_interpreter";

    std::vector<std::string> never;
    for (const Kernel& kernel : kernels)
        if (!launched.count(kernel)) never.push_back(kernel.first + ": " + kernel.second);
    std::string listing;
    for (const std::string& k : never) listing += "\n  " + k;
    EXPECT_TRUE(never.empty()) << never.size() << " of " << kernels.size()
                               << " __global__ functions are never launched by a kernel-interpreter test:" << listing;
    std::printf("%zu __global__ functions in engine/ and samples/, %zu launched by the interpreter tests\n",
                kernels.size(), kernels.size() - never.size());
}

}  // namespace

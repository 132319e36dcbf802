// coverage_listener.cpp: linked into every kernel-interpreter test program. After each
// test it writes the kernels that test launched to
//   <build>/cuda_interpreter_coverage/<program>/<Suite.Test>.kernels
// one "source<TAB>kernel" per line (source relative to the repository), which
// kernel_coverage_test.cpp reads to prove every __global__ function is launched.
#include "engine/cuda/interpreter/interpreter.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace {

namespace interpreter = ember::cuda_interpreter;

std::string program_name() {
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
    return error ? std::string("unknown") : exe.filename().string();
}

std::map<std::pair<std::string, std::string>, uint64_t> launch_counts() {
    std::map<std::pair<std::string, std::string>, uint64_t> counts;
    for (const auto& k : interpreter::launched_kernels()) counts[{k.file, k.kernel}] = k.launches;
    return counts;
}

class KernelCoverageWriter : public ::testing::EmptyTestEventListener {
  public:
    void OnTestStart(const ::testing::TestInfo&) override { before_ = launch_counts(); }

    void OnTestEnd(const ::testing::TestInfo& test) override {
        std::string name = std::string(test.test_suite_name()) + "." + test.name();
        for (char& c : name)
            if (c == '/') c = '_';
        const auto directory =
            std::filesystem::path(EMBER_TEST_BINARY_DIR) / "cuda_interpreter_coverage" / program_name();
        std::filesystem::create_directories(directory);
        const auto path = directory / (name + ".kernels");
        std::ofstream out(path);
        const std::string root = std::string(EMBER_TEST_SOURCE_DIR) + "/";
        for (const auto& [key, launches] : launch_counts()) {
            const auto it = before_.find(key);
            if (it != before_.end() && it->second == launches) continue;
            std::string file = key.first;
            if (file.rfind(root, 0) == 0) file = file.substr(root.size());
            out << file << '\t' << key.second << '\n';
        }
        if (!out) ADD_FAILURE() << "could not write the kernel coverage file " << path;
    }

  private:
    std::map<std::pair<std::string, std::string>, uint64_t> before_;
};

// Registered before main() runs the tests.
const bool registered = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new KernelCoverageWriter);
    return true;
}();

}  // namespace

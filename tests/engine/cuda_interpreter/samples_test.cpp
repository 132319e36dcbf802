// The samples' CUDA programs (samples/cuda_basics, samples/fused_gelu) run whole in the
// kernel interpreter: their main() (renamed by the build) with small sizes, which checks
// its own results and returns 0 only when they are right.
#include <gtest/gtest.h>

#include <string>
#include <vector>

int sample_cuda_basics_main(int argc, char** argv);
int sample_fused_gelu_main(int argc, char** argv);

namespace {

int run(int (*sample_main)(int, char**), std::vector<std::string> arguments) {
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    return sample_main(static_cast<int>(arguments.size()), argv.data());
}

TEST(SamplesInInterpreter, CudaBasicsSaxpy) {
    EXPECT_EQ(run(sample_cuda_basics_main, {"sample_cuda_basics", "1000", "3"}), 0);
    EXPECT_EQ(run(sample_cuda_basics_main, {"sample_cuda_basics", "1", "1"}), 0);
}

TEST(SamplesInInterpreter, FusedGeluMatchesTheUnfusedChain) {
    // 210 timed runs of each variant: a size under a block keeps it quick.
    EXPECT_EQ(run(sample_fused_gelu_main, {"sample_fused_gelu", "300"}), 0);
}

}  // namespace

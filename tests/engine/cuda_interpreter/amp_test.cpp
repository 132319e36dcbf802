// The loss scaler's device inf/NaN check (engine/amp/loss_scaler_cuda.cu) against its CPU
// twin in the kernel interpreter: 0, 1 and off-block counts, a bad value at the first,
// the last and a middle element, and past the kernel's 1024 blocks (cap lowered to 3).
#include "engine/amp/loss_scaler.h"
#include "engine/core/cuda_check.h"
#include "engine/cuda/interpreter/interpreter.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace ember::amp {
namespace {

namespace interpreter = ember::cuda_interpreter;

bool device_check(const std::vector<float>& values) {
    float* device = nullptr;
    EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), std::max<std::size_t>(values.size(), 1) * 4));
    if (!values.empty()) EMBER_CUDA_CHECK(cudaMemcpy(device, values.data(), values.size() * 4, cudaMemcpyHostToDevice));
    DeviceOverflowCheck check;
    check.check(device, values.size(), nullptr);
    const bool found = check.read_flag(nullptr);
    EMBER_CUDA_CHECK(cudaFree(device));
    return found;
}

class DeviceOverflowCheckParity : public ::testing::Test {
  protected:
    void TearDown() override { interpreter::set_grid_stride_cap(0); }

    void expect_parity(std::size_t n) {
        std::vector<float> values(n);
        for (std::size_t i = 0; i < n; ++i) values[i] = std::sin(0.1f * float(i)) * 1000.0f;
        EXPECT_FALSE(device_check(values)) << n << " finite values";
        EXPECT_TRUE(all_finite_cpu(values.data(), n));
        if (n == 0) return;
        for (std::size_t bad : {std::size_t(0), n / 2, n - 1})
            for (float value : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()}) {
                std::vector<float> broken = values;
                broken[bad] = value;
                EXPECT_EQ(device_check(broken), !all_finite_cpu(broken.data(), n)) << n << " bad at " << bad;
            }
    }
};

TEST_F(DeviceOverflowCheckParity, ZeroOneAndOffBlockCounts) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(255), std::size_t(257), std::size_t(3001)})
        expect_parity(n);
}

TEST_F(DeviceOverflowCheckParity, PastTheBlockCap) {
    interpreter::set_grid_stride_cap(3);
    expect_parity(5000);
}

}  // namespace
}  // namespace ember::amp

#include "engine/core/device.h"

#include <gtest/gtest.h>

namespace {

TEST(Device, StatusIsConsistentWithDeviceList) {
    ember::CudaRuntimeStatus s = ember::cuda_runtime_status();
    auto devices = ember::cuda_devices();
    EXPECT_EQ(static_cast<int>(devices.size()), s.device_count);
    EXPECT_EQ(ember::cuda_device_available(), s.device_count > 0);
    if (s.device_count == 0) {
        EXPECT_FALSE(s.reason.empty()) << "no device must come with a reason";
    }
    for (const auto& d : devices) {
        EXPECT_FALSE(d.name.empty());
        EXPECT_GE(d.compute_major, 5);
        EXPECT_GT(d.sm_count, 0);
        EXPECT_GT(d.total_memory_bytes, 0u);
    }
}

TEST(Device, VersionString) {
    EXPECT_EQ(ember::cuda_version_string(13000), "13.0");
    EXPECT_EQ(ember::cuda_version_string(12080), "12.8");
    EXPECT_EQ(ember::cuda_version_string(0), "none");
}

}  // namespace

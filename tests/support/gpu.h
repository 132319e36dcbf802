// gpu.h: EMBER_REQUIRE_GPU() at the top of a `gpu`-labelled test skips it (reported
// by CTest as skipped, not passed) on a machine with no usable CUDA device.
#pragma once

#include <gtest/gtest.h>

#include "engine/core/device.h"

#define EMBER_REQUIRE_GPU()                                                              \
    do {                                                                                 \
        if (!::ember::cuda_device_available())                                           \
            GTEST_SKIP() << "no CUDA device: " << ::ember::cuda_runtime_status().reason; \
    } while (0)

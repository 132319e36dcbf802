// environment.h: the facts `ember doctor` reports, gathered into one struct so
// they can be printed as text or JSON and checked by tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/device.h"

namespace ember::cli {

struct DatasetStatus {
    std::string root;
    bool installed = false;
    std::int64_t train_images = 0;
    std::int64_t train_labels = 0;
    std::int64_t test_images = 0;
    std::int64_t test_labels = 0;
    std::string problem;  // what is missing or unreadable; empty when installed
};

struct DisplayStatus {
    bool available = false;
    std::string name;       // $DISPLAY or $WAYLAND_DISPLAY
    bool xvfb_run = false;  // xvfb-run on PATH: headless screenshots possible
};

struct Environment {
    std::string ember_version;
    std::string build_type;
    std::string cuda_architectures;
    int cuda_toolkit_version = 0;  // CUDART_VERSION the build used
    CudaRuntimeStatus cuda;
    std::vector<DeviceInfo> devices;
    std::string cudnn_version;  // library, as loaded
    std::string cudnn_header_version;
    std::string nccl_version;
    std::string cupti_version;
    std::string nvtx_version;
    std::string mpi_version;
    std::string sqlite_version;
    DatasetStatus fashion_mnist;
    DisplayStatus display;
};

Environment probe_environment(const std::string& dataset_root);

// Reads the item count from the header of a gzip-compressed IDX file; -1 and a
// message in `problem` when the file is missing, truncated or not IDX.
std::int64_t idx_item_count(const std::string& path, std::string& problem);

std::string environment_text(const Environment& env);
std::string environment_json(const Environment& env);

}  // namespace ember::cli

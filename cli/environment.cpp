#include "cli/environment.h"

#include "ember/version.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cupti.h>
#include <mpi.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <sqlite3.h>
#include <zlib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace ember::cli {
namespace fs = std::filesystem;

std::int64_t idx_item_count(const std::string& path, std::string& problem) {
    if (!fs::exists(path)) {
        problem = path + ": file not found";
        return -1;
    }
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) {
        problem = path + ": cannot open";
        return -1;
    }
    unsigned char header[8];
    int got = gzread(f, header, sizeof header);
    gzclose(f);
    if (got != (int)sizeof header) {
        problem = path + ": truncated IDX header (" + std::to_string(got < 0 ? 0 : got) + " of 8 bytes)";
        return -1;
    }
    // IDX: two zero bytes, a type code (0x08 = unsigned byte), the dimension count,
    // then big-endian 32-bit sizes; the first size is the item count.
    if (header[0] != 0 || header[1] != 0 || header[2] != 0x08 || header[3] < 1 || header[3] > 3) {
        problem = fmt::format("{}: not an IDX ubyte file (magic {:02x}{:02x}{:02x}{:02x})", path, header[0], header[1],
                              header[2], header[3]);
        return -1;
    }
    return (std::int64_t(header[4]) << 24) | (header[5] << 16) | (header[6] << 8) | header[7];
}

namespace {

DatasetStatus probe_dataset(const std::string& root) {
    DatasetStatus s;
    s.root = root;
    std::string problem;
    s.train_images = idx_item_count(root + "/train-images-idx3-ubyte.gz", problem);
    if (problem.empty()) s.train_labels = idx_item_count(root + "/train-labels-idx1-ubyte.gz", problem);
    if (problem.empty()) s.test_images = idx_item_count(root + "/t10k-images-idx3-ubyte.gz", problem);
    if (problem.empty()) s.test_labels = idx_item_count(root + "/t10k-labels-idx1-ubyte.gz", problem);
    if (problem.empty() && (s.train_images != s.train_labels || s.test_images != s.test_labels))
        problem = fmt::format("image/label counts differ: train {}/{}, test {}/{}", s.train_images, s.train_labels,
                              s.test_images, s.test_labels);
    s.installed = problem.empty();
    s.problem = problem;
    return s;
}

bool on_path(const char* program) {
    const char* path = std::getenv("PATH");
    if (!path) return false;
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        std::error_code ec;
        if (!dir.empty() && fs::exists(fs::path(dir) / program, ec)) return true;
    }
    return false;
}

DisplayStatus probe_display() {
    DisplayStatus d;
    if (const char* w = std::getenv("WAYLAND_DISPLAY"); w && *w) {
        d.available = true;
        d.name = std::string("wayland:") + w;
    } else if (const char* x = std::getenv("DISPLAY"); x && *x) {
        d.name = x;
        // A local display ":N" has a socket; a remote one (host:N) is taken on trust.
        std::string s = x;
        if (!s.empty() && s[0] == ':') {
            std::string num = s.substr(1, s.find('.') == std::string::npos ? std::string::npos : s.find('.') - 1);
            d.available = fs::exists("/tmp/.X11-unix/X" + num);
        } else {
            d.available = true;
        }
    }
    d.xvfb_run = on_path("xvfb-run");
    return d;
}

std::string mpi_library_version() {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    // Allowed before MPI_Init (MPI-3.0 section 8.1.1).
    if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown";
    std::string s(buf, len);
    auto cut = s.find_first_of(",\n");
    return cut == std::string::npos ? s : s.substr(0, cut);
}

std::string mib(std::size_t bytes) {
    return fmt::format("{:.1f} GiB", bytes / 1073741824.0);
}

}  // namespace

Environment probe_environment(const std::string& dataset_root) {
    Environment e;
    e.ember_version = EMBER_VERSION_STRING;
    e.build_type = EMBER_BUILD_TYPE;
    e.cuda_architectures = EMBER_CUDA_ARCHITECTURES;
    e.cuda_toolkit_version = CUDART_VERSION;
    e.cuda = cuda_runtime_status();
    if (e.cuda.device_count > 0) e.devices = cuda_devices();

    std::size_t v = cudnnGetVersion();  // e.g. 91400 = 9.14.0
    e.cudnn_version = fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
    e.cudnn_header_version = fmt::format("{}.{}.{}", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
    int nccl = 0;
    if (ncclGetVersion(&nccl) == ncclSuccess)
        e.nccl_version = fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
    else
        e.nccl_version = "unavailable";
    uint32_t cupti = 0;
    if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS)
        e.cupti_version = fmt::format("API {}", cupti);
    else
        e.cupti_version = "unavailable";
    e.nvtx_version = fmt::format("v{} (header-only)", NVTX_VERSION);
    e.mpi_version = mpi_library_version();
    e.sqlite_version = sqlite3_libversion();
    e.fashion_mnist = probe_dataset(dataset_root);
    e.display = probe_display();
    return e;
}

std::string environment_text(const Environment& e) {
    std::string out;
    auto line = [&](const char* key, const std::string& value) { out += fmt::format("{:<15}{}\n", key, value); };
    line("ember", fmt::format("{} ({}, CUDA architectures {})", e.ember_version, e.build_type, e.cuda_architectures));
    line("CUDA toolkit", fmt::format("{} (built with), runtime {}", cuda_version_string(e.cuda_toolkit_version),
                                     cuda_version_string(e.cuda.runtime_version)));
    line("NVIDIA driver", e.cuda.driver_version
                              ? fmt::format("supports CUDA {}", cuda_version_string(e.cuda.driver_version))
                              : std::string("none: no NVIDIA driver is installed"));
    if (e.devices.empty()) {
        line("GPUs", "no CUDA device: " + e.cuda.reason + "; training falls back to the CPU backend");
    } else {
        for (const auto& d : e.devices)
            line(d.index == 0 ? "GPUs" : "",
                 fmt::format("[{}] {}, compute capability {}.{}, {}, {} SMs, {:.0f} GB/s peak", d.index, d.name,
                             d.compute_major, d.compute_minor, mib(d.total_memory_bytes), d.sm_count,
                             d.peak_memory_bandwidth_gbs()));
    }
    line("cuDNN", e.cudnn_version + " (headers " + e.cudnn_header_version + ")");
    line("NCCL", e.nccl_version);
    line("CUPTI", e.cupti_version);
    line("NVTX", e.nvtx_version);
    line("MPI", e.mpi_version);
    line("SQLite", e.sqlite_version);
    if (e.fashion_mnist.installed)
        line("Fashion-MNIST", fmt::format("{}: {} train / {} test images", e.fashion_mnist.root,
                                          e.fashion_mnist.train_images, e.fashion_mnist.test_images));
    else
        line("Fashion-MNIST",
             "not installed (" + e.fashion_mnist.problem + "); install with: apt-get install dataset-fashion-mnist");
    if (e.display.available)
        line("Display", e.display.name + ": `ember view` can open a window");
    else
        line("Display", std::string("none: `ember view` needs a display") +
                            (e.display.xvfb_run ? "; run it under xvfb-run for screenshots"
                                                : "; install xvfb for headless screenshots"));
    return out;
}

std::string environment_json(const Environment& e) {
    nlohmann::json j;
    j["ember"] = {
        {"version", e.ember_version}, {"build_type", e.build_type}, {"cuda_architectures", e.cuda_architectures}};
    j["cuda"] = {{"toolkit", cuda_version_string(e.cuda_toolkit_version)},
                 {"runtime", cuda_version_string(e.cuda.runtime_version)},
                 {"driver", e.cuda.driver_version ? cuda_version_string(e.cuda.driver_version) : std::string("none")},
                 {"device_count", e.cuda.device_count},
                 {"reason", e.cuda.reason}};
    j["gpus"] = nlohmann::json::array();
    for (const auto& d : e.devices)
        j["gpus"].push_back({{"index", d.index},
                             {"name", d.name},
                             {"compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                             {"memory_bytes", d.total_memory_bytes},
                             {"sm_count", d.sm_count},
                             {"peak_memory_bandwidth_gbs", d.peak_memory_bandwidth_gbs()}});
    j["cudnn"] = e.cudnn_version;
    j["nccl"] = e.nccl_version;
    j["cupti"] = e.cupti_version;
    j["nvtx"] = e.nvtx_version;
    j["mpi"] = e.mpi_version;
    j["sqlite"] = e.sqlite_version;
    j["fashion_mnist"] = {{"root", e.fashion_mnist.root},
                          {"installed", e.fashion_mnist.installed},
                          {"train_images", e.fashion_mnist.train_images},
                          {"test_images", e.fashion_mnist.test_images},
                          {"problem", e.fashion_mnist.problem}};
    j["display"] = {{"available", e.display.available}, {"name", e.display.name}, {"xvfb_run", e.display.xvfb_run}};
    return j.dump(2) + "\n";
}

}  // namespace ember::cli

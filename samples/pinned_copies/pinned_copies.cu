// pinned_copies: host-to-device bandwidth from pageable and from pinned (page-locked)
// memory across sizes. Pageable copies are staged by the driver through a pinned
// bounce buffer, so they are slower and cannot overlap compute; this is why data
// loaders pin their batches (PyTorch's pin_memory=True). Under `ember record`, the
// trace shows the two kinds told apart (memcpy src_kind pageable vs pinned).
//
//   sample_pinned_copies [max_mib]   (default 256)
#include "samples/common.h"

#include <cstring>
#include <vector>

int main(int argc, char** argv) {
    if (!sample_has_device("pinned_copies")) return 0;
    size_t max_bytes = size_t(argc > 1 ? std::atoi(argv[1]) : 256) << 20;
    if (max_bytes == 0) {
        std::fprintf(stderr, "usage: %s [max_mib > 0]\n", argv[0]);
        return 2;
    }
    void* device = nullptr;
    void* pinned = nullptr;
    SAMPLE_CHECK(cudaMalloc(&device, max_bytes));
    SAMPLE_CHECK(cudaMallocHost(&pinned, max_bytes));
    std::vector<char> pageable(max_bytes, 1);
    std::memset(pinned, 1, max_bytes);

    std::printf("%12s %16s %16s %8s\n", "bytes", "pageable GB/s", "pinned GB/s", "ratio");
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        int repeats = bytes < (1 << 20) ? 200 : 20;
        float pageable_ms = sample_time_ms(
            3, repeats, [&] { SAMPLE_CHECK(cudaMemcpy(device, pageable.data(), bytes, cudaMemcpyHostToDevice)); });
        float pinned_ms = sample_time_ms(
            3, repeats, [&] { SAMPLE_CHECK(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice)); });
        double pageable_gbs = bytes / (pageable_ms * 1e-3) / 1e9;
        double pinned_gbs = bytes / (pinned_ms * 1e-3) / 1e9;
        std::printf("%12zu %16.2f %16.2f %7.2fx\n", bytes, pageable_gbs, pinned_gbs, pinned_gbs / pageable_gbs);
    }
    SAMPLE_CHECK(cudaFree(device));
    SAMPLE_CHECK(cudaFreeHost(pinned));
    return 0;
}

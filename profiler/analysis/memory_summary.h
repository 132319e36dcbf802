// memory_summary.h: GPU memory operations by direction and host memory kind —
// how many, how many bytes, how long, and the effective bandwidth — so pageable
// copies (staged by the driver, synchronous) stand apart from pinned ones.
#pragma once

#include "profiler/store/reader.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::analysis {

struct MemoryOperationRow {
    std::string operation;  // "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "unknown", "memset"
    std::string memory;     // host side of a host copy ("pinned", "pageable", ...);
                            // "device" for DtoD/PtoP; the memory set for a memset
    std::int64_t count = 0;
    std::int64_t total_bytes = 0;
    std::int64_t total_ns = 0;
    // total_bytes / total_ns in GB/s (10^9 bytes per second); 0 when total_ns is 0.
    double bandwidth_gb_per_s = 0.0;
};

// Rows ordered by operation (HtoD, DtoH, DtoD, HtoH, PtoP, unknown, memset), then
// memory kind (unknown, pageable, pinned, device, managed, array).
std::vector<MemoryOperationRow> memory_summary(const store::TraceReader& reader);

}  // namespace ember::analysis

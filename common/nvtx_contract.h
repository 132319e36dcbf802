// nvtx_contract.h: the NVTX names and numbers ember's traces carry, in one place. The
// engine emits them (engine/core/nvtx.h), the importers translate other tools' names
// into them (a Kineto ProfilerStep#N becomes "step"), the synthetic traces imitate them,
// and the analyses and the viewer read them. Every one of those includes this header;
// none spells a category number or a well-known range name itself
// (tests/architecture/include_rules.sh fails on a copy), so the contract cannot drift.
#pragma once

#include <cstdint>
#include <string_view>

namespace ember::nvtx {

// The NVTX domain of every range and mark the engine emits.
inline constexpr std::string_view kDomain = "ember";

// The domain's categories, so a consumer need not parse names. The numbers are stored
// in traces: never renumber one.
enum class Category : std::uint32_t {
    none = 0,
    step = 1,
    compute = 2,     // forward, backward, optimizer, layers
    dataloader = 3,  // loading, decoding, augmenting, copying batches; waits for them
    communication = 4,
    checkpoint = 5,
    evaluation = 6,
};

// Scalar series (loss, lr, loss scale, samples/s) travel as marks in this category,
// payload = the value; the collector turns them into counter tracks.
inline constexpr Category kCounterCategory = static_cast<Category>(100);

// Heaps of NVTX's memory extension (nvtxMemHeapRegister) in the ember domain carry, as
// their category, the memory they hold: kHostMemoryCategory for the CPU backend's host
// memory, kDeviceMemoryCategory + N for CUDA device N (0..kMaxMemoryDevices-1). The
// collector records their events on trace device -1 (host) or N.
inline constexpr std::uint32_t kHostMemoryCategory = 200;
inline constexpr std::uint32_t kDeviceMemoryCategory = 300;
inline constexpr int kMaxMemoryDevices = 100;
constexpr std::uint32_t memory_category(int device) {
    return device < 0 ? kHostMemoryCategory : kDeviceMemoryCategory + static_cast<std::uint32_t>(device);
}
// The device a memory heap category names: -1 host, N a CUDA device; false for any
// other number.
constexpr bool memory_device(std::uint32_t category, int& device) {
    if (category == kHostMemoryCategory) {
        device = -1;
        return true;
    }
    if (category >= kDeviceMemoryCategory && category < kDeviceMemoryCategory + kMaxMemoryDevices) {
        device = static_cast<int>(category - kDeviceMemoryCategory);
        return true;
    }
    return false;
}

// A category as the trace stores it (ranges.category).
constexpr std::uint32_t number(Category category) {
    return static_cast<std::uint32_t>(category);
}

// The name a trace gives the category (nvtx_categories.name): "step", "compute", ...;
// empty for none and for numbers outside the contract.
constexpr std::string_view category_name(Category category) {
    switch (category) {
        case Category::none:
            return {};
        case Category::step:
            return "step";
        case Category::compute:
            return "compute";
        case Category::dataloader:
            return "dataloader";
        case Category::communication:
            return "communication";
        case Category::checkpoint:
            return "checkpoint";
        case Category::evaluation:
            return "evaluation";
    }
    return {};
}

// The well-known range names: what `ember stats`, `ember diff` and the viewer look for.
namespace range {
inline constexpr std::string_view kStep = "step";  // one training step (payload: its number)
inline constexpr std::string_view kForward = "forward";
inline constexpr std::string_view kBackward = "backward";
inline constexpr std::string_view kOptimizer = "optimizer";
inline constexpr std::string_view kDataloaderWait = "dataloader/wait";  // the loop waits for its next batch
inline constexpr std::string_view kDataloaderLoad = "dataloader/load";  // worker ranges
inline constexpr std::string_view kDataloaderDecode = "dataloader/decode";
inline constexpr std::string_view kDataloaderAugment = "dataloader/augment";
inline constexpr std::string_view kDataloaderH2d = "dataloader/h2d";
inline constexpr std::string_view kAllreduceWait = "allreduce/wait";      // compute waits for communication
inline constexpr std::string_view kAllreduceBucket = "allreduce/bucket";  // one gradient bucket (payload: bytes)
// A mark left on every rank right after a barrier (payload: its sequence number): marks
// of equal numbers happened together, so `ember merge` and the job analysis align the
// ranks' clocks on them.
inline constexpr std::string_view kClockAnchor = "clock/anchor";
// PyTorch's profiler step, "ProfilerStep#12" (trace::profiler_step_number reads the N).
inline constexpr std::string_view kProfilerStepPrefix = "ProfilerStep#";
}  // namespace range

}  // namespace ember::nvtx

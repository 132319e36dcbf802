// nvtx.h: how the engine annotates itself. Everything goes to the NVTX domain
// "ember" (ARCHITECTURE.md: the engine speaks NVTX and nothing else), so any NVTX
// tool (ember's collector, Nsight Systems) sees the same ranges.
//
// Range names are part of the trace contract that `ember stats` reads:
//   step                 one training step
//   forward, backward, optimizer
//   dataloader/wait      the training loop waits for its next batch (a stall)
//   dataloader/load, dataloader/decode, dataloader/augment, dataloader/h2d  (workers)
//   allreduce/wait       compute waits for communication
//   allreduce/bucket     one gradient bucket's all-reduce (payload: bytes)
// Categories group them so a consumer need not parse names. The domain, the categories
// and the range names are the contract in common/nvtx_contract.h, which the importers
// and analyses read too.
#pragma once

#include "common/nvtx_contract.h"

#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::nvtx {

// The process-wide "ember" domain, created on first use; names its categories.
nvtxDomainHandle_t domain();

// A registered string for a name used repeatedly (cheaper than passing text each time).
nvtxStringHandle_t registered(const char* name);

// Push/pop range on the calling thread; RAII so early returns and exceptions pop.
class ScopedRange {
  public:
    explicit ScopedRange(const char* name, Category category = Category::none);
    ScopedRange(const char* name, Category category, uint64_t payload);
    // The contract's well-known names (range::kStep, range::kDataloaderWait, ...).
    explicit ScopedRange(std::string_view name, Category category = Category::none);
    ScopedRange(std::string_view name, Category category, uint64_t payload);
    ~ScopedRange();
    ScopedRange(const ScopedRange&) = delete;
    ScopedRange& operator=(const ScopedRange&) = delete;
};

// An instantaneous event (e.g. "epoch 3 done") with an optional numeric payload.
void mark(const char* name, Category category = Category::none);
void mark_value(const char* name, double value, Category category = Category::none);

// Scalar series (loss, lr, loss scale, samples/s) travel as marks in kCounterCategory,
// payload = the value; the collector turns them into counter tracks.
void counter(const char* name, double value);

// Names the calling OS thread for NVTX tools ("dataloader worker 2").
void name_thread(const char* name);

// The allocators' memory as NVTX's memory extension (nvToolsExtMem.h) describes it, in
// the ember domain: a heap per raw segment (its category names the memory:
// common/nvtx_contract.h memory_category(device), -1 = host), a region per block handed
// out of it. Handles are the tool's; null when no tool listens (every call is then a
// cheap no-op).
namespace memory {
void* register_heap(const void* base, std::size_t bytes, int device, const char* name);
void unregister_heap(void* heap);
void reset_heap(void* heap);  // every region of the heap ends
void register_region(void* heap, const void* ptr, std::size_t bytes);
void unregister_region(const void* ptr);
}  // namespace memory

}  // namespace ember::nvtx

#include "engine/core/nvtx.h"
#include "common/os.h"

#include <nvtx3/nvToolsExtMem.h>

#include <mutex>
#include <string>
#include <unordered_map>

namespace ember::nvtx {

nvtxDomainHandle_t domain() {
    static nvtxDomainHandle_t handle = [] {
        nvtxDomainHandle_t d = nvtxDomainCreateA(std::string(kDomain).c_str());
        for (Category category : {Category::step, Category::compute, Category::dataloader, Category::communication,
                                  Category::checkpoint, Category::evaluation})
            nvtxDomainNameCategoryA(d, number(category), std::string(category_name(category)).c_str());
        // The contract names no counter category (category_name() is empty for it);
        // tools that show category names see "counter".
        nvtxDomainNameCategoryA(d, number(kCounterCategory), "counter");
        return d;
    }();
    return handle;
}

nvtxStringHandle_t registered(const char* name) {
    static std::mutex mutex;
    static std::unordered_map<std::string, nvtxStringHandle_t> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(name);
    if (it != cache.end()) return it->second;
    nvtxStringHandle_t h = nvtxDomainRegisterStringA(domain(), name);
    cache.emplace(name, h);
    return h;
}

namespace {

nvtxEventAttributes_t attributes(const char* name, Category category) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = number(category);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registered(name);
    return a;
}

}  // namespace

ScopedRange::ScopedRange(const char* name, Category category) {
    nvtxEventAttributes_t a = attributes(name, category);
    nvtxDomainRangePushEx(domain(), &a);
}

ScopedRange::ScopedRange(const char* name, Category category, uint64_t payload) {
    nvtxEventAttributes_t a = attributes(name, category);
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
    nvtxDomainRangePushEx(domain(), &a);
}

ScopedRange::ScopedRange(std::string_view name, Category category) : ScopedRange(std::string(name).c_str(), category) {}

ScopedRange::ScopedRange(std::string_view name, Category category, uint64_t payload)
    : ScopedRange(std::string(name).c_str(), category, payload) {}

ScopedRange::~ScopedRange() {
    nvtxDomainRangePop(domain());
}

void mark(const char* name, Category category) {
    nvtxEventAttributes_t a = attributes(name, category);
    nvtxDomainMarkEx(domain(), &a);
}

void mark_value(const char* name, double value, Category category) {
    nvtxEventAttributes_t a = attributes(name, category);
    a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
    a.payload.dValue = value;
    nvtxDomainMarkEx(domain(), &a);
}

void counter(const char* name, double value) {
    mark_value(name, value, kCounterCategory);
}

void name_thread(const char* name) {
    nvtxNameOsThreadA(static_cast<uint32_t>(os::thread_id()), name);
}

namespace memory {

void* register_heap(const void* base, std::size_t bytes, int device, const char* name) {
    nvtxMemVirtualRangeDesc_t range{};
    range.size = bytes;
    range.ptr = base;
    nvtxMemHeapDesc_t desc{};
    desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    desc.structSize = sizeof(desc);
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof(range);
    desc.typeSpecificDesc = &range;
    desc.category = memory_category(device);
    desc.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    desc.message.registered = registered(name);
    return nvtxMemHeapRegister(domain(), &desc);
}

void unregister_heap(void* heap) {
    if (heap) nvtxMemHeapUnregister(domain(), static_cast<nvtxMemHeapHandle_t>(heap));
}

void reset_heap(void* heap) {
    if (heap) nvtxMemHeapReset(domain(), static_cast<nvtxMemHeapHandle_t>(heap));
}

void register_region(void* heap, const void* ptr, std::size_t bytes) {
    if (!heap) return;
    nvtxMemVirtualRangeDesc_t range{};
    range.size = bytes;
    range.ptr = ptr;
    nvtxMemRegionHandle_t handle = nullptr;
    nvtxMemRegionsRegisterBatch_t batch{};
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof(batch);
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = static_cast<nvtxMemHeapHandle_t>(heap);
    batch.regionCount = 1;
    batch.regionDescElementSize = sizeof(range);
    batch.regionDescElements = &range;
    batch.regionHandleElementsOut = &handle;
    nvtxMemRegionsRegister(domain(), &batch);
}

void unregister_region(const void* ptr) {
    nvtxMemRegionRef_t ref{};
    ref.pointer = ptr;
    nvtxMemRegionsUnregisterBatch_t batch{};
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof(batch);
    batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    batch.refCount = 1;
    batch.refElementSize = sizeof(ref);
    batch.refElements = &ref;
    nvtxMemRegionsUnregister(domain(), &batch);
}

}  // namespace memory

}  // namespace ember::nvtx

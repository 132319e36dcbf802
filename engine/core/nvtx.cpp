#include "engine/core/nvtx.h"
#include "common/os.h"

#include <mutex>
#include <string>
#include <unordered_map>

namespace ember::nvtx {

nvtxDomainHandle_t domain() {
    static nvtxDomainHandle_t handle = [] {
        nvtxDomainHandle_t d = nvtxDomainCreateA("ember");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(Category::step), "step");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(Category::compute), "compute");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(Category::dataloader), "dataloader");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(Category::communication), "communication");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(Category::checkpoint), "checkpoint");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(Category::evaluation), "evaluation");
        nvtxDomainNameCategoryA(d, static_cast<uint32_t>(kCounterCategory), "counter");
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
    a.category = static_cast<uint32_t>(category);
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

ScopedRange::~ScopedRange() { nvtxDomainRangePop(domain()); }

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

void counter(const char* name, double value) { mark_value(name, value, kCounterCategory); }

void name_thread(const char* name) {
    nvtxNameOsThreadA(static_cast<uint32_t>(os::thread_id()), name);
}

}  // namespace ember::nvtx

// The loader's NVTX annotations, seen by a minimal NVTX tool statically injected into
// this test program (NVTX v3 calls a strong InitializeInjectionNvtx2_fnptr if the
// program defines one): dataloader/wait on the training thread once per wait,
// dataloader/load, decode and augment on named worker threads, all in category
// dataloader -- the names `ember stats` looks for.
#include <cstdint>

// This file provides the injection: declare the pointer (NVTX's own type, spelled out
// because it is needed before NVTX's headers) and skip NVTX's weak default definition.
extern "C" {
typedef const void* (*TestNvtxGetExportTable)(std::uint32_t export_table_id);
typedef int (*TestNvtxInitializeInjection)(TestNvtxGetExportTable get_export_table);
extern TestNvtxInitializeInjection InitializeInjectionNvtx2_fnptr;
}
#define NVTX_STATIC_INJECTION_IMPL
#include <nvtx3/nvToolsExt.h>

#include "engine/core/nvtx.h"
#include "common/os.h"
#include "engine/data/in_memory_dataset.h"
#include "engine/data/loader.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct RecordedRange {
    std::string name;
    uint32_t category;
    uint32_t thread;
};

std::mutex recorded_mutex;
std::deque<std::string> registered_strings;  // stable addresses serve as string handles
std::vector<RecordedRange> recorded_ranges;
std::map<uint32_t, std::string> thread_names;

uint32_t current_thread() {
    return static_cast<uint32_t>(ember::os::thread_id());
}

nvtxDomainHandle_t NVTX_API create_domain(const char* name) {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    registered_strings.emplace_back(name);
    return reinterpret_cast<nvtxDomainHandle_t>(&registered_strings.back());
}

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t, const char* text) {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    registered_strings.emplace_back(text);
    return reinterpret_cast<nvtxStringHandle_t>(&registered_strings.back());
}

int NVTX_API push_range(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
    std::string name;
    if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
        name = *reinterpret_cast<const std::string*>(attributes->message.registered);
    else if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII)
        name = attributes->message.ascii;
    std::lock_guard<std::mutex> lock(recorded_mutex);
    recorded_ranges.push_back({name, attributes->category, current_thread()});
    return 0;
}

int NVTX_API pop_range(nvtxDomainHandle_t) {
    return 0;
}

void NVTX_API name_os_thread(uint32_t thread, const char* name) {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    thread_names[thread] = name;
}

void install(NvtxGetExportTableFunc_t get_export_table, NvtxCallbackModule module, unsigned id,
             NvtxFunctionPointer function) {
    auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    NvtxFunctionTable table = nullptr;
    unsigned size = 0;
    if (callbacks == nullptr || !callbacks->GetModuleFunctionTable(module, &table, &size) || id >= size) return;
    *table[id] = function;
}

int NVTX_API initialize_injection(NvtxGetExportTableFunc_t get_export_table) {
    install(get_export_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA,
            reinterpret_cast<NvtxFunctionPointer>(&create_domain));
    install(get_export_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA,
            reinterpret_cast<NvtxFunctionPointer>(&register_string));
    install(get_export_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx,
            reinterpret_cast<NvtxFunctionPointer>(&push_range));
    install(get_export_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop,
            reinterpret_cast<NvtxFunctionPointer>(&pop_range));
    install(get_export_table, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_NameOsThreadA,
            reinterpret_cast<NvtxFunctionPointer>(&name_os_thread));
    return 1;
}

}  // namespace

extern "C" NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = initialize_injection;

namespace ember::data {
namespace {

std::shared_ptr<InMemoryDataset> small_dataset() {
    ImageShape shape{1, 4, 4};
    std::vector<uint8_t> pixels(size_t(64 * shape.pixels()), 7);
    std::vector<int32_t> labels(64, 1);
    return std::make_shared<InMemoryDataset>(shape, 2, std::move(pixels), std::move(labels), "small");
}

std::vector<RecordedRange> take_ranges() {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    std::vector<RecordedRange> ranges;
    ranges.swap(recorded_ranges);
    return ranges;
}

// The ranges recorded while one epoch of small_dataset() runs through a loader with
// `workers` loading threads, batches of 8 in order; `copies_to_device`, when given,
// gets whether that loader copied its batches to the device.
std::vector<RecordedRange> ranges_of_one_epoch(int workers, bool* copies_to_device = nullptr) {
    LoaderOptions options;
    options.batch_size = 8;
    options.workers = workers;
    DataLoader loader(small_dataset(), std::make_shared<SequentialSampler>(64), options);
    take_ranges();
    loader.start_epoch(0);
    while (const Batch* batch = loader.next()) loader.release(batch);
    if (copies_to_device != nullptr) *copies_to_device = loader.copies_to_device();
    return take_ranges();
}

constexpr uint32_t kDataloaderCategory = static_cast<uint32_t>(nvtx::Category::dataloader);

TEST(DataLoaderNvtx, WorkersAnnotateLoadingAndTheLoopAnnotatesWaits) {
    bool copies_to_device = false;
    std::vector<RecordedRange> ranges = ranges_of_one_epoch(2, &copies_to_device);

    const uint32_t training_thread = current_thread();
    std::map<std::string, int> worker_counts;
    int waits = 0;
    for (const RecordedRange& range : ranges) {
        if (range.name.rfind("dataloader/", 0) != 0) continue;
        EXPECT_EQ(range.category, kDataloaderCategory) << range.name;
        if (range.name == "dataloader/wait") {
            EXPECT_EQ(range.thread, training_thread);
            ++waits;
        } else {
            EXPECT_NE(range.thread, training_thread) << range.name << " should run in a worker";
            ++worker_counts[range.name];
            std::lock_guard<std::mutex> lock(recorded_mutex);
            EXPECT_EQ(thread_names[range.thread].rfind("dataloader worker ", 0), 0u) << thread_names[range.thread];
        }
    }
    EXPECT_EQ(worker_counts["dataloader/load"], 8);
    EXPECT_EQ(worker_counts["dataloader/decode"], 8);
    EXPECT_EQ(worker_counts["dataloader/augment"], 8);
    EXPECT_EQ(worker_counts["dataloader/h2d"], copies_to_device ? 8 : 0);
    EXPECT_LE(waits, 8);  // at most one per batch: only when the batch was not ready
}

TEST(DataLoaderNvtx, LoadingInTheTrainingThreadIsAllWait) {
    std::map<std::string, int> counts;
    for (const RecordedRange& range : ranges_of_one_epoch(0)) {
        EXPECT_EQ(range.thread, current_thread());
        ++counts[range.name];
    }
    EXPECT_EQ(counts["dataloader/wait"], 8);
    EXPECT_EQ(counts["dataloader/load"], 8);
    EXPECT_EQ(counts["dataloader/decode"], 8);
    EXPECT_EQ(counts["dataloader/augment"], 8);
}

}  // namespace
}  // namespace ember::data

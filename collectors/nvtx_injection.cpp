// nvtx_injection.cpp: NVTX handlers. Push/pop ranges nest on a per-thread stack
// (depth and parent come from it); start/end ranges live in a process-wide table
// keyed by the id NVTX hands back; marks are instants. Strings registered with
// nvtxDomainRegisterString and domain names are interned once per file; plain
// messages go through a per-thread cache so the writer's string mutex is taken
// once per distinct text. Marks in the "ember" domain with category 100
// (common/nvtx_contract.h: kCounterCategory) become samples of a counter track named
// by the mark's text. Category names and CUDA stream names are kept for the life
// of the process and handed to every session (streams: through the CUPTI part,
// which writes stream rows).
//
// NVTX's memory extension (nvToolsExtMem.h) arrives through a second entry point,
// InitializeInjectionNvtxExtension (module NVTX_EXT_MODULEID_MEM): a heap registered
// becomes a segment_alloc, a region registered in it an alloc, a region unregistered
// (or ended by its heap's reset or unregistering) a free_completed, a heap unregistered
// a segment_free. The device is the heap's category in the "ember" domain
// (common/nvtx_contract.h memory_category: -1 = host); heaps of other domains are
// taken as CUDA device 0's. Each event's thread is the calling thread and its stack the
// NVTX ranges open on it (outermost first). Heaps and regions are kept for the life of the
// process, so a session that opens late starts from what is live then
// (segment_live_at_start, live_at_start).
#include "collectors/nvtx_injection.h"

#include "collectors/cupti_collector.h"
#include "collectors/session.h"
#include "common/nvtx_contract.h"
#include "common/text.h"

#include <nvtx3/nvToolsExt.h>
// The memory extension's types only: its implementation belongs to the program.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExtMem.h>
#undef NVTX_NO_IMPL

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ember::collector {

namespace {

constexpr std::uint32_t kCounterCategory = nvtx::number(nvtx::kCounterCategory);
constexpr std::size_t kMaxCachedMessagesPerThread = 1 << 16;
// Range ids a thread takes from the session at a time.
constexpr std::uint64_t kRangeIdBlock = 1024;
// The module of the frames that name NVTX ranges in memory events' stacks.
constexpr std::string_view kRangeFrameModule = "[NVTX range]";

// ---------------------------------------------------------------------------
// [SECTION] Handles NVTX gives back to the program
// ---------------------------------------------------------------------------

// A string interned once per session: the cached id is (generation << 32 | id).
struct InternedText {
    std::string text;
    std::atomic<std::uint64_t> cached{0};

    trace::StringId id(Session& session) {
        std::uint64_t packed = cached.load(std::memory_order_relaxed);
        if (packed >> 32 == session.generation()) return static_cast<trace::StringId>(packed);
        trace::StringId fresh = session.writer().intern(text);
        cached.store((std::uint64_t(session.generation()) << 32) | fresh, std::memory_order_relaxed);
        return fresh;
    }
};

struct Domain {
    InternedText name;
    bool is_ember = false;
};

struct RegisteredString {
    InternedText text;
};

Domain* as_domain(nvtxDomainHandle_t handle) {
    return reinterpret_cast<Domain*>(handle);
}

std::string utf8_from_wide(const wchar_t* wide) {
    std::string out;
    if (!wide) return out;
    for (; *wide; ++wide) text::append_utf8(out, static_cast<std::uint32_t>(*wide));
    return out;
}

// ---------------------------------------------------------------------------
// [SECTION] Per-thread state
// ---------------------------------------------------------------------------

struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

struct OpenRange {
    trace::RangeEvent event;
    const Domain* domain = nullptr;
    bool recorded = false;  // capture was on when it opened
    // The name as text, for the stacks of memory events: a registered string's (alive
    // for the process) or `copied` (the slot's capacity is reused push after push).
    std::string_view name;
    std::string copied;
    // This range as the innermost frame of a memory event's stack, on top of
    // `memory_parent`; valid while memory_parent_set.
    trace::StackId memory_stack = 0;
    trace::StackId memory_parent = 0;
    bool memory_parent_set = false;
};

// Everything an NVTX handler needs from its thread, reached through one thread_local.
struct ThreadState {
    std::uint32_t generation = 0;
    trace::ThreadId thread_id = 0;     // 0 until the thread first records
    trace::RangeId next_range_id = 0;  // this thread's block of ids: [next, limit)
    trace::RangeId range_id_limit = 0;
    // Open push/pop ranges, innermost last: the first `depth` entries. Entries past
    // it are kept for reuse, so a push fills a slot instead of constructing one.
    std::vector<OpenRange> stack;
    std::size_t depth = 0;
    std::unordered_map<std::string, trace::StringId, TextHash, std::equal_to<>> messages;

    trace::ThreadId thread(Session& session) {
        if (thread_id == 0) thread_id = session.this_thread();
        return thread_id;
    }
    trace::RangeId take_range_id(Session& session) {
        if (next_range_id == range_id_limit) {
            next_range_id = session.reserve_range_ids(kRangeIdBlock);
            range_id_limit = next_range_id + kRangeIdBlock;
        }
        return next_range_id++;
    }
};

// The handlers reach their thread's state through one trivially constructible
// pointer (no guard variable to test). The library is compiled with TLS descriptors
// (collectors/CMakeLists.txt: -mtls-dialect=gnu2), so reading it costs a call that
// returns a constant offset wherever glibc could place the library's TLS in static
// TLS (always when linked, usually when injected by dlopen), instead of a
// __tls_get_addr call. The initial-exec model would be cheaper still but can make
// dlopen fail in processes that have used up glibc's static TLS reserve (PyTorch).
// The state itself is owned by an ordinary thread_local, whose destructor frees it
// when the thread exits.
thread_local ThreadState* t_thread_state = nullptr;

struct ThreadStateOwner {
    std::unique_ptr<ThreadState> state;
    ~ThreadStateOwner() { t_thread_state = nullptr; }
};

ThreadState* create_thread_state() {
    thread_local ThreadStateOwner owner;
    owner.state = std::make_unique<ThreadState>();
    t_thread_state = owner.state.get();
    return t_thread_state;
}

inline ThreadState& thread_state(Session& session) {
    ThreadState* state = t_thread_state;
    if (!state) [[unlikely]]
        state = create_thread_state();
    if (state->generation != session.generation()) [[unlikely]] {
        state->generation = session.generation();
        state->thread_id = 0;
        state->next_range_id = state->range_id_limit = 0;
        state->stack.clear();
        state->depth = 0;
        state->messages.clear();
    }
    return *state;
}

trace::StringId intern_message(Session& session, ThreadState& state, std::string_view text) {
    if (text.empty()) return trace::kNoString;
    auto found = state.messages.find(text);
    if (found != state.messages.end()) return found->second;
    if (state.messages.size() >= kMaxCachedMessagesPerThread) state.messages.clear();
    trace::StringId id = session.writer().intern(text);
    state.messages.emplace(std::string(text), id);
    return id;
}

// ---------------------------------------------------------------------------
// [SECTION] Event attributes
// ---------------------------------------------------------------------------

trace::Payload payload_of(const nvtxEventAttributes_t& attributes) {
    switch (attributes.payloadType) {
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
            return trace::Payload::of_integer(static_cast<std::int64_t>(attributes.payload.ullValue));
        case NVTX_PAYLOAD_TYPE_INT64:
            return trace::Payload::of_integer(attributes.payload.llValue);
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
            return trace::Payload::of_integer(attributes.payload.uiValue);
        case NVTX_PAYLOAD_TYPE_INT32:
            return trace::Payload::of_integer(attributes.payload.iValue);
        case NVTX_PAYLOAD_TYPE_DOUBLE:
            return trace::Payload::of_real(attributes.payload.dValue);
        case NVTX_PAYLOAD_TYPE_FLOAT:
            return trace::Payload::of_real(attributes.payload.fValue);
        default:
            return {};
    }
}

bool attributes_usable(const nvtxEventAttributes_t* attributes) {
    return attributes && attributes->size >= NVTX_EVENT_ATTRIB_STRUCT_SIZE;
}

// The message of an event as text (counter marks are named by it).
std::string message_text(const nvtxEventAttributes_t& attributes) {
    switch (attributes.messageType) {
        case NVTX_MESSAGE_TYPE_ASCII:
            return attributes.message.ascii ? attributes.message.ascii : "";
        case NVTX_MESSAGE_TYPE_UNICODE:
            return utf8_from_wide(attributes.message.unicode);
        case NVTX_MESSAGE_TYPE_REGISTERED:
            if (attributes.message.registered)
                return reinterpret_cast<RegisteredString*>(attributes.message.registered)->text.text;
            return "";
        default:
            return "";
    }
}

// Keeps the text of a pushed range's name in its slot (OpenRange::name).
void keep_name(OpenRange& open, const nvtxEventAttributes_t* attributes, const char* ascii, const wchar_t* unicode) {
    open.memory_parent_set = false;
    if (ascii) {
        open.copied.assign(ascii);
        open.name = open.copied;
        return;
    }
    if (unicode) {
        open.copied = utf8_from_wide(unicode);
        open.name = open.copied;
        return;
    }
    if (attributes_usable(attributes) && attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED &&
        attributes->message.registered) {
        open.name = reinterpret_cast<RegisteredString*>(attributes->message.registered)->text.text;
        return;
    }
    open.copied = attributes_usable(attributes) ? message_text(*attributes) : std::string();
    open.name = open.copied;
}

// Fills name, category, color and payload of a range or mark from whichever form
// of message the program passed (describe() below handles the common case inline).
template <typename Event>
__attribute__((noinline)) void describe_any(Session& session, ThreadState& state,
                                            const nvtxEventAttributes_t* attributes, const char* ascii,
                                            const wchar_t* unicode, Event& event) {
    if (ascii) {
        event.name_id = intern_message(session, state, ascii);
        return;
    }
    if (unicode) {
        event.name_id = intern_message(session, state, utf8_from_wide(unicode));
        return;
    }
    if (!attributes_usable(attributes)) return;
    event.category = attributes->category;
    if (attributes->colorType == NVTX_COLOR_ARGB) event.color = attributes->color;
    if (attributes->payloadType != NVTX_PAYLOAD_UNKNOWN) event.payload = payload_of(*attributes);
    switch (attributes->messageType) {
        case NVTX_MESSAGE_TYPE_REGISTERED:
            if (attributes->message.registered)
                event.name_id = reinterpret_cast<RegisteredString*>(attributes->message.registered)->text.id(session);
            break;
        case NVTX_MESSAGE_TYPE_ASCII:
            if (attributes->message.ascii) event.name_id = intern_message(session, state, attributes->message.ascii);
            break;
        case NVTX_MESSAGE_TYPE_UNICODE:
            event.name_id = intern_message(session, state, utf8_from_wide(attributes->message.unicode));
            break;
        default:
            break;
    }
}

template <typename Event>
void describe(Session& session, ThreadState& state, const nvtxEventAttributes_t* attributes, const char* ascii,
              const wchar_t* unicode, Event& event) {
    // The common case first, without a call: a registered string (engine/core/nvtx.h).
    if (attributes_usable(attributes) && attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED &&
        attributes->message.registered && attributes->payloadType == NVTX_PAYLOAD_UNKNOWN) [[likely]] {
        event.category = attributes->category;
        if (attributes->colorType == NVTX_COLOR_ARGB) event.color = attributes->color;
        event.name_id = reinterpret_cast<RegisteredString*>(attributes->message.registered)->text.id(session);
        return;
    }
    describe_any(session, state, attributes, ascii, unicode, event);
}

trace::StringId domain_id(Session& session, const Domain* domain) {
    return domain ? const_cast<Domain*>(domain)->name.id(session) : trace::kNoString;
}

// ---------------------------------------------------------------------------
// [SECTION] Push/pop, start/end, marks
// ---------------------------------------------------------------------------

// The open range lives in the thread's stack from push to pop and goes to the
// writer's ring as it is: no copy, no lock, no shared atomic.
int push_range(const Domain* domain, const nvtxEventAttributes_t* attributes, const char* ascii,
               const wchar_t* unicode) {
    Session* session = current_session();
    if (!session || !session->options().trace_nvtx) return 0;
    ThreadState& state = thread_state(*session);
    std::size_t depth = state.depth;
    if (depth == state.stack.size()) state.stack.emplace_back();
    OpenRange& open = state.stack[depth];
    state.depth = depth + 1;
    open.domain = domain;
    open.recorded = session->capturing();
    keep_name(open, attributes, ascii, unicode);
    if (open.recorded) {
        // Every field is set: the slot holds an earlier range.
        trace::RangeEvent& event = open.event;
        event.range_id = state.take_range_id(*session);
        event.end_ns = 0;
        event.thread_id = state.thread(*session);
        event.domain_id = domain_id(*session, domain);
        event.name_id = trace::kNoString;
        event.category = 0;
        event.color = 0;
        event.payload = {};
        describe(*session, state, attributes, ascii, unicode, event);
        event.depth = static_cast<std::int32_t>(depth);
        event.parent_range_id = 0;
        for (std::size_t index = depth; index-- > 0;) {
            if (state.stack[index].recorded) {
                event.parent_range_id = state.stack[index].event.range_id;
                break;
            }
        }
        event.start_ns = now_ns();
    }
    return static_cast<int>(depth);
}

int pop_range(const Domain* domain) {
    Session* session = current_session();
    if (!session || !session->options().trace_nvtx) return 0;
    trace::TimeNs end = now_ns();
    ThreadState& state = thread_state(*session);
    // The innermost open range of this domain (normally the top of the stack).
    for (std::size_t index = state.depth; index-- > 0;) {
        OpenRange& closing = state.stack[index];
        if (closing.domain != domain) continue;
        if (closing.recorded && session->capturing()) {
            closing.event.end_ns = end;
            session->writer().record_range(closing.event);
        }
        // Ranges of other domains opened inside it stay open, one level shallower.
        std::rotate(state.stack.begin() + static_cast<std::ptrdiff_t>(index),
                    state.stack.begin() + static_cast<std::ptrdiff_t>(index) + 1,
                    state.stack.begin() + static_cast<std::ptrdiff_t>(state.depth));
        state.depth -= 1;
        return static_cast<int>(state.depth);
    }
    return -1;  // a pop without a push (or one from before the session began)
}

struct StartedRange {
    trace::RangeEvent event;
    std::uint32_t generation = 0;
};

std::mutex g_started_mutex;
std::unordered_map<nvtxRangeId_t, StartedRange> g_started;

nvtxRangeId_t start_range(const Domain* domain, const nvtxEventAttributes_t* attributes, const char* ascii,
                          const wchar_t* unicode) {
    Session* session = capturing_session();
    if (!session || !session->options().trace_nvtx) return 0;
    ThreadState& state = thread_state(*session);
    StartedRange started;
    started.generation = session->generation();
    trace::RangeEvent& event = started.event;
    event.range_id = state.take_range_id(*session);
    event.thread_id = state.thread(*session);
    event.domain_id = domain_id(*session, domain);
    describe(*session, state, attributes, ascii, unicode, event);
    event.depth = -1;  // start/end ranges do not nest
    event.start_ns = now_ns();
    nvtxRangeId_t id = event.range_id;
    std::lock_guard lock(g_started_mutex);
    g_started.emplace(id, started);
    return id;
}

void end_range(nvtxRangeId_t id) {
    trace::TimeNs end = now_ns();
    StartedRange started;
    {
        std::lock_guard lock(g_started_mutex);
        auto found = g_started.find(id);
        if (found == g_started.end()) return;
        started = found->second;
        g_started.erase(found);
    }
    Session* session = capturing_session();
    if (!session || session->generation() != started.generation) return;
    started.event.end_ns = end;
    session->writer().record_range(started.event);
}

void mark(const Domain* domain, const nvtxEventAttributes_t* attributes, const char* ascii, const wchar_t* unicode) {
    Session* session = capturing_session();
    if (!session || !session->options().trace_nvtx) return;
    trace::TimeNs time = now_ns();
    ThreadState& state = thread_state(*session);
    if (domain && domain->is_ember && attributes_usable(attributes) && attributes->category == kCounterCategory) {
        trace::Payload payload = payload_of(*attributes);
        if (payload.kind != trace::PayloadKind::none) {
            trace::CounterId counter = session->counter(message_text(*attributes), "", trace::kNoDevice);
            session->writer().record_counter({counter, time, payload.as_double()});
            return;
        }
    }
    trace::MarkEvent event;
    event.time_ns = time;
    event.thread_id = state.thread(*session);
    event.domain_id = domain_id(*session, domain);
    describe(*session, state, attributes, ascii, unicode, event);
    session->writer().record_mark(event);
}

void name_thread(std::uint32_t tid, const std::string& name) {
    Session* session = current_session();
    if (session) session->name_os_thread(tid, name);
}

// ---------------------------------------------------------------------------
// [SECTION] Category and CUDA stream names
// ---------------------------------------------------------------------------

// Category names outlive sessions (a program names its categories once, often
// before recording starts): kept for the process, written to every session's file.
struct CategoryName {
    const Domain* domain = nullptr;  // nullptr: the default domain
    std::uint32_t category = 0;
    std::string name;
};

std::mutex g_category_mutex;
std::vector<CategoryName> g_category_names;

void name_category(const Domain* domain, std::uint32_t category, std::string name) {
    std::lock_guard lock(g_category_mutex);
    auto same = std::find_if(g_category_names.begin(), g_category_names.end(), [&](const CategoryName& known) {
        return known.domain == domain && known.category == category;
    });
    if (same != g_category_names.end())
        same->name = name;
    else
        g_category_names.push_back({domain, category, name});
    Session* session = current_session();
    if (session) session->writer().name_nvtx_category(domain_id(*session, domain), category, name);
}

// CUstream and cudaStream_t are the same pointer; taken as void* so this file needs
// no CUDA header. The name waits for the stream's row (CUPTI's to write).
void name_stream(void* stream, std::string name) {
    name_cuda_stream(reinterpret_cast<std::uintptr_t>(stream), name);
}

// ---------------------------------------------------------------------------
// [SECTION] Memory: NVTX's memory extension (heaps and regions)
// ---------------------------------------------------------------------------

struct MemoryHeap {
    trace::DeviceId device = 0;
    std::uint64_t base = 0;
    std::int64_t bytes = 0;                                   // 0: the process-wide heap (no segment of its own)
    std::unordered_map<std::uint64_t, std::int64_t> regions;  // address -> bytes
};

// Every heap and region the program registered, kept while no session records too.
// One mutex orders the events: a replay of them in time order is the allocator's.
std::mutex g_memory_mutex;
std::unordered_set<MemoryHeap*> g_heaps;
std::unordered_map<std::uint64_t, MemoryHeap*> g_region_heaps;  // live region address -> its heap
MemoryHeap g_process_wide_heap;                                 // NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE (null)

// The NVTX ranges open on the calling thread as a stack, outermost first.
trace::StackId range_stack(Session& session, ThreadState& state) {
    trace::StackId stack = 0;
    for (std::size_t index = 0; index < state.depth; ++index) {
        OpenRange& open = state.stack[index];
        if (open.name.empty()) continue;
        if (!open.memory_parent_set || open.memory_parent != stack) {
            const trace::FrameId frame = session.writer().intern_frame(open.name, kRangeFrameModule, 0);
            open.memory_stack = session.writer().intern_stack(stack, frame);
            open.memory_parent = stack;
            open.memory_parent_set = true;
        }
        stack = open.memory_stack;
    }
    return stack;
}

// What one memory event needs from its thread; null session: nothing records.
struct MemoryRecorder {
    Session* session = nullptr;
    trace::StackId stack = 0;
    trace::ThreadId thread = 0;

    MemoryRecorder() {
        Session* open = current_session();
        if (!open || !open->options().trace_nvtx) return;
        session = open;
        ThreadState& state = thread_state(*open);
        stack = range_stack(*open, state);
        thread = state.thread(*open);
    }
    void record(trace::MemoryAction action, trace::DeviceId device, std::uint64_t address, std::int64_t bytes) const {
        if (!session) return;
        trace::MemoryEvent event;
        event.time_ns = now_ns();
        event.device_id = device;
        event.action = action;
        event.address = address;
        event.bytes = bytes;
        event.stack_id = stack;
        event.thread_id = thread;
        session->writer().record_memory_event(event);
    }
};

std::uint64_t address_of(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer);
}

// The caller holds g_memory_mutex for these.
MemoryHeap* known_heap(nvtxMemHeapHandle_t handle) {
    if (handle == NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE) return &g_process_wide_heap;
    auto* heap = reinterpret_cast<MemoryHeap*>(handle);
    return g_heaps.count(heap) ? heap : nullptr;
}

void end_region(const MemoryRecorder& recorder, std::uint64_t address) {
    auto found = g_region_heaps.find(address);
    if (found == g_region_heaps.end()) return;  // unknown, or registered before a reset
    MemoryHeap* heap = found->second;
    g_region_heaps.erase(found);
    auto region = heap->regions.find(address);
    if (region == heap->regions.end()) return;
    recorder.record(trace::MemoryAction::free_completed, heap->device, address, region->second);
    heap->regions.erase(region);
}

void begin_region(const MemoryRecorder& recorder, MemoryHeap* heap, std::uint64_t address, std::int64_t bytes) {
    end_region(recorder, address);  // registered again without unregistering: the latest counts
    heap->regions[address] = bytes;
    g_region_heaps[address] = heap;
    recorder.record(trace::MemoryAction::alloc, heap->device, address, bytes);
}

void end_all_regions(const MemoryRecorder& recorder, MemoryHeap* heap) {
    for (const auto& [address, bytes] : heap->regions) {
        recorder.record(trace::MemoryAction::free_completed, heap->device, address, bytes);
        g_region_heaps.erase(address);
    }
    heap->regions.clear();
}

nvtxMemHeapHandle_t NVTX_API handle_mem_heap_register(nvtxDomainHandle_t domain, const nvtxMemHeapDesc_t* desc) {
    if (!desc || desc->structSize < offsetof(nvtxMemHeapDesc_t, messageType)) return nullptr;
    auto* heap = new MemoryHeap;
    int device = 0;
    const Domain* owner = as_domain(domain);
    if (owner && owner->is_ember && nvtx::memory_device(desc->category, device)) heap->device = device;
    if (desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS && desc->typeSpecificDesc &&
        desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t)) {
        const auto* range = static_cast<const nvtxMemVirtualRangeDesc_t*>(desc->typeSpecificDesc);
        heap->base = address_of(range->ptr);
        heap->bytes = static_cast<std::int64_t>(range->size);
    }
    MemoryRecorder recorder;
    std::lock_guard lock(g_memory_mutex);
    g_heaps.insert(heap);
    recorder.record(trace::MemoryAction::segment_alloc, heap->device, heap->base, heap->bytes);
    return reinterpret_cast<nvtxMemHeapHandle_t>(heap);
}

void NVTX_API handle_mem_heap_unregister(nvtxDomainHandle_t, nvtxMemHeapHandle_t handle) {
    MemoryRecorder recorder;
    std::lock_guard lock(g_memory_mutex);
    MemoryHeap* heap = known_heap(handle);
    if (!heap || heap == &g_process_wide_heap) return;
    end_all_regions(recorder, heap);
    recorder.record(trace::MemoryAction::segment_free, heap->device, heap->base, heap->bytes);
    g_heaps.erase(heap);
    delete heap;
}

void NVTX_API handle_mem_heap_reset(nvtxDomainHandle_t, nvtxMemHeapHandle_t handle) {
    MemoryRecorder recorder;
    std::lock_guard lock(g_memory_mutex);
    if (MemoryHeap* heap = known_heap(handle)) end_all_regions(recorder, heap);
}

// The elements of a batch: `count` of at least `size` bytes each, `stride` apart.
template <typename Element>
const Element* element_at(const void* elements, std::size_t stride, std::size_t index) {
    return reinterpret_cast<const Element*>(static_cast<const char*>(elements) + index * stride);
}

void NVTX_API handle_mem_regions_register(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t* batch) {
    if (!batch || batch->structSize < sizeof(nvtxMemRegionsRegisterBatch_t) || !batch->regionDescElements ||
        batch->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        batch->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return;
    MemoryRecorder recorder;
    std::lock_guard lock(g_memory_mutex);
    MemoryHeap* heap = known_heap(batch->heap);
    for (std::size_t i = 0; i < batch->regionCount; ++i) {
        const auto* range =
            element_at<nvtxMemVirtualRangeDesc_t>(batch->regionDescElements, batch->regionDescElementSize, i);
        // A region's handle is its address: unregistering by handle or by pointer is the same.
        if (batch->regionHandleElementsOut)
            batch->regionHandleElementsOut[i] = reinterpret_cast<nvtxMemRegionHandle_t>(const_cast<void*>(range->ptr));
        if (heap) begin_region(recorder, heap, address_of(range->ptr), static_cast<std::int64_t>(range->size));
    }
}

void NVTX_API handle_mem_regions_resize(nvtxDomainHandle_t, const nvtxMemRegionsResizeBatch_t* batch) {
    if (!batch || batch->structSize < sizeof(nvtxMemRegionsResizeBatch_t) || !batch->regionDescElements ||
        batch->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        batch->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return;
    MemoryRecorder recorder;
    std::lock_guard lock(g_memory_mutex);
    for (std::size_t i = 0; i < batch->regionDescCount; ++i) {
        const auto* range =
            element_at<nvtxMemVirtualRangeDesc_t>(batch->regionDescElements, batch->regionDescElementSize, i);
        auto found = g_region_heaps.find(address_of(range->ptr));
        if (found == g_region_heaps.end()) continue;
        // No resize action in the trace: the old size ends and the new one begins.
        begin_region(recorder, found->second, address_of(range->ptr), static_cast<std::int64_t>(range->size));
    }
}

void NVTX_API handle_mem_regions_unregister(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t* batch) {
    if (!batch || batch->structSize < sizeof(nvtxMemRegionsUnregisterBatch_t) || !batch->refElements ||
        batch->refElementSize < sizeof(nvtxMemRegionRef_t) ||
        (batch->refType != NVTX_MEM_REGION_REF_TYPE_POINTER && batch->refType != NVTX_MEM_REGION_REF_TYPE_HANDLE))
        return;
    MemoryRecorder recorder;
    std::lock_guard lock(g_memory_mutex);
    for (std::size_t i = 0; i < batch->refCount; ++i) {
        const auto* ref = element_at<nvtxMemRegionRef_t>(batch->refElements, batch->refElementSize, i);
        end_region(recorder, address_of(ref->pointer));  // handles are addresses (see register)
    }
}

// ---------------------------------------------------------------------------
// [SECTION] The NVTX entry points (C signatures NVTX calls)
// ---------------------------------------------------------------------------

void NVTX_API handle_mark_ex(const nvtxEventAttributes_t* attributes) {
    mark(nullptr, attributes, nullptr, nullptr);
}
void NVTX_API handle_mark_a(const char* message) {
    mark(nullptr, nullptr, message, nullptr);
}
void NVTX_API handle_mark_w(const wchar_t* message) {
    mark(nullptr, nullptr, nullptr, message);
}
nvtxRangeId_t NVTX_API handle_range_start_ex(const nvtxEventAttributes_t* attributes) {
    return start_range(nullptr, attributes, nullptr, nullptr);
}
nvtxRangeId_t NVTX_API handle_range_start_a(const char* message) {
    return start_range(nullptr, nullptr, message, nullptr);
}
nvtxRangeId_t NVTX_API handle_range_start_w(const wchar_t* message) {
    return start_range(nullptr, nullptr, nullptr, message);
}
void NVTX_API handle_range_end(nvtxRangeId_t id) {
    end_range(id);
}
int NVTX_API handle_range_push_ex(const nvtxEventAttributes_t* attributes) {
    return push_range(nullptr, attributes, nullptr, nullptr);
}
int NVTX_API handle_range_push_a(const char* message) {
    return push_range(nullptr, nullptr, message, nullptr);
}
int NVTX_API handle_range_push_w(const wchar_t* message) {
    return push_range(nullptr, nullptr, nullptr, message);
}
int NVTX_API handle_range_pop() {
    return pop_range(nullptr);
}
void NVTX_API handle_name_category_a(std::uint32_t category, const char* name) {
    name_category(nullptr, category, name ? name : "");
}
void NVTX_API handle_name_category_w(std::uint32_t category, const wchar_t* name) {
    name_category(nullptr, category, utf8_from_wide(name));
}
void NVTX_API handle_name_os_thread_a(std::uint32_t tid, const char* name) {
    name_thread(tid, name ? name : "");
}
void NVTX_API handle_name_os_thread_w(std::uint32_t tid, const wchar_t* name) {
    name_thread(tid, utf8_from_wide(name));
}

void NVTX_API handle_domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
    mark(as_domain(domain), attributes, nullptr, nullptr);
}
nvtxRangeId_t NVTX_API handle_domain_range_start_ex(nvtxDomainHandle_t domain,
                                                    const nvtxEventAttributes_t* attributes) {
    return start_range(as_domain(domain), attributes, nullptr, nullptr);
}
void NVTX_API handle_domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) {
    end_range(id);
}
int NVTX_API handle_domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
    return push_range(as_domain(domain), attributes, nullptr, nullptr);
}
int NVTX_API handle_domain_range_pop(nvtxDomainHandle_t domain) {
    return pop_range(as_domain(domain));
}
nvtxResourceHandle_t NVTX_API handle_domain_resource_create(nvtxDomainHandle_t, nvtxResourceAttributes_t*) {
    return nullptr;
}
void NVTX_API handle_domain_resource_destroy(nvtxResourceHandle_t) {}
void NVTX_API handle_domain_name_category_a(nvtxDomainHandle_t domain, std::uint32_t category, const char* name) {
    name_category(as_domain(domain), category, name ? name : "");
}
void NVTX_API handle_domain_name_category_w(nvtxDomainHandle_t domain, std::uint32_t category, const wchar_t* name) {
    name_category(as_domain(domain), category, utf8_from_wide(name));
}

// nvtxNameCuStream (driver module) and nvtxNameCudaStream (runtime module).
void NVTX_API handle_name_stream_a(void* stream, const char* name) {
    name_stream(stream, name ? name : "");
}
void NVTX_API handle_name_stream_w(void* stream, const wchar_t* name) {
    name_stream(stream, utf8_from_wide(name));
}

// Registered strings and domains live as long as the process (NVTX has no
// unregister; domains are few).
nvtxStringHandle_t NVTX_API handle_domain_register_string_a(nvtxDomainHandle_t, const char* text) {
    auto* registered = new RegisteredString;
    registered->text.text = text ? text : "";
    return reinterpret_cast<nvtxStringHandle_t>(registered);
}
nvtxStringHandle_t NVTX_API handle_domain_register_string_w(nvtxDomainHandle_t domain, const wchar_t* text) {
    std::string utf8 = utf8_from_wide(text);
    return handle_domain_register_string_a(domain, utf8.c_str());
}
nvtxDomainHandle_t NVTX_API handle_domain_create_a(const char* name) {
    auto* domain = new Domain;
    domain->name.text = name ? name : "";
    domain->is_ember = domain->name.text == nvtx::kDomain;
    return reinterpret_cast<nvtxDomainHandle_t>(domain);
}
nvtxDomainHandle_t NVTX_API handle_domain_create_w(const wchar_t* name) {
    std::string utf8 = utf8_from_wide(name);
    return handle_domain_create_a(utf8.c_str());
}
void NVTX_API handle_domain_destroy(nvtxDomainHandle_t) {}
void NVTX_API handle_initialize(const void*) {}

template <typename Function>
void install(NvtxFunctionTable table, unsigned int size, unsigned int slot, Function function) {
    if (table && slot < size && table[slot]) *table[slot] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

}  // namespace ember::collector

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    using namespace ember::collector;
    if (!get_export_table) return 0;
    start_session_from_environment_once();
    auto* version = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
    if (version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) && version->SetInjectionNvtxVersion)
        version->SetInjectionNvtxVersion(NVTX_VERSION);
    auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable)
        return 0;

    NvtxFunctionTable table = nullptr;
    unsigned int size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) {
        install(table, size, NVTX_CBID_CORE_MarkEx, handle_mark_ex);
        install(table, size, NVTX_CBID_CORE_MarkA, handle_mark_a);
        install(table, size, NVTX_CBID_CORE_MarkW, handle_mark_w);
        install(table, size, NVTX_CBID_CORE_RangeStartEx, handle_range_start_ex);
        install(table, size, NVTX_CBID_CORE_RangeStartA, handle_range_start_a);
        install(table, size, NVTX_CBID_CORE_RangeStartW, handle_range_start_w);
        install(table, size, NVTX_CBID_CORE_RangeEnd, handle_range_end);
        install(table, size, NVTX_CBID_CORE_RangePushEx, handle_range_push_ex);
        install(table, size, NVTX_CBID_CORE_RangePushA, handle_range_push_a);
        install(table, size, NVTX_CBID_CORE_RangePushW, handle_range_push_w);
        install(table, size, NVTX_CBID_CORE_RangePop, handle_range_pop);
        install(table, size, NVTX_CBID_CORE_NameCategoryA, handle_name_category_a);
        install(table, size, NVTX_CBID_CORE_NameCategoryW, handle_name_category_w);
        install(table, size, NVTX_CBID_CORE_NameOsThreadA, handle_name_os_thread_a);
        install(table, size, NVTX_CBID_CORE_NameOsThreadW, handle_name_os_thread_w);
    } else {
        return 0;
    }
    table = nullptr;
    size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) {
        install(table, size, NVTX_CBID_CORE2_DomainMarkEx, handle_domain_mark_ex);
        install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, handle_domain_range_start_ex);
        install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, handle_domain_range_end);
        install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, handle_domain_range_push_ex);
        install(table, size, NVTX_CBID_CORE2_DomainRangePop, handle_domain_range_pop);
        install(table, size, NVTX_CBID_CORE2_DomainResourceCreate, handle_domain_resource_create);
        install(table, size, NVTX_CBID_CORE2_DomainResourceDestroy, handle_domain_resource_destroy);
        install(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, handle_domain_name_category_a);
        install(table, size, NVTX_CBID_CORE2_DomainNameCategoryW, handle_domain_name_category_w);
        install(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, handle_domain_register_string_a);
        install(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, handle_domain_register_string_w);
        install(table, size, NVTX_CBID_CORE2_DomainCreateA, handle_domain_create_a);
        install(table, size, NVTX_CBID_CORE2_DomainCreateW, handle_domain_create_w);
        install(table, size, NVTX_CBID_CORE2_DomainDestroy, handle_domain_destroy);
        install(table, size, NVTX_CBID_CORE2_Initialize, handle_initialize);
    }
    // Device, context and event names have no place in the trace: left to NVTX's no-ops.
    table = nullptr;
    size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &table, &size)) {
        install(table, size, NVTX_CBID_CUDA_NameCuStreamA, handle_name_stream_a);
        install(table, size, NVTX_CBID_CUDA_NameCuStreamW, handle_name_stream_w);
    }
    table = nullptr;
    size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CUDART, &table, &size)) {
        install(table, size, NVTX_CBID_CUDART_NameCudaStreamA, handle_name_stream_a);
        install(table, size, NVTX_CBID_CUDART_NameCudaStreamW, handle_name_stream_w);
    }
    return 1;
}

extern "C" int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module) {
    using namespace ember::collector;
    if (!module || module->structSize < sizeof(nvtxExtModuleInfo_t)) return 0;
    start_session_from_environment_once();
    // Other extensions (payloads, counters) and other versions of this one are left to
    // NVTX's no-ops.
    if (module->moduleId != NVTX_EXT_MODULEID_MEM || module->compatId != NVTX_EXT_COMPATID_MEM) return 1;
    for (std::size_t s = 0; s < module->segmentsCount; ++s) {
        nvtxExtModuleSegment_t& segment = module->segments[s];
        auto install_slot = [&segment](std::size_t slot, auto function) {
            if (slot < segment.slotCount) segment.functionSlots[slot] = reinterpret_cast<intptr_t>(function);
        };
        install_slot(NVTX3EXT_CBID_nvtxMemHeapRegister, handle_mem_heap_register);
        install_slot(NVTX3EXT_CBID_nvtxMemHeapUnregister, handle_mem_heap_unregister);
        install_slot(NVTX3EXT_CBID_nvtxMemHeapReset, handle_mem_heap_reset);
        install_slot(NVTX3EXT_CBID_nvtxMemRegionsRegister, handle_mem_regions_register);
        install_slot(NVTX3EXT_CBID_nvtxMemRegionsResize, handle_mem_regions_resize);
        install_slot(NVTX3EXT_CBID_nvtxMemRegionsUnregister, handle_mem_regions_unregister);
    }
    return 1;
}

namespace ember::collector {

void nvtx_session_started(Session& session) {
    {
        std::lock_guard lock(g_category_mutex);
        for (const CategoryName& named : g_category_names)
            session.writer().name_nvtx_category(domain_id(session, named.domain), named.category, named.name);
    }
    // What the program's heaps hold as the session opens.
    if (!session.options().trace_nvtx) return;
    std::lock_guard lock(g_memory_mutex);
    const trace::TimeNs time = now_ns();
    auto live = [&](trace::MemoryAction action, trace::DeviceId device, std::uint64_t address, std::int64_t bytes) {
        trace::MemoryEvent event;
        event.time_ns = time;
        event.device_id = device;
        event.action = action;
        event.address = address;
        event.bytes = bytes;
        session.writer().record_memory_event(event);
    };
    for (const MemoryHeap* heap : g_heaps)
        live(trace::MemoryAction::segment_live_at_start, heap->device, heap->base, heap->bytes);
    for (const auto& [address, heap] : g_region_heaps)
        live(trace::MemoryAction::live_at_start, heap->device, address, heap->regions.at(address));
}

}  // namespace ember::collector

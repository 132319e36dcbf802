// nvtx_injection.cpp: NVTX handlers. Push/pop ranges nest on a per-thread stack
// (depth and parent come from it); start/end ranges live in a process-wide table
// keyed by the id NVTX hands back; marks are instants. Strings registered with
// nvtxDomainRegisterString and domain names are interned once per file; plain
// messages go through a per-thread cache so the writer's string mutex is taken
// once per distinct text. Marks in the "ember" domain with category 100
// (engine/core/nvtx.h: kCounterCategory) become samples of a counter track named
// by the mark's text.
#include "collectors/nvtx_injection.h"

#include "collectors/session.h"

#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::collector {

namespace {

constexpr std::uint32_t kCounterCategory = 100;
constexpr std::size_t kMaxCachedMessagesPerThread = 1 << 16;

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

Domain* as_domain(nvtxDomainHandle_t handle) { return reinterpret_cast<Domain*>(handle); }

std::string utf8_from_wide(const wchar_t* text) {
    std::string out;
    if (!text) return out;
    for (; *text; ++text) {
        auto code = static_cast<std::uint32_t>(*text);
        if (code < 0x80) {
            out += static_cast<char>(code);
        } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (code >> 18));
            out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        }
    }
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
};

struct ThreadState {
    std::uint32_t generation = 0;
    std::vector<OpenRange> stack;
    std::unordered_map<std::string, trace::StringId, TextHash, std::equal_to<>> messages;
};

ThreadState& thread_state(Session& session) {
    thread_local ThreadState state;
    if (state.generation != session.generation()) {
        state.generation = session.generation();
        state.stack.clear();
        state.messages.clear();
    }
    return state;
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

struct Attributes {
    trace::StringId name_id = trace::kNoString;
    std::string_view text;  // the message as text, for counters
    std::string text_storage;
    std::uint32_t category = 0;
    std::uint32_t color = 0;
    trace::Payload payload;
};

trace::Payload payload_of(const nvtxEventAttributes_t& attributes) {
    switch (attributes.payloadType) {
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
            return trace::Payload::of_integer(static_cast<std::int64_t>(attributes.payload.ullValue));
        case NVTX_PAYLOAD_TYPE_INT64: return trace::Payload::of_integer(attributes.payload.llValue);
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: return trace::Payload::of_integer(attributes.payload.uiValue);
        case NVTX_PAYLOAD_TYPE_INT32: return trace::Payload::of_integer(attributes.payload.iValue);
        case NVTX_PAYLOAD_TYPE_DOUBLE: return trace::Payload::of_real(attributes.payload.dValue);
        case NVTX_PAYLOAD_TYPE_FLOAT: return trace::Payload::of_real(attributes.payload.fValue);
        default: return {};
    }
}

void read_attributes(Session& session, ThreadState& state, const nvtxEventAttributes_t* attributes,
                     Attributes& out) {
    if (!attributes || attributes->size < NVTX_EVENT_ATTRIB_STRUCT_SIZE) return;
    out.category = attributes->category;
    if (attributes->colorType == NVTX_COLOR_ARGB) out.color = attributes->color;
    out.payload = payload_of(*attributes);
    switch (attributes->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII:
            if (attributes->message.ascii) {
                out.text = attributes->message.ascii;
                out.name_id = intern_message(session, state, out.text);
            }
            break;
        case NVTX_MESSAGE_TYPE_UNICODE:
            out.text_storage = utf8_from_wide(attributes->message.unicode);
            out.text = out.text_storage;
            out.name_id = intern_message(session, state, out.text);
            break;
        case NVTX_MESSAGE_TYPE_REGISTERED:
            if (attributes->message.registered) {
                auto* registered = reinterpret_cast<RegisteredString*>(attributes->message.registered);
                out.text = registered->text.text;
                out.name_id = registered->text.id(session);
            }
            break;
        default: break;
    }
}

trace::StringId domain_id(Session& session, const Domain* domain) {
    return domain ? const_cast<Domain*>(domain)->name.id(session) : trace::kNoString;
}

// ---------------------------------------------------------------------------
// [SECTION] Push/pop, start/end, marks
// ---------------------------------------------------------------------------

int push_range(const Domain* domain, const nvtxEventAttributes_t* attributes, const char* ascii,
               const wchar_t* unicode) {
    Session* session = current_session();
    if (!session || !session->options().trace_nvtx) return 0;
    ThreadState& state = thread_state(*session);
    OpenRange open;
    open.domain = domain;
    open.recorded = session->capturing();
    if (open.recorded) {
        Attributes read;
        if (attributes) {
            read_attributes(*session, state, attributes, read);
        } else if (ascii) {
            read.name_id = intern_message(*session, state, ascii);
        } else if (unicode) {
            read.name_id = intern_message(*session, state, utf8_from_wide(unicode));
        }
        trace::RangeEvent& event = open.event;
        event.range_id = session->writer().next_range_id();
        event.thread_id = session->this_thread();
        event.domain_id = domain_id(*session, domain);
        event.name_id = read.name_id;
        event.category = read.category;
        event.color = read.color;
        event.payload = read.payload;
        event.depth = static_cast<std::int32_t>(state.stack.size());
        for (auto parent = state.stack.rbegin(); parent != state.stack.rend(); ++parent) {
            if (parent->recorded) {
                event.parent_range_id = parent->event.range_id;
                break;
            }
        }
        event.start_ns = now_ns();
    }
    state.stack.push_back(open);
    return static_cast<int>(state.stack.size()) - 1;
}

int pop_range(const Domain* domain) {
    Session* session = current_session();
    if (!session || !session->options().trace_nvtx) return 0;
    trace::TimeNs end = now_ns();
    ThreadState& state = thread_state(*session);
    // The innermost open range of this domain (normally the top of the stack).
    for (std::size_t index = state.stack.size(); index-- > 0;) {
        if (state.stack[index].domain != domain) continue;
        OpenRange closing = state.stack[index];
        state.stack.erase(state.stack.begin() + static_cast<std::ptrdiff_t>(index));
        if (closing.recorded && session->capturing()) {
            closing.event.end_ns = end;
            session->writer().record_range(closing.event);
        }
        return static_cast<int>(state.stack.size());
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
    Attributes read;
    if (attributes)
        read_attributes(*session, state, attributes, read);
    else if (ascii)
        read.name_id = intern_message(*session, state, ascii);
    else if (unicode)
        read.name_id = intern_message(*session, state, utf8_from_wide(unicode));
    StartedRange started;
    started.generation = session->generation();
    trace::RangeEvent& event = started.event;
    event.range_id = session->writer().next_range_id();
    event.thread_id = session->this_thread();
    event.domain_id = domain_id(*session, domain);
    event.name_id = read.name_id;
    event.category = read.category;
    event.color = read.color;
    event.payload = read.payload;
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
    Attributes read;
    if (attributes)
        read_attributes(*session, state, attributes, read);
    else if (ascii)
        read.name_id = intern_message(*session, state, ascii);
    else if (unicode)
        read.name_id = intern_message(*session, state, utf8_from_wide(unicode));
    if (domain && domain->is_ember && read.category == kCounterCategory &&
        read.payload.kind != trace::PayloadKind::none) {
        trace::CounterId counter = session->counter(read.text, "", trace::kNoDevice);
        session->writer().record_counter({counter, time, read.payload.as_double()});
        return;
    }
    trace::MarkEvent event;
    event.time_ns = time;
    event.thread_id = session->this_thread();
    event.domain_id = domain_id(*session, domain);
    event.name_id = read.name_id;
    event.category = read.category;
    event.color = read.color;
    event.payload = read.payload;
    session->writer().record_mark(event);
}

void name_thread(std::uint32_t tid, const std::string& name) {
    Session* session = current_session();
    if (session) session->name_os_thread(tid, name);
}

// ---------------------------------------------------------------------------
// [SECTION] The NVTX entry points (C signatures NVTX calls)
// ---------------------------------------------------------------------------

void NVTX_API handle_mark_ex(const nvtxEventAttributes_t* attributes) { mark(nullptr, attributes, nullptr, nullptr); }
void NVTX_API handle_mark_a(const char* message) { mark(nullptr, nullptr, message, nullptr); }
void NVTX_API handle_mark_w(const wchar_t* message) { mark(nullptr, nullptr, nullptr, message); }
nvtxRangeId_t NVTX_API handle_range_start_ex(const nvtxEventAttributes_t* attributes) {
    return start_range(nullptr, attributes, nullptr, nullptr);
}
nvtxRangeId_t NVTX_API handle_range_start_a(const char* message) { return start_range(nullptr, nullptr, message, nullptr); }
nvtxRangeId_t NVTX_API handle_range_start_w(const wchar_t* message) { return start_range(nullptr, nullptr, nullptr, message); }
void NVTX_API handle_range_end(nvtxRangeId_t id) { end_range(id); }
int NVTX_API handle_range_push_ex(const nvtxEventAttributes_t* attributes) {
    return push_range(nullptr, attributes, nullptr, nullptr);
}
int NVTX_API handle_range_push_a(const char* message) { return push_range(nullptr, nullptr, message, nullptr); }
int NVTX_API handle_range_push_w(const wchar_t* message) { return push_range(nullptr, nullptr, nullptr, message); }
int NVTX_API handle_range_pop() { return pop_range(nullptr); }
void NVTX_API handle_name_category_a(std::uint32_t, const char*) {}
void NVTX_API handle_name_category_w(std::uint32_t, const wchar_t*) {}
void NVTX_API handle_name_os_thread_a(std::uint32_t tid, const char* name) { name_thread(tid, name ? name : ""); }
void NVTX_API handle_name_os_thread_w(std::uint32_t tid, const wchar_t* name) { name_thread(tid, utf8_from_wide(name)); }

void NVTX_API handle_domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
    mark(as_domain(domain), attributes, nullptr, nullptr);
}
nvtxRangeId_t NVTX_API handle_domain_range_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
    return start_range(as_domain(domain), attributes, nullptr, nullptr);
}
void NVTX_API handle_domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end_range(id); }
int NVTX_API handle_domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
    return push_range(as_domain(domain), attributes, nullptr, nullptr);
}
int NVTX_API handle_domain_range_pop(nvtxDomainHandle_t domain) { return pop_range(as_domain(domain)); }
nvtxResourceHandle_t NVTX_API handle_domain_resource_create(nvtxDomainHandle_t, nvtxResourceAttributes_t*) {
    return nullptr;
}
void NVTX_API handle_domain_resource_destroy(nvtxResourceHandle_t) {}
void NVTX_API handle_domain_name_category_a(nvtxDomainHandle_t, std::uint32_t, const char*) {}
void NVTX_API handle_domain_name_category_w(nvtxDomainHandle_t, std::uint32_t, const wchar_t*) {}

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
    domain->is_ember = domain->name.text == "ember";
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
    return 1;
}

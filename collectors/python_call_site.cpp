// python_call_site.cpp: the Python stack of a CUDA API call (python_call_site.h).
#include "collectors/python_call_site.h"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ember::collector {

namespace {

using python::word_at;

constexpr int kMaxFrames = 1024;
constexpr std::size_t kMaxKnownChains = 1 << 14;  // per thread; a program past this starts over
constexpr int kOwnedByCStack = 3;                 // 3.12+: the C stack's entry frame, no code of its own
constexpr std::size_t kMaxRanges = 64;            // ranges of frames read at once
constexpr std::uint64_t kRangeGap = 1024;         // frames this close share a range
constexpr std::uint64_t kMaxRangeBytes = 64 << 10;

std::uint64_t hash_chain(const std::vector<std::uint64_t>& chain) {
    std::uint64_t hash = 0x9e3779b97f4a7c15ull ^ chain.size();
    for (std::uint64_t word : chain) {
        hash ^= word + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
        hash *= 0xbf58476d1ce4e5b9ull;
    }
    return hash;
}

}  // namespace

PythonCallSites::PythonCallSites(pid_t pid, std::uint64_t runtime_address, store::TraceWriter& writer)
    : pid_(pid), runtime_(runtime_address), writer_(writer), process_(pid) {
    const python::PythonVersion& version = process_.version();
    std::optional<python::PythonLayout> layout;
    if (version.minor >= 13) {
        python::ProcessMemory memory(pid);
        unsigned char block[python::kDebugOffsets313Size] = {};
        if (memory.read(runtime_address, block, sizeof block)) layout = python::layout_from_debug_offsets(block);
    } else {
        layout = python::builtin_layout(version);
    }
    if (!layout) throw python::PythonReadError("no frame layout for Python " + version.text());
    layout_ = *layout;
}

std::unique_ptr<PythonCallSites> PythonCallSites::open_in_process(store::TraceWriter& writer, std::string& why) {
    void* runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
    auto this_thread = reinterpret_cast<ThreadStateFunction>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
    auto initialized = reinterpret_cast<FlagFunction>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
    auto finalizing = reinterpret_cast<FlagFunction>(dlsym(RTLD_DEFAULT, "Py_IsFinalizing"));  // 3.13
    if (!finalizing) finalizing = reinterpret_cast<FlagFunction>(dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
    if (!runtime || !this_thread || !initialized) {
        why = "not a CPython process (no _PyRuntime, PyGILState_GetThisThreadState or Py_IsInitialized)";
        return nullptr;
    }
    try {
        auto sites = std::make_unique<PythonCallSites>(getpid(), reinterpret_cast<std::uintptr_t>(runtime), writer);
        sites->this_thread_state_ = this_thread;
        sites->is_initialized_ = initialized;
        sites->is_finalizing_ = finalizing;
        return sites;
    } catch (const std::exception& error) {
        why = error.what();
        return nullptr;
    }
}

std::uint64_t PythonCallSites::current_thread_state() const {
    if (!this_thread_state_ || refused() || !is_initialized_() || (is_finalizing_ && is_finalizing_())) return 0;
    return reinterpret_cast<std::uintptr_t>(this_thread_state_());
}

bool PythonCallSites::read_chain(std::uint64_t thread_state, PythonCallSiteCache& cache, std::uint64_t& pthread_id) {
    cache.chain.clear();
    if (thread_state == 0 || layout_.tstate_size > 4096 || layout_.frame_size > 512) return false;
    if (!cache.memory) cache.memory = std::make_unique<python::ProcessMemory>(pid_);
    python::ProcessMemory& memory = *cache.memory;
    memory.forget_pages();  // our own thread's frames change between calls

    // One read: the thread state, the previous walk's _PyCFrame and frames. Frames
    // near each other are read as one range: the kernel pins every page of every
    // element (about 0.2 us each), and 3.11+ frames share a data-stack chunk.
    std::vector<std::uint64_t>& sorted = cache.sorted_addresses;
    sorted.assign(cache.frame_addresses.begin(), cache.frame_addresses.end());
    std::sort(sorted.begin(), sorted.end());
    const bool through_cframe = layout_.frame_through_cframe && cache.cframe != 0;
    iovec remote[kMaxRanges + 2];
    std::size_t count = 0, bytes = 0;
    auto add = [&](std::uint64_t address, std::size_t size) {
        remote[count++] = {reinterpret_cast<void*>(address), size};
        bytes += size;
    };
    add(thread_state, layout_.tstate_size);
    if (through_cframe) add(cache.cframe + layout_.cframe_current_frame, sizeof(std::uint64_t));
    const std::size_t first_range = count;
    for (std::size_t index = 0; index < sorted.size() && count < kMaxRanges + 2;) {
        const std::uint64_t begin = sorted[index];
        std::uint64_t end = begin + layout_.frame_size;
        for (++index; index < sorted.size() && sorted[index] <= end + kRangeGap &&
                      sorted[index] + layout_.frame_size - begin <= kMaxRangeBytes;
             ++index)
            end = std::max(end, sorted[index] + layout_.frame_size);
        add(begin, end - begin);
    }
    cache.prefetched.resize(bytes);
    iovec local{cache.prefetched.data(), bytes};
    const ssize_t got = process_vm_readv(pid_, &local, 1, remote, count, 0);
    // Refused outright (a seccomp filter, a kernel without the call): every later call
    // would be too, so the call sites stop here rather than cost a system call each.
    if (got < 0 && (errno == EPERM || errno == ENOSYS)) refused_.store(true, std::memory_order_relaxed);
    // Transfers stop at an element that cannot be read, never inside one.
    std::size_t whole = 0, offset = 0;
    std::size_t offsets[kMaxRanges + 2] = {};
    for (std::size_t index = 0; index < count; ++index) {
        offsets[index] = offset;
        offset += remote[index].iov_len;
        if (got >= 0 && offset <= static_cast<std::size_t>(got)) whole = index + 1;
    }
    if (whole == 0) return false;  // the thread state itself is unreadable
    const unsigned char* state = cache.prefetched.data();
    // The bytes of [address, address + frame_size) when a range read holds them.
    auto prefetched_frame = [&](std::uint64_t address) -> const unsigned char* {
        for (std::size_t index = first_range; index < whole; ++index) {
            const auto begin = reinterpret_cast<std::uint64_t>(remote[index].iov_base);
            if (address >= begin && address + layout_.frame_size <= begin + remote[index].iov_len)
                return state + offsets[index] + (address - begin);
        }
        return nullptr;
    };
    pthread_id = word_at(state, layout_.tstate_thread_id);
    std::uint64_t frame = word_at(state, layout_.tstate_frame);
    if (layout_.frame_through_cframe && frame != 0) {
        const std::uint64_t cframe = frame;
        if (through_cframe && cframe == cache.cframe && whole > 1)
            frame = word_at(state + offsets[1], 0);
        else if (!memory.read_cached(cframe + layout_.cframe_current_frame, &frame, sizeof frame))
            return false;
        cache.cframe = cframe;
    }

    const bool skip_entry_frames = layout_.frame_owner && process_.version().minor >= 12;
    std::vector<std::uint64_t>& addresses = cache.walked_addresses;
    addresses.clear();
    unsigned char block[512] = {};
    for (int depth = 0; frame != 0; ++depth) {
        if (depth >= kMaxFrames) return false;
        const unsigned char* fields = prefetched_frame(frame);
        if (!fields) {
            if (!memory.read_cached(frame, block, layout_.frame_size)) return false;
            fields = block;
        }
        addresses.push_back(frame);
        const std::uint64_t back = word_at(fields, layout_.frame_back);
        if (skip_entry_frames && fields[*layout_.frame_owner] == kOwnedByCStack) {
            frame = back;
            continue;
        }
        cache.chain.push_back(word_at(fields, layout_.frame_code));
        std::uint32_t lasti = 0;
        std::memcpy(&lasti, fields + layout_.frame_lasti, sizeof lasti);
        cache.chain.push_back(layout_.interpreter_frames ? word_at(fields, layout_.frame_instr) : lasti);
        frame = back;
    }
    std::swap(cache.frame_addresses, addresses);
    return true;
}

trace::StackId PythonCallSites::resolve(std::uint64_t pthread_id, std::size_t frame_count) {
    std::lock_guard lock(mutex_);
    std::vector<python::PythonThread> threads;
    std::string error;
    if (!process_.snapshot(threads, error)) return 0;
    for (const python::PythonThread& thread : threads) {
        if (thread.thread_id != pthread_id) continue;
        if (thread.frames.size() != frame_count) return 0;
        std::vector<trace::FrameId> stack;
        stack.reserve(frame_count);
        for (auto frame = thread.frames.rbegin(); frame != thread.frames.rend(); ++frame) {
            auto key = std::make_tuple(frame->function, frame->file, frame->line);
            auto found = frame_ids_.find(key);
            if (found == frame_ids_.end())
                found = frame_ids_
                            .emplace(std::move(key), writer_.intern_frame(frame->function, frame->file, 0, frame->line))
                            .first;
            stack.push_back(found->second);
        }
        return writer_.intern_stack(stack);
    }
    return 0;
}

trace::StackId PythonCallSites::stack_of(std::uint64_t thread_state, PythonCallSiteCache& cache) {
    calls_.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t pthread_id = 0;
    if (!read_chain(thread_state, cache, pthread_id) || cache.chain.empty()) {
        unknown_.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    if (cache.chain == cache.last_chain) {
        same_as_last_.fetch_add(1, std::memory_order_relaxed);
        return cache.last_stack;
    }
    const std::uint64_t hash = hash_chain(cache.chain);
    auto found = cache.known.find(hash);
    trace::StackId stack = 0;
    if (found != cache.known.end() && found->second.chain == cache.chain) {
        known_.fetch_add(1, std::memory_order_relaxed);
        stack = found->second.stack;
    } else {
        // A chain that cannot be resolved is remembered as 0 too: the snapshot is the
        // expensive part, and the same chain would fail the same way.
        stack = resolve(pthread_id, cache.chain.size() / 2);
        (stack != 0 ? resolved_ : unknown_).fetch_add(1, std::memory_order_relaxed);
        if (cache.known.size() >= kMaxKnownChains) cache.known.clear();
        cache.known[hash] = {cache.chain, stack};
    }
    cache.last_chain = cache.chain;
    cache.last_stack = stack;
    return stack;
}

PythonCallSites::Counts PythonCallSites::counts() const {
    Counts counts;
    counts.calls = calls_.load(std::memory_order_relaxed);
    counts.same_as_last = same_as_last_.load(std::memory_order_relaxed);
    counts.known = known_.load(std::memory_order_relaxed);
    counts.resolved = resolved_.load(std::memory_order_relaxed);
    counts.unknown = unknown_.load(std::memory_order_relaxed);
    return counts;
}

}  // namespace ember::collector

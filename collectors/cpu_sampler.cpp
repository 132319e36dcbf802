// cpu_sampler.cpp: SIGPROF stack sampling (see cpu_sampler.h).
#include "collectors/cpu_sampler.h"
#include "common/os.h"

#include "collectors/clock.h"
#include "collectors/cupti_records.h"
#include "collectors/elf_symbols.h"
#include "collectors/perf_map.h"
#include "collectors/session.h"
#include "profiler/store/schema.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <execinfo.h>
#include <link.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

namespace ember::collector {

namespace {

constexpr int kMaxFrames = 64;
constexpr int kSlots = 4096;
// backtrace() inside the handler sees the handler and the signal trampoline first:
// two frames, or more where backtrace() is itself wrapped (the sanitizers intercept
// it). The handler finds the interrupted instruction (the context's rip) among them.
constexpr int kHandlerFrames = 2;

enum SlotState : int { empty = 0, writing = 1, full = 2 };

struct Slot {
    std::atomic<int> state{empty};
    std::int64_t time_ns = 0;
    std::int64_t tid = 0;
    int depth = 0;
    int skip = kHandlerFrames;  // frames[skip] is the interrupted instruction
    void* frames[kMaxFrames];
};

Slot g_slots[kSlots];
std::atomic<std::uint32_t> g_next_slot{0};
std::atomic<std::uint64_t> g_dropped{0};
std::atomic<bool> g_sampling{false};

// --- Unwinding past JIT-generated code -------------------------------------------------
// Code generated at run time (oneDNN's convolution and GEMM kernels, any JIT) has no
// unwind tables, so backtrace() stops at the interrupted instruction and the sample
// hangs at the root of the flamegraph with no caller. JIT kernels are entered through
// a function pointer from code that does have tables, so the return address into that
// code is on the stack above the interrupted stack pointer. The handler looks for it:
// a word that points into a loaded module's code right after an indirect call
// instruction. It then points the interrupted context at that return address (rip =
// the address, rsp = just above its slot) and unwinds again from there, through the
// caller's own tables; the context is put back before the handler returns. Memory is
// read with process_vm_readv, which fails with EFAULT instead of faulting. The JIT
// frame's rbp is not the caller's (JIT kernels use it as a general register): it is
// taken from where the JIT's prologue saved it when that looks like a frame above, else
// from a zeroed frame (a caller addressed from rbp then ends the stack). A stale word
// can still send the unwinder through garbage (libgcc reads memory unchecked), so these
// second unwinds run under a fault guard: a SIGSEGV/SIGBUS on the guarded thread jumps
// back and drops that candidate (libgcc finds unwind tables with glibc's lock-free
// _dl_find_object, so no lock is left held). Faults on other threads, or outside a
// guarded unwind, go to the handler installed before ours.

struct CodeRange {
    std::uintptr_t begin = 0, end = 0;
};

struct CodeMap {
    std::vector<CodeRange> ranges;  // sorted by begin
    unsigned long long adds = 0, subs = 0;
};

std::atomic<const CodeMap*> g_code_map{nullptr};
std::mutex g_code_maps_mutex;
// Every map ever published, kept: a handler on another thread may still read an older one.
std::vector<std::unique_ptr<CodeMap>> g_code_maps;
std::atomic<bool> g_recover_jit{false};
pid_t g_pid = 0;
alignas(16) const std::uintptr_t g_zero_frame[8] = {};

bool read_memory(std::uintptr_t address, void* out, std::size_t size) {
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    return process_vm_readv(g_pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

// Threads inside a guarded unwind: their tid and where a fault returns to. A table,
// not a thread_local: thread-local storage of a library loaded by dlopen may be
// allocated at first use, which a signal handler must not do.
struct FaultGuard {
    std::atomic<std::int64_t> tid{0};
    sigjmp_buf* resume = nullptr;
};
constexpr int kFaultGuards = 64;
FaultGuard g_fault_guards[kFaultGuards];
struct sigaction g_previous_segv {
}, g_previous_bus{};
std::atomic<bool> g_fault_handler_installed{false};

void on_fault(int signal, siginfo_t* info, void* context) {
    const std::int64_t tid = os::thread_id();
    for (FaultGuard& guard : g_fault_guards)
        if (guard.tid.load(std::memory_order_acquire) == tid) siglongjmp(*guard.resume, 1);
    // Not a guarded unwind: the fault belongs to whoever handled it before us.
    const struct sigaction& previous = signal == SIGBUS ? g_previous_bus : g_previous_segv;
    if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
        previous.sa_sigaction(signal, info, context);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
        previous.sa_handler(signal);
        return;
    }
    // The default action: restored, and the faulting instruction runs again and faults.
    sigaction(signal, &previous, nullptr);
}

void install_fault_handler() {
    if (g_fault_handler_installed.exchange(true)) return;
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
}

// Puts the handlers before ours back, unless someone replaced ours since.
void remove_fault_handler() {
    if (!g_fault_handler_installed.exchange(false)) return;
    for (auto [signal, previous] : {std::pair{SIGSEGV, &g_previous_segv}, std::pair{SIGBUS, &g_previous_bus}}) {
        struct sigaction current {};
        if (sigaction(signal, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) != 0 &&
            current.sa_sigaction == on_fault)
            sigaction(signal, previous, nullptr);
    }
}

// A guard slot for this thread (tid -1: held, not armed), or nullptr when all are taken.
FaultGuard* acquire_fault_guard() {
    for (FaultGuard& slot : g_fault_guards) {
        std::int64_t free_slot = 0;
        if (slot.tid.compare_exchange_strong(free_slot, -1, std::memory_order_acq_rel)) return &slot;
    }
    return nullptr;
}

// The executable segments of the loaded modules, published again when a library was
// loaded or unloaded since the last map (dl_iterate_phdr's adds/subs counters).
void refresh_code_map() {
    std::lock_guard lock(g_code_maps_mutex);
    // The counters come with the first module: read them alone, and rebuild only when a
    // library came or went (the drain thread asks every 50 ms).
    std::pair<unsigned long long, unsigned long long> counters{0, 0};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            *static_cast<std::pair<unsigned long long, unsigned long long>*>(data) = {info->dlpi_adds, info->dlpi_subs};
            return 1;  // stop after the first
        },
        &counters);
    const CodeMap* current = g_code_map.load(std::memory_order_acquire);
    if (current && current->adds == counters.first && current->subs == counters.second) return;
    auto map = std::make_unique<CodeMap>();
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto& out = *static_cast<CodeMap*>(data);
            out.adds = info->dlpi_adds;
            out.subs = info->dlpi_subs;
            for (int index = 0; index < info->dlpi_phnum; ++index) {
                const ElfW(Phdr)& header = info->dlpi_phdr[index];
                if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
                const std::uintptr_t begin = info->dlpi_addr + header.p_vaddr;
                out.ranges.push_back({begin, begin + header.p_memsz});
            }
            return 0;
        },
        map.get());
    std::sort(map->ranges.begin(), map->ranges.end(),
              [](const CodeRange& left, const CodeRange& right) { return left.begin < right.begin; });
    g_code_map.store(map.get(), std::memory_order_release);
    g_code_maps.push_back(std::move(map));
}

bool in_module_code(const CodeMap& map, std::uintptr_t address) {
    auto after = std::upper_bound(map.ranges.begin(), map.ranges.end(), address,
                                  [](std::uintptr_t value, const CodeRange& range) { return value < range.begin; });
    return after != map.ranges.begin() && address < std::prev(after)->end;
}

// Whether the instruction that ends at `address` is an indirect call (FF /2 in any of
// its addressing forms): how compiled code enters a JIT kernel.
// Reads the code directly: the caller holds the fault guard.
bool follows_an_indirect_call(std::uintptr_t address) {
    unsigned char code[7];
    std::memcpy(code, reinterpret_cast<const void*>(address - sizeof code), sizeof code);
    auto call_form = [&code](int at, int length) {
        // The opcode at code[at], ModRM after it, `length` bytes in all up to `address`.
        if (code[at] != 0xFF || at + length != static_cast<int>(sizeof code)) return false;
        const unsigned char modrm = code[at + 1];
        if ((modrm & 0x38) != 0x10) return false;
        const int mod = modrm >> 6, rm = modrm & 7;
        switch (length) {
            case 2:
                return mod == 3 || (mod == 0 && rm != 4 && rm != 5);  // call reg / call [reg]
            case 3:
                return (mod == 0 && rm == 4) || (mod == 1 && rm != 4);  // [sib] / [reg+disp8]
            case 4:
                return mod == 1 && rm == 4;  // [sib+disp8]
            case 6:
                return (mod == 2 && rm != 4) || (mod == 0 && rm == 5);  // [reg+disp32] / [rip+disp32]
            case 7:
                return mod == 2 && rm == 4;  // [sib+disp32]
            default:
                return false;
        }
    };
    return call_form(5, 2) || call_form(4, 3) || call_form(3, 4) || call_form(1, 6) || call_form(0, 7);
}

#if defined(__x86_64__)
// One candidate return address `word` at stack `slot`: points the interrupted context
// at it and unwinds, first a few frames (most stray words stop there), then, when those
// go on, the whole stack. Runs under the thread's fault guard: returns -1 when the word
// is no return address after an indirect call, or the unwind faulted. The caller puts
// the context's registers back.
__attribute__((noinline)) int unwind_from_candidate(FaultGuard& guard, std::int64_t tid, greg_t* registers,
                                                    std::uintptr_t word, std::uintptr_t slot, void** again) {
    constexpr int kQuickFrames = 8;
    sigjmp_buf resume;
    guard.resume = &resume;
    if (sigsetjmp(resume, 1) != 0) {  // a fault inside: back here, disarmed below
        guard.tid.store(-1, std::memory_order_release);
        return -1;
    }
    guard.tid.store(tid, std::memory_order_release);  // armed
    int found = -1;
    if (follows_an_indirect_call(word)) {
        // The caller's rbp: JIT kernels save it in their prologue, oneDNN's right below
        // rbx below the return address (push rbx; push rbp). Taken only when it points
        // into the stack above the slot; else the zeroed frame.
        std::uintptr_t frame_pointer = reinterpret_cast<std::uintptr_t>(&g_zero_frame[2]);
        std::uintptr_t saved[2], probe[2];
        if (read_memory(slot - sizeof saved, saved, sizeof saved) && saved[0] > slot &&
            saved[0] - slot < (std::uintptr_t{1} << 20) && read_memory(saved[0], probe, sizeof probe))
            frame_pointer = saved[0];
        registers[REG_RIP] = static_cast<greg_t>(word);
        registers[REG_RSP] = static_cast<greg_t>(slot + sizeof(std::uintptr_t));
        registers[REG_RBP] = static_cast<greg_t>(frame_pointer);
        // The handler's frames, the trampoline, the caller, its callers.
        found = backtrace(again, kQuickFrames);
        if (found == kQuickFrames) found = backtrace(again, kMaxFrames);
    }
    guard.tid.store(-1, std::memory_order_release);
    return found;
}
#endif

// `frames` holds a backtrace that stopped at the interrupted instruction (depth
// skip + 1, frames[skip] the interrupted instruction). Returns the depth of a stack
// recovered past it, or `depth`.
int unwind_past_jit_code(void* raw_context, void** frames, int depth, int skip) {
#if defined(__x86_64__)
    if (depth != skip + 1 || skip < 1 || raw_context == nullptr || !g_recover_jit.load(std::memory_order_relaxed))
        return depth;
    const CodeMap* map = g_code_map.load(std::memory_order_acquire);
    void* const interrupted = frames[skip];
    if (map == nullptr || in_module_code(*map, reinterpret_cast<std::uintptr_t>(interrupted))) return depth;
    // The signal trampoline's frame: the frames after it in a second backtrace are the
    // interrupted code's (however many frames the handler itself takes).
    void* const trampoline = frames[skip - 1];
    auto* context = static_cast<ucontext_t*>(raw_context);
    greg_t* registers = context->uc_mcontext.gregs;
    const greg_t saved_rip = registers[REG_RIP], saved_rsp = registers[REG_RSP], saved_rbp = registers[REG_RBP];
    // The first word up the stack that points right after an indirect call in a loaded
    // module, and from which the stack unwinds at least a few frames, is taken for the
    // return address into the JIT code's caller. A kernel keeps its working values in
    // its own frame, so that word is normally the true one. Where a kernel leaves part
    // of its frame unwritten, a stale return address of an earlier call can be found
    // first; the unwind from it gives a few false frames and then rejoins the true stack
    // at a caller the two share. Nothing on the stack tells the two apart (the longest
    // stack is no better a guide: stale words in the callers' frames above give longer
    // ones). A kernel that moves rsp onto a stack of its own, as oneDNN's f32 GEMM
    // kernel does for its packing buffer, has no return address above rsp at all: its
    // samples keep the one frame, or take a stale one.
    constexpr int kPageWords = 512, kPages = 48;  // up to 192 KiB of the stack, a page per read
    constexpr int kCandidates = 64;
    FaultGuard* guard = acquire_fault_guard();
    if (guard == nullptr) return depth;
    const std::int64_t tid = os::thread_id();
    std::uintptr_t words[kPageWords];
    void* again[kMaxFrames];
    int found_count = 0, candidates = 0;
    for (int page = 0; page < kPages && candidates < kCandidates && found_count == 0; ++page) {
        const std::uintptr_t base = static_cast<std::uintptr_t>(saved_rsp) + page * sizeof words;
        if (!read_memory(base, words, sizeof words)) break;  // the top of the stack
        for (int index = 0; index < kPageWords && candidates < kCandidates && found_count == 0; ++index) {
            const std::uintptr_t word = words[index];
            if (!in_module_code(*map, word) || !in_module_code(*map, word - 7)) continue;
            ++candidates;
            const int found =
                unwind_from_candidate(*guard, tid, registers, word, base + index * sizeof(std::uintptr_t), again);
            registers[REG_RIP] = saved_rip;
            registers[REG_RSP] = saved_rsp;
            registers[REG_RBP] = saved_rbp;
            int caller = 0;
            while (caller < found && again[caller] != trampoline) ++caller;
            ++caller;
            // The caller and at least two frames above it: a stack, not a stray word.
            if (found - caller >= 3) {
                found_count = std::min(found - caller, kMaxFrames - (skip + 1));
                std::memcpy(frames + skip + 1, again + caller, found_count * sizeof(void*));
            }
        }
    }
    guard->tid.store(0, std::memory_order_release);
    if (found_count > 0) return skip + 1 + found_count;
#else
    (void)raw_context;
    (void)frames;
    (void)skip;
#endif
    return depth;
}

void on_profiling_signal(int, siginfo_t*, void* context) {
    if (!g_sampling.load(std::memory_order_relaxed)) return;
    int saved_errno = errno;
    Slot& slot = g_slots[g_next_slot.fetch_add(1, std::memory_order_relaxed) % kSlots];
    int expected = empty;
    if (!slot.state.compare_exchange_strong(expected, writing, std::memory_order_acquire)) {
        g_dropped.fetch_add(1, std::memory_order_relaxed);
        errno = saved_errno;
        return;
    }
    slot.time_ns = now_ns();
    slot.tid = os::thread_id();  // a raw syscall: async-signal-safe
    const int depth = backtrace(slot.frames, kMaxFrames);
    slot.skip = kHandlerFrames;
#if defined(__x86_64__)
    if (context != nullptr) {
        void* const interrupted =
            reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
        for (int index = 0; index < depth; ++index)
            if (slot.frames[index] == interrupted) {
                slot.skip = index;
                break;
            }
    }
#endif
    slot.depth = unwind_past_jit_code(context, slot.frames, depth, slot.skip);
    slot.state.store(full, std::memory_order_release);
    errno = saved_errno;
}

std::string hex_address(std::uintptr_t address) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%zx", static_cast<std::size_t>(address));
    return text;
}

}  // namespace

CpuSampler::CpuSampler()
    : symbols_(std::make_unique<ElfSymbolizer>()),
      jit_names_(std::make_unique<PerfMap>(PerfMap::path_for_this_process())) {}

CpuSampler::~CpuSampler() {
    stop();
}

bool CpuSampler::start(Session& session, double hz) {
    // The first backtrace() loads libgcc's unwinder (it allocates): do it here,
    // not inside the signal handler.
    void* warm_up[4];
    backtrace(warm_up, 4);
    // Unwinding past JIT code reads the stack with process_vm_readv; where the
    // system refuses it (a seccomp filter), samples in JIT code keep their one frame.
    g_pid = getpid();
    refresh_code_map();
    std::uintptr_t probe = 0;
    const std::uintptr_t source = 42;
    const bool can_read = read_memory(reinterpret_cast<std::uintptr_t>(&source), &probe, sizeof probe) && probe == 42;
    if (can_read)
        install_fault_handler();
    else
        session.say(
            "CPU samples in JIT-generated code keep their one frame: process_vm_readv is refused here "
            "(a seccomp filter?)");
    g_recover_jit.store(can_read);

    struct sigaction action {};
    action.sa_sigaction = on_profiling_signal;
    // SA_ONSTACK: on threads that have an alternate signal stack (the engine gives one
    // to every thread that runs oneDNN's JIT kernels, whose data a signal frame on
    // their own stack would overwrite) the handler runs there.
    action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGPROF, &action, &previous_) != 0) {
        session.say("CPU sampling disabled: sigaction(SIGPROF) failed");
        return false;
    }
    sigevent event{};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGPROF;
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &event, &timer_) != 0) {
        session.say("CPU sampling disabled: timer_create(CLOCK_PROCESS_CPUTIME_ID) failed");
        sigaction(SIGPROF, &previous_, nullptr);
        return false;
    }
    timer_created_ = true;
    auto period_ns = static_cast<std::int64_t>(1e9 / hz);
    itimerspec interval{};
    interval.it_interval.tv_sec = period_ns / 1000000000;
    interval.it_interval.tv_nsec = period_ns % 1000000000;
    interval.it_value = interval.it_interval;
    g_sampling.store(true);
    timer_settime(timer_, 0, &interval, nullptr);
    // Each sample stands for one period of the process's CPU time: readers turn sample
    // counts into CPU seconds with it.
    session.writer().set_metadata(store::metadata_key::cpu_sample_period_ns, std::to_string(period_ns));
    thread_ = std::thread([this, &session] {
        // The drain thread's own CPU would be sampled too; keep it out of the timer's way.
        sigset_t blocked;
        sigemptyset(&blocked);
        sigaddset(&blocked, SIGPROF);
        pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
        std::unique_lock lock(mutex_);
        while (!stop_requested_) {
            wake_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_requested_; });
            lock.unlock();
            drain(session);
            lock.lock();
        }
        lock.unlock();
        drain(session);
    });
    return true;
}

void CpuSampler::drain(Session& session) {
    refresh_code_map();  // libraries loaded since (CUDA, cuDNN, plugins)
    store::TraceWriter& writer = session.writer();
    std::vector<trace::FrameId> stack;
    for (Slot& slot : g_slots) {
        if (slot.state.load(std::memory_order_acquire) != full) continue;
        stack.clear();
        // Innermost first in the slot; the stack tree wants outermost first.
        for (int index = slot.depth - 1; index >= slot.skip; --index) {
            auto address = reinterpret_cast<std::uintptr_t>(slot.frames[index]);
            auto known = frames_.find(address);
            if (known != frames_.end()) {
                stack.push_back(known->second);
                continue;
            }
            // Return addresses point after the call; look up the call itself.
            std::uintptr_t lookup = index == slot.skip ? address : address - 1;
            ResolvedFrame resolved = symbols_->resolve(lookup);
            std::string function = std::move(resolved.function);
            std::string module = std::move(resolved.module);
            if (function.empty()) {
                // Not in a mapped ELF file's tables (the vDSO, or a file that went away).
                Dl_info info{};
                if (dladdr(reinterpret_cast<void*>(lookup), &info) != 0) {
                    if (module.empty() && info.dli_fname) module = info.dli_fname;
                    if (info.dli_sname) function = demangle(info.dli_sname);
                }
            }
            // In no file: code generated at run time, named by the JIT's perf map if any.
            if (function.empty() && module.empty()) function = jit_names_->find(lookup);
            if (function.empty()) function = hex_address(address);
            trace::FrameId frame = writer.intern_frame(function, module, address);
            frames_.emplace(address, frame);
            stack.push_back(frame);
        }
        trace::StackSample sample;
        sample.time_ns = slot.time_ns;
        sample.thread_id = session.thread_for_tid(slot.tid);
        sample.stack_id = writer.intern_stack(stack);
        std::int64_t time = slot.time_ns;
        slot.state.store(empty, std::memory_order_release);
        if (session.captured_at(time) && writer.record_stack_sample(sample)) ++samples_written_;
    }
    std::uint64_t dropped = g_dropped.exchange(0);
    if (dropped > 0) writer.record_dropped({now_ns(), writer.intern("cpu sampler slots full"), 0, dropped});
}

void CpuSampler::stop() {
    if (!timer_created_) return;
    g_sampling.store(false);
    timer_delete(timer_);
    timer_created_ = false;
    {
        std::lock_guard lock(mutex_);
        stop_requested_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    sigaction(SIGPROF, &previous_, nullptr);
    g_recover_jit.store(false);
    remove_fault_handler();
}

}  // namespace ember::collector

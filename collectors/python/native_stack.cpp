// native_stack.cpp: threads stopped from outside, unwound with libdw, merged with their
// Python frames (native_stack.h).
#include "collectors/python/native_stack.h"

#include "collectors/elf_symbols.h"
#include "collectors/perf_map.h"
#include "common/os.h"

#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unordered_map>

namespace ember::collector::python {

bool is_eval_frame(std::string_view function) {
    constexpr std::string_view kEval = "_PyEval_EvalFrameDefault";
    return function.substr(0, kEval.size()) == kEval &&
           (function.size() == kEval.size() || function[kEval.size()] == '.');
}

namespace {

MixedFrame from_python(const PythonFrame& frame) {
    return {frame.function, frame.file, std::max(frame.line, 0), 0};
}

}  // namespace

std::vector<MixedFrame> python_only(const std::vector<PythonFrame>& python) {
    std::vector<MixedFrame> frames;
    frames.reserve(python.size());
    for (const PythonFrame& frame : python) frames.push_back(from_python(frame));
    return frames;
}

std::vector<MixedFrame> merge_stacks(const std::vector<PythonFrame>& python, const std::vector<NativeFrame>& native) {
    std::vector<MixedFrame> merged;
    merged.reserve(python.size() + native.size());
    std::size_t next = 0;
    auto take_group = [&] {
        while (next < python.size()) {
            const PythonFrame& frame = python[next++];
            merged.push_back(from_python(frame));
            if (frame.entry) break;
        }
    };
    for (const NativeFrame& frame : native) {
        if (is_eval_frame(frame.function)) {
            take_group();
            continue;
        }
        merged.push_back({frame.function, frame.module, -1, frame.address});
    }
    while (next < python.size()) take_group();
    return merged;
}

// --- ThreadStop ---

namespace {

void pause_microseconds(long microseconds) {
    timespec pause{0, microseconds * 1000};
    nanosleep(&pause, nullptr);
}

}  // namespace

ThreadStop::ThreadStop(pid_t pid, std::chrono::milliseconds wait) : pid_(pid) {
    int refusal = 0;
    for (pid_t tid : process_threads(pid)) {
        if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
            if (errno != ESRCH) refusal = errno;
            continue;
        }
        seized_.push_back({tid});
        if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) seized_.back().gone = errno == ESRCH;
    }
    if (seized_.empty()) {
        error_ = refusal ? "cannot stop its threads to unwind them (ptrace: " + std::string(std::strerror(refusal)) +
                               "): " + refusal_reason(pid, refusal)
                         : "cannot stop its threads to unwind them: no thread left (exited)";
        return;
    }
    const std::int64_t deadline = os::monotonic_ns() + std::chrono::nanoseconds(wait).count();
    for (;;) {
        bool waiting = false;
        for (Seized& thread : seized_)
            if (!thread.stopped && !thread.gone && !poll(thread)) waiting = true;
        if (!waiting || os::monotonic_ns() >= deadline) break;
        pause_microseconds(20);
    }
    for (const Seized& thread : seized_)
        if (thread.stopped) stopped_.push_back(thread.tid);
}

// Whether `thread` is now in a ptrace stop (or gone). Its stop is normally reported to
// us by waitid; when another thread of ember took that report (ember record's wait for
// its child), /proc still shows the thread in tracing stop ('t'). Only stops are asked
// for (WSTOPPED without WEXITED): an exit stays for its parent to reap, which may be
// ember record's own wait for CMD.
bool ThreadStop::poll(Seized& thread) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(thread.tid), &info, WSTOPPED | WNOHANG | __WALL) == 0 &&
        info.si_pid == thread.tid && (info.si_code == CLD_TRAPPED || info.si_code == CLD_STOPPED)) {
        // PTRACE_EVENT_STOP: our interrupt (or a group stop); otherwise a signal on its
        // way to the thread, held by us: delivered when we let go.
        if ((info.si_status >> 8) != PTRACE_EVENT_STOP) thread.signal = info.si_status & 0x7f;
        thread.stopped = true;
        return true;
    }
    const char state = thread_state(pid_, thread.tid);
    if (state == 't') {
        thread.stopped = true;
        return true;
    }
    if (state == '?' || state == 'Z' || state == 'X') {
        thread.gone = true;
        return true;
    }
    return false;
}

bool ThreadStop::stopped(pid_t tid) const {
    return std::find(stopped_.begin(), stopped_.end(), tid) != stopped_.end();
}

std::size_t ThreadStop::stopped_count() const {
    return stopped_.size();
}

ThreadStop::~ThreadStop() {
    // A thread still on its way to the stop (in an uninterruptible system call) cannot
    // be detached before it gets there: wait for it, up to 10 s; past that the kernel
    // lets it go when ember exits.
    const std::int64_t deadline = os::monotonic_ns() + 10'000'000'000ll;
    for (Seized& thread : seized_) {
        while (!thread.stopped && !thread.gone && os::monotonic_ns() < deadline) {
            if (!poll(thread)) pause_microseconds(100);
        }
        if (thread.gone) continue;
        ptrace(PTRACE_DETACH, thread.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(thread.signal)));
    }
}

// --- NativeUnwinder ---

namespace {

// No separate debug files: .eh_frame unwinds, and elf_symbols.h names the frames.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char**) {
    return -1;
}

const Dwfl_Callbacks kCallbacks = {dwfl_linux_proc_find_elf, no_debuginfo, nullptr, nullptr};

constexpr std::size_t kMaxNativeFrames = 512;
constexpr int kMaxScans = 8;                 // stack scans past code without CFI, per unwind
constexpr std::uint64_t kScanBytes = 32768;  // how far up the stack one scan looks
constexpr int kMaxCandidates = 48;           // return addresses tried by one scan

// The functions a thread's stack starts in: the main thread's (_start and glibc's
// __libc_start_main) and another thread's (clone, clone3, start_thread).
bool is_stack_start(std::string_view function) {
    for (std::string_view start : {"_start", "__libc_start_main", "__libc_start_call_main", "clone", "__clone",
                                   "clone3", "__clone3", "__GI___clone3", "__GI___clone", "start_thread"})
        if (function == start) return true;
    return false;
}

std::string hex(std::uint64_t address) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
    return text;
}

}  // namespace

// The thread being unwound: its registers (PTRACE_GETREGS, or a frame found by a stack
// scan), read by libdw through the callbacks below; memory through process_vm_readv.
struct NativeUnwinder::State {
    pid_t pid = 0;
    Dwfl* dwfl = nullptr;
    ProcessMemory memory;
    ElfSymbolizer symbols;
    PerfMap perf_map;
    std::unordered_map<std::uint64_t, NativeFrame> names;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> code;  // executable file mappings, by start
    Dwarf_Word registers[17] = {};  // DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip
    std::vector<std::uint64_t>* addresses = nullptr;
    std::int64_t reported_ns = 0;  // when the maps were last read

    explicit State(pid_t id) : pid(id), memory(id), symbols(id), perf_map("/tmp/perf-" + std::to_string(id) + ".map") {}
    ~State() {
        if (dwfl) dwfl_end(dwfl);
    }
    bool report() {
        reported_ns = os::monotonic_ns();
        dwfl_report_begin(dwfl);
        const int failed = dwfl_linux_proc_report(dwfl, pid);
        dwfl_report_end(dwfl, nullptr, nullptr);
        code.clear();
        os::for_each_maps_line(os::proc_path(pid, "maps"), [&](const os::MapsLine& entry) {
            if (os::is_file_code(entry)) code.emplace_back(entry.start, entry.end);
        });
        std::sort(code.begin(), code.end());
        return failed == 0;
    }
    bool in_code(std::uint64_t address) const {
        auto after = std::upper_bound(code.begin(), code.end(), std::make_pair(address, UINT64_MAX));
        return after != code.begin() && address < std::prev(after)->second;
    }
    // A return address: in a file's code, just after a call instruction (call rel32,
    // call *reg, call *(reg), call *disp8(reg), call *disp32(%rip) / (reg)).
    bool return_address(std::uint64_t address) {
        if (address < 8 || !in_code(address)) return false;
        unsigned char before[7] = {};
        if (!memory.read_cached(address - 7, before, sizeof before)) return false;
        auto call_modrm = [](unsigned char modrm) { return (modrm & 0x38) == 0x10; };
        return before[2] == 0xe8 || (before[5] == 0xff && call_modrm(before[6])) ||
               (before[4] == 0xff && call_modrm(before[5])) || (before[1] == 0xff && call_modrm(before[2])) ||
               (before[0] == 0xff && call_modrm(before[1]));
    }
};

namespace {

using UnwindState = NativeUnwinder::State;

pid_t no_thread_list(Dwfl*, void*, void**) {
    return 0;
}

bool any_thread(Dwfl*, pid_t, void* state, void** thread_argument) {
    *thread_argument = state;
    return true;
}

bool read_word(Dwfl*, Dwarf_Addr address, Dwarf_Word* result, void* state) {
    return static_cast<UnwindState*>(state)->memory.read_cached(address, result, sizeof *result);
}

bool initial_registers(Dwfl_Thread* thread, void* state) {
    auto* unwinding = static_cast<UnwindState*>(state);
    if (!dwfl_thread_state_registers(thread, 0, 17, unwinding->registers)) return false;
    dwfl_thread_state_register_pc(thread, unwinding->registers[16]);
    return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {no_thread_list,    any_thread, read_word,
                                                initial_registers, nullptr,    nullptr};

int collect_frame(Dwfl_Frame* frame, void* state) {
    auto* unwinding = static_cast<UnwindState*>(state);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation) || pc == 0) return DWARF_CB_ABORT;
    unwinding->addresses->push_back(activation ? pc : pc - 1);
    return unwinding->addresses->size() >= kMaxNativeFrames ? DWARF_CB_ABORT : DWARF_CB_OK;
}

}  // namespace

NativeUnwinder::NativeUnwinder(pid_t pid) : state_(std::make_unique<State>(pid)) {
#if !defined(__x86_64__)
    throw PythonReadError("native stacks are unwound on x86-64 only");
#endif
    state_->dwfl = dwfl_begin(&kCallbacks);
    if (!state_->dwfl) throw PythonReadError(std::string("libdw: ") + dwfl_errmsg(-1));
    if (!state_->report())
        throw PythonReadError("process " + std::to_string(pid) + ": cannot read its mapped files (/proc/" +
                              std::to_string(pid) + "/maps)");
    if (!dwfl_attach_state(state_->dwfl, nullptr, pid, &kThreadCallbacks, state_.get()))
        throw PythonReadError("process " + std::to_string(pid) +
                              ": cannot unwind its native stacks (libdw: " + std::string(dwfl_errmsg(-1)) + ")");
}

NativeUnwinder::~NativeUnwinder() = default;

bool NativeUnwinder::unwind_addresses(pid_t tid, std::vector<std::uint64_t>& addresses, std::string& error) {
    addresses.clear();
    State& state = *state_;
#if defined(__x86_64__)
    user_regs_struct registers{};
    if (ptrace(PTRACE_GETREGS, tid, nullptr, &registers) != 0) {
        error = "thread " + std::to_string(tid) + ": cannot read its registers (" + std::strerror(errno) + ")";
        return false;
    }
    const std::uint64_t initial[17] = {registers.rax, registers.rdx, registers.rcx, registers.rbx, registers.rsi,
                                       registers.rdi, registers.rbp, registers.rsp, registers.r8,  registers.r9,
                                       registers.r10, registers.r11, registers.r12, registers.r13, registers.r14,
                                       registers.r15, registers.rip};
    std::copy(std::begin(initial), std::end(initial), std::begin(state.registers));
    state.memory.forget_pages();
    // One run of libdw from state.registers: 0 when it reached the outermost frame (the
    // CFI of _start or clone ends the stack), -1 where it could not go on.
    auto segment = [&](std::vector<std::uint64_t>& frames) {
        frames.clear();
        state.addresses = &frames;
        const int result = dwfl_getthread_frames(state.dwfl, tid, collect_frame, &state);
        state.addresses = nullptr;
        return result;
    };
    int result = segment(addresses);
    // A library loaded since the maps were read: its frames end the unwind. The maps
    // are read again (at most once a second: JIT code is in no file either) and the
    // unwind starts over.
    if (result != 0 && !addresses.empty() && !dwfl_addrmodule(state.dwfl, addresses.back()) &&
        os::monotonic_ns() - state.reported_ns > 1'000'000'000 && state.report()) {
        state.names.clear();
        result = segment(addresses);
    }
    // libdw stops where code has no CFI: OpenBLAS's assembly kernels, oneDNN's JIT
    // kernels. From there the stack is scanned for the return address into the code
    // that called it: each word that points just after a call instruction in a file's
    // code is tried as a frame (stack pointer just above it), and the first whose
    // unwind reaches the outermost frame is taken; stale return addresses left in
    // dead stack memory seldom lead there. With none, the one that unwinds furthest.
    std::vector<std::uint64_t> tried, best;
    for (int scan = 0; scan < kMaxScans && result != 0 && addresses.size() < kMaxNativeFrames; ++scan) {
        // From the stack pointer the last segment started at, past the slot of the last
        // return address unwound from it.
        std::uint64_t slot = state.registers[7];
        const std::uint64_t limit = slot + kScanBytes;
        const std::uint64_t start_pc = state.registers[16];
        if (!addresses.empty() && addresses.back() != start_pc) {
            bool found = false;
            for (std::uint64_t at = slot, word = 0; at < limit && state.memory.read_cached(at, &word, 8); at += 8) {
                if (word == addresses.back() + 1) {
                    slot = at + 8;
                    found = true;
                    break;
                }
            }
            if (!found) break;
        }
        const Dwarf_Word saved[2] = {state.registers[7], state.registers[16]};
        Dwarf_Word best_registers[2] = {0, 0};
        int best_result = -1;
        best.clear();
        int candidates = 0;
        for (std::uint64_t at = slot, word = 0;
             at < limit && candidates < kMaxCandidates && state.memory.read_cached(at, &word, 8); at += 8) {
            if (!state.return_address(word)) continue;
            ++candidates;
            state.registers[7] = at + 8;     // the caller's stack pointer once the call returned
            state.registers[16] = word - 1;  // inside the call instruction: the caller's CFI row
            const int outcome = segment(tried);
            const bool whole = outcome == 0 && !tried.empty() && is_stack_start(name(tried.back()).function);
            if (whole || (best_result != 0 && tried.size() > best.size())) {
                best.swap(tried);
                best_result = whole ? 0 : -1;
                best_registers[0] = state.registers[7];
                best_registers[1] = state.registers[16];
                if (whole) break;
            }
        }
        if (best.empty()) {
            state.registers[7] = saved[0];
            state.registers[16] = saved[1];
            break;
        }
        state.registers[7] = best_registers[0];
        state.registers[16] = best_registers[1];
        const std::size_t room = kMaxNativeFrames - addresses.size();
        addresses.insert(addresses.end(), best.begin(),
                         best.begin() + static_cast<std::ptrdiff_t>(std::min(room, best.size())));
        result = best_result;
    }
    if (addresses.empty()) {
        error = "thread " + std::to_string(tid) + ": " + dwfl_errmsg(-1);
        return false;
    }
    return true;
#else
    error = "native stacks are unwound on x86-64 only";
    return false;
#endif
}

NativeFrame NativeUnwinder::name(std::uint64_t address) {
    auto known = state_->names.find(address);
    if (known != state_->names.end()) return known->second;
    ResolvedFrame resolved = state_->symbols.resolve(address);
    NativeFrame frame{address, std::move(resolved.function), std::move(resolved.module)};
    if (frame.function.empty() && frame.module.empty()) frame.function = state_->perf_map.find(address);
    if (frame.function.empty()) frame.function = hex(address);
    state_->names.emplace(address, frame);
    return frame;
}

bool NativeUnwinder::unwind(pid_t tid, std::vector<NativeFrame>& frames, std::string& error) {
    std::vector<std::uint64_t> addresses;
    frames.clear();
    if (!unwind_addresses(tid, addresses, error)) return false;
    for (std::uint64_t address : addresses) frames.push_back(name(address));
    return true;
}

bool mixed_snapshot(PythonProcess& process, NativeUnwinder& unwinder, std::vector<MixedThread>& threads,
                    std::string& error) {
    threads.clear();
    std::vector<PythonThread> python;
    std::map<pid_t, std::vector<std::uint64_t>> native;
    {
        ThreadStop stop(process.pid());
        if (stop.stopped_count() == 0) {
            error = stop.error().empty() ? "no thread of process " + std::to_string(process.pid()) + " could be stopped"
                                         : stop.error();
            return false;
        }
        if (!process.snapshot(python, error)) return false;
        std::string ignored;  // a thread that cannot be unwound keeps its Python frames
        for (pid_t tid : stop.stopped_threads()) unwinder.unwind_addresses(tid, native[tid], ignored);
    }  // the threads run again here
    std::vector<NativeFrame> frames;
    auto named = [&](pid_t tid) -> const std::vector<NativeFrame>& {
        frames.clear();
        if (auto found = native.find(tid); found != native.end())
            for (std::uint64_t address : found->second) frames.push_back(unwinder.name(address));
        return frames;
    };
    for (const PythonThread& thread : python) {
        if (thread.tid == 0) continue;  // not told apart: left out, as without --native
        MixedThread mixed{thread.tid, thread.thread_id, true, merge_stacks(thread.frames, named(thread.tid)),
                          thread.name};
        native.erase(thread.tid);
        threads.push_back(std::move(mixed));
    }
    for (const auto& [tid, addresses] : native) {
        if (addresses.empty()) continue;
        threads.push_back({tid, 0, false, merge_stacks({}, named(tid))});
    }
    return true;
}

}  // namespace ember::collector::python

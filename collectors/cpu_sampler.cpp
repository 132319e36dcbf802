// cpu_sampler.cpp: SIGPROF stack sampling (see cpu_sampler.h).
#include "collectors/cpu_sampler.h"
#include "common/os.h"

#include "collectors/clock.h"
#include "collectors/cupti_records.h"
#include "collectors/elf_symbols.h"
#include "collectors/session.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace ember::collector {

namespace {

constexpr int kMaxFrames = 64;
constexpr int kSlots = 4096;
// backtrace() inside the handler sees the handler and the signal trampoline first.
constexpr int kHandlerFrames = 2;

enum SlotState : int { empty = 0, writing = 1, full = 2 };

struct Slot {
    std::atomic<int> state{empty};
    std::int64_t time_ns = 0;
    std::int64_t tid = 0;
    int depth = 0;
    void* frames[kMaxFrames];
};

Slot g_slots[kSlots];
std::atomic<std::uint32_t> g_next_slot{0};
std::atomic<std::uint64_t> g_dropped{0};
std::atomic<bool> g_sampling{false};

void on_profiling_signal(int, siginfo_t*, void*) {
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
    slot.depth = backtrace(slot.frames, kMaxFrames);
    slot.state.store(full, std::memory_order_release);
    errno = saved_errno;
}

std::string hex_address(std::uintptr_t address) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%zx", static_cast<std::size_t>(address));
    return text;
}

}  // namespace

CpuSampler::CpuSampler() : symbols_(std::make_unique<ElfSymbolizer>()) {}

CpuSampler::~CpuSampler() { stop(); }

bool CpuSampler::start(Session& session, double hz) {
    // The first backtrace() loads libgcc's unwinder (it allocates): do it here,
    // not inside the signal handler.
    void* warm_up[4];
    backtrace(warm_up, 4);

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
    sigevent event {};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGPROF;
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &event, &timer_) != 0) {
        session.say("CPU sampling disabled: timer_create(CLOCK_PROCESS_CPUTIME_ID) failed");
        sigaction(SIGPROF, &previous_, nullptr);
        return false;
    }
    timer_created_ = true;
    auto period_ns = static_cast<std::int64_t>(1e9 / hz);
    itimerspec interval {};
    interval.it_interval.tv_sec = period_ns / 1000000000;
    interval.it_interval.tv_nsec = period_ns % 1000000000;
    interval.it_value = interval.it_interval;
    g_sampling.store(true);
    timer_settime(timer_, 0, &interval, nullptr);
    // Each sample stands for one period of the process's CPU time: readers turn sample
    // counts into CPU seconds with it.
    session.writer().set_metadata("cpu_sample_period_ns", std::to_string(period_ns));
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
    store::TraceWriter& writer = session.writer();
    std::vector<trace::FrameId> stack;
    for (Slot& slot : g_slots) {
        if (slot.state.load(std::memory_order_acquire) != full) continue;
        stack.clear();
        // Innermost first in the slot; the stack tree wants outermost first.
        for (int index = slot.depth - 1; index >= kHandlerFrames; --index) {
            auto address = reinterpret_cast<std::uintptr_t>(slot.frames[index]);
            auto known = frames_.find(address);
            if (known != frames_.end()) {
                stack.push_back(known->second);
                continue;
            }
            // Return addresses point after the call; look up the call itself.
            std::uintptr_t lookup = index == kHandlerFrames ? address : address - 1;
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
}

}  // namespace ember::collector

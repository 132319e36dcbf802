// writer_hooks.cpp: atexit and SIGINT/SIGTERM flushing for trace writers.
#include "profiler/store/writer_hooks.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <pthread.h>
#include <signal.h>

namespace ember::store {

// ---------------------------------------------------------------------------
// [SECTION] exit
// ---------------------------------------------------------------------------

namespace {

struct ExitRegistry {
    std::mutex mutex;
    std::map<void*, std::function<void()>> closers;
    bool atexit_installed = false;
};

// Leaked on purpose: it must outlive every static destructor that may close a writer.
ExitRegistry& exit_registry() {
    static ExitRegistry* registry = new ExitRegistry;
    return *registry;
}

void close_writers_at_exit() {
    ExitRegistry& registry = exit_registry();
    for (;;) {
        std::function<void()> close;
        {
            std::lock_guard lock(registry.mutex);
            if (registry.closers.empty()) return;
            close = registry.closers.begin()->second;
            registry.closers.erase(registry.closers.begin());
        }
        close();  // the writer's close() catches and reports its own errors here
    }
}

}  // namespace

void register_for_exit(void* writer, std::function<void()> close) {
    ExitRegistry& registry = exit_registry();
    std::lock_guard lock(registry.mutex);
    registry.closers[writer] = std::move(close);
    if (!registry.atexit_installed) {
        std::atexit(close_writers_at_exit);
        registry.atexit_installed = true;
    }
}

void unregister_for_exit(void* writer) {
    ExitRegistry& registry = exit_registry();
    std::lock_guard lock(registry.mutex);
    registry.closers.erase(writer);
}

// ---------------------------------------------------------------------------
// [SECTION] SIGINT / SIGTERM
// ---------------------------------------------------------------------------

namespace {

constexpr int kFlushSignals[] = {SIGINT, SIGTERM};
constexpr int kStages = 2;
// How long the handler waits for each stage before letting the signal proceed.
constexpr int kStageTimeoutMs[kStages] = {2000, 5000};

std::mutex g_install_mutex;
int g_installed_participants = 0;  // guarded by g_install_mutex
struct sigaction g_previous_actions[2];

// Read and written from the handler: lock-free atomics only.
std::atomic<int> g_participants[kStages] = {0, 0};
std::atomic<std::uint64_t> g_flush_epoch[kStages] = {0, 0};
std::atomic<int> g_pending[kStages] = {0, 0};

int signal_slot(int signal_number) {
    return signal_number == SIGINT ? 0 : 1;
}
int stage_index(FlushStage stage) {
    return static_cast<int>(stage);
}

void sleep_one_millisecond() {
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);  // async-signal-safe
}

void on_flush_signal(int signal_number, siginfo_t* info, void* context) {
    int saved_errno = errno;
    for (int stage = 0; stage < kStages; ++stage) {
        const int participants = g_participants[stage].load();
        if (participants <= 0) continue;
        g_pending[stage].store(participants);
        g_flush_epoch[stage].fetch_add(1);
        for (int waited = 0; waited < kStageTimeoutMs[stage] && g_pending[stage].load() > 0; ++waited)
            sleep_one_millisecond();
    }
    const struct sigaction& previous = g_previous_actions[signal_slot(signal_number)];
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) previous.sa_sigaction(signal_number, info, context);
    } else if (previous.sa_handler == SIG_DFL) {
        // Do what the signal would have done: the default action (terminate) once
        // this handler returns and the signal is unblocked.
        sigaction(signal_number, &previous, nullptr);
        raise(signal_number);
    } else if (previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
        previous.sa_handler(signal_number);
    }
    errno = saved_errno;
}

}  // namespace

void add_signal_flush_participant(FlushStage stage) {
    std::lock_guard lock(g_install_mutex);
    if (g_installed_participants++ == 0) {
        struct sigaction action {};
        action.sa_sigaction = on_flush_signal;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&action.sa_mask);
        for (int signal_number : kFlushSignals)
            sigaction(signal_number, &action, &g_previous_actions[signal_slot(signal_number)]);
    }
    g_participants[stage_index(stage)].fetch_add(1);
}

void remove_signal_flush_participant(FlushStage stage) {
    std::lock_guard lock(g_install_mutex);
    g_participants[stage_index(stage)].fetch_sub(1);
    if (--g_installed_participants == 0) {
        for (int signal_number : kFlushSignals) {
            struct sigaction current {};
            sigaction(signal_number, nullptr, &current);
            // Put the old handler back only if ours is still the one installed.
            if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_flush_signal)
                sigaction(signal_number, &g_previous_actions[signal_slot(signal_number)], nullptr);
        }
    }
}

std::uint64_t signal_flush_epoch(FlushStage stage) {
    return g_flush_epoch[stage_index(stage)].load(std::memory_order_acquire);
}

void acknowledge_signal_flush(FlushStage stage) {
    g_pending[stage_index(stage)].fetch_sub(1);
}

// ---------------------------------------------------------------------------
// [SECTION] fork
// ---------------------------------------------------------------------------

namespace {

std::atomic<std::uint64_t> g_fork_generation{0};

void in_forked_child() {
    g_fork_generation.fetch_add(1);
    // No participant thread of the parent runs here: the signal handler must not wait for them.
    for (int stage = 0; stage < kStages; ++stage) {
        g_participants[stage].store(0);
        g_pending[stage].store(0);
    }
}

}  // namespace

std::uint64_t fork_generation() {
    return g_fork_generation.load(std::memory_order_relaxed);
}

void install_fork_handler() {
    static std::once_flag installed;
    std::call_once(installed, [] { pthread_atfork(nullptr, nullptr, in_forked_child); });
}

void block_flush_signals_in_this_thread() {
    sigset_t signals;
    sigemptyset(&signals);
    for (int signal_number : kFlushSignals) sigaddset(&signals, signal_number);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

}  // namespace ember::store

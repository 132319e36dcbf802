// cpu_sampler.h: CPU stack sampling of the recorded process, the native
// equivalent of py-spy's flamegraph. A CPU-time timer (timer_create on
// CLOCK_PROCESS_CPUTIME_ID) sends SIGPROF to whichever thread is running; the
// handler only copies the call stack (backtrace) into a lock-free slot table.
// A drain thread symbolizes (ElfSymbolizer: the .symtab/.dynsym of the file mapped
// at each address, so static functions of an executable without -rdynamic are named
// too; demangled; code generated at run time by the process's perf map, when its JIT
// writes one), interns frames and stacks and writes stack samples.
// Busy threads are sampled in proportion to the CPU they use.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <signal.h>

namespace ember::collector {

class Session;
class ElfSymbolizer;
class PerfMap;

class CpuSampler {
  public:
    CpuSampler();
    ~CpuSampler();
    bool start(Session& session, double hz);
    void stop();
    std::uint64_t samples_written() const { return samples_written_; }

  private:
    void drain(Session& session);
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_requested_ = false;
    bool timer_created_ = false;
    timer_t timer_{};
    struct sigaction previous_ {};
    std::unique_ptr<ElfSymbolizer> symbols_;                    // used by the drain thread only
    std::unique_ptr<PerfMap> jit_names_;                        // /tmp/perf-PID.map: names of JIT code (drain thread)
    std::unordered_map<std::uintptr_t, std::uint32_t> frames_;  // address -> FrameId
    std::uint64_t samples_written_ = 0;
};

}  // namespace ember::collector

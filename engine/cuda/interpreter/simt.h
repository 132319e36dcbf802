// simt.h: the kernel interpreter's execution state, shared by its own .cpp files (not by
// kernels or tests): a launch, the block a worker is running, the block's simulated
// threads and warps, and the shadow state of its shared memory.
//
// A block runs on one worker thread. Each simulated thread is a fiber with its own
// stack; a fiber runs until it finishes or waits (at __syncthreads, or at a warp
// intrinsic whose lanes have not all arrived), then switches straight to the next
// ready fiber, first in first out; the worker's own context gets control back only
// when none is ready (the block is done, or stuck). Only one fiber of a worker runs at
// a time, so a block's state needs no locks; blocks of one launch run on several
// workers at once.
#pragma once

#include <boost/context/fiber.hpp>

#include "engine/cuda/interpreter/device_api.h"
#include "engine/cuda/interpreter/interpreter.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <source_location>
#include <string>
#include <vector>

namespace ember::cuda_interpreter::detail {

constexpr int kWarpSize = 32;
constexpr std::size_t kSharedLimitBytes = 48 * 1024;  // per block without an opt-in attribute
constexpr std::size_t kSharedArenaBytes = 64 * 1024;  // the limit, redzones and alignment
constexpr std::size_t kSharedRedzoneBytes = 32;       // unowned bytes after each variable

// ---- device memory (cuda_runtime.cpp keeps the registry) --------------------------------
struct MemoryBlock {
    uintptr_t base = 0;
    std::size_t bytes = 0;
    const char* origin = "";  // "cudaMalloc", "cudaHostAlloc", ...
};
using MemoryMap = std::vector<MemoryBlock>;  // sorted by base
// The live blocks, as an immutable snapshot (a launch keeps the one it started with).
std::shared_ptr<const MemoryMap> memory_snapshot();
// "12 bytes past the end of the 4000-byte cudaMalloc block at 0x...", "freed", ...
std::string describe_address(const MemoryMap& memory, uintptr_t address, std::size_t bytes);

// ---- a launch ------------------------------------------------------------------------------
struct Launch {
    uint64_t id = 0;  // unique per launch in the process
    LaunchRequest request;
    uint64_t block_count = 0;
    std::atomic<uint64_t> next_block{0};
    std::atomic<bool> stopped{false};  // an out-of-bounds access or a deadlock: start no more blocks
    std::shared_ptr<const MemoryMap> memory;
    uintptr_t arguments_base = 0;
    uintptr_t static_image_begin = 0;  // the executable's code and static data
    uintptr_t static_image_end = 0;

    // Findings of this launch (findings.cpp).
    std::mutex findings_mutex;
    std::set<std::string> finding_keys;
    int finding_count = 0;
    int printed = 0;
    bool out_of_bounds = false;
    std::string first_finding;
};

enum class ThreadState : uint8_t { runnable, at_barrier, at_warp, finished, faulted };

struct Block;

struct SimThread {
    uint3 index{};
    int linear = 0;
    int warp = 0;
    int lane = 0;
    ThreadState state = ThreadState::runnable;
    std::source_location wait_site;  // where it waits (barrier, warp intrinsic)
    boost::context::fiber fiber;     // its continuation while it is not running
    uintptr_t stack_low = 0;         // its fiber stack, which memcheck leaves alone
    std::size_t stack_bytes = 0;
    uint64_t collective_result = 0;
    int barrier_value = 0;
    int barrier_result = 0;
    bool in_runtime = false;  // executing the interpreter's own code: memcheck looks away
    Block* block = nullptr;
};

struct PendingCollective {
    WarpOp op = WarpOp::sync;
    unsigned mask = 0;
    unsigned arrived = 0;
    int width = kWarpSize;
    std::source_location site;
    uint64_t values[kWarpSize] = {};
    int arguments[kWarpSize] = {};
};

struct Warp {
    unsigned lanes = 0;       // lanes that exist (a partial last warp has fewer)
    unsigned exited = 0;      // lanes whose thread has returned
    uint32_t sync_epoch = 0;  // completed collectives: orders the warp's shared accesses
    std::vector<PendingCollective> pending;
};

// What race detection remembers about one byte of shared memory in the current block.
struct ShadowCell {
    static constexpr uint16_t kNone = 0xffff;
    static constexpr uint16_t kMany = 0xfffe;    // several readers
    static constexpr uint16_t kAtomic = 0xfffd;  // written by atomics only: ordered with everyone
    static constexpr uint16_t kMultiWarp = 0xffff;
    int32_t variable = -1;     // owning slot (index into Block::slots); -1 = redzone or free
    uint32_t write_epoch = 0;  // barrier epoch + 1 of the last write; 0 = never written
    uint32_t write_warp_epoch = 0;
    uint16_t writer = kNone;
    uint16_t reader = kNone;            // first reader of read_epoch, or kMany
    uint16_t reader_warp = kMultiWarp;  // with kMany: the readers' warp, or kMultiWarp
    uint32_t read_epoch = 0;
    uint32_t read_warp_epoch = 0;  // latest warp epoch among the readers (one warp)
};

struct SharedSlot {
    int declaration = -1;  // SharedDeclaration id; -1 for the dynamic region
    std::size_t offset = 0;
    std::size_t bytes = 0;
};

struct Block {
    Launch* launch = nullptr;
    uint3 index{};
    dim3 dim;
    int thread_count = 0;
    std::vector<SimThread> threads;
    std::vector<Warp> warps;
    boost::context::fiber scheduler;        // the worker's continuation while a fiber runs
    const void* scheduler_stack = nullptr;  // its stack, for AddressSanitizer's switch annotations
    std::size_t scheduler_stack_bytes = 0;
    std::vector<int> ready;  // runnable threads not running: a ring of thread_count slots
    std::size_t ready_head = 0, ready_size = 0;
    static constexpr int kFromScheduler = -1, kFromFinished = -2;
    int switched_from = kFromScheduler;  // who switched to the fiber now running
    int finished = 0;
    bool aborting = false;  // unwinding: waiting fibers throw KernelAbort when resumed

    // __syncthreads
    int barrier_arrived = 0;
    BarrierKind barrier_kind = BarrierKind::plain;
    std::source_location barrier_site;
    bool barrier_sites_differ = false;
    uint32_t barrier_epoch = 0;

    // shared memory: the arena and its shadow belong to the worker and are reused
    std::byte* arena = nullptr;
    ShadowCell* shadow = nullptr;
    std::size_t arena_used = 0;
    std::vector<SharedSlot> slots;
    std::vector<int32_t> slot_of_declaration;  // declaration id -> slot, -1 = not yet in this block
    bool shared_limit_reported = false;
};

// Thrown into a waiting fiber to unwind it when its block is abandoned.
struct KernelAbort {};

// The simulated thread running on this worker thread, or nullptr outside a kernel.
extern thread_local SimThread* current_thread;

// Marks the interpreter's own code running on a simulated thread (a barrier, a warp
// exchange, a report) so memcheck does not take its accesses for the kernel's: inline
// library functions (std::string, std::vector) may come from a kernel translation unit,
// instrumented, whichever copy the linker kept.
class RuntimeScope {
  public:
    RuntimeScope() : thread_(current_thread) {
        if (thread_) {
            was_ = thread_->in_runtime;
            thread_->in_runtime = true;
        }
    }
    ~RuntimeScope() {
        if (thread_) thread_->in_runtime = was_;
    }
    RuntimeScope(const RuntimeScope&) = delete;
    RuntimeScope& operator=(const RuntimeScope&) = delete;

  private:
    SimThread* thread_;
    bool was_ = false;
};

// ---- scheduler.cpp -----------------------------------------------------------------------
// Switches to the block's scheduler until the thread is runnable again; throws
// KernelAbort if its block is abandoned meanwhile.
void wait(SimThread& thread);
// Switches to the scheduler for good: the thread made an access that must not happen.
[[noreturn]] void abandon(SimThread& thread);
void run_launch(Launch& launch);

// ---- memcheck.cpp ----------------------------------------------------------------------------
void reset_shared_memory(Block& block, std::size_t dynamic_bytes);
void check_atomic_access(void* address, std::size_t bytes);
std::string shared_variable_name(const Block& block, uintptr_t address);

// ---- findings.cpp ------------------------------------------------------------------------------
// Records a finding of `launch` (once per `key` when a key is given); `thread` may be null
// for findings about a whole block.
void report(Launch& launch, FindingKind kind, const uint3& block, const uint3* thread, uintptr_t address,
            const std::string& message, const std::string& key = {});
void count_launch(const LaunchRequest& request);

}  // namespace ember::cuda_interpreter::detail

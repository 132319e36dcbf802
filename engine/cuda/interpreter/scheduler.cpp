// scheduler.cpp: how a launch runs. Workers (the launching thread and a pool of helper
// threads) take blocks from the launch one at a time; a block's threads are fibers on
// pooled stacks. A fiber runs until it finishes or waits, then switches straight to the
// next ready fiber (one switch, not two through the worker). __syncthreads and the warp
// intrinsics are rendezvous among those fibers, and a block in which no fiber is ready
// while some have not finished is a divergence the interpreter reports.
//
// [SECTION] fiber stacks
// [SECTION] workers
// [SECTION] running a block
// [SECTION] launches
// [SECTION] __syncthreads
// [SECTION] warp intrinsics
// [SECTION] thread geometry and settings
#include "engine/cuda/interpreter/simt.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(EMBER_INTERPRETER_UNDER_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

extern "C" char __executable_start;  // the executable's first and last byte of code and
extern "C" char _end;                // static data (linker-provided)

namespace ember::cuda_interpreter::detail {

thread_local SimThread* current_thread = nullptr;

namespace {

std::string format_index(const uint3& i) {
    char text[48];
    std::snprintf(text, sizeof text, "(%u,%u,%u)", i.x, i.y, i.z);
    return text;
}

std::string format_site(const std::source_location& where) {
    std::string file = where.file_name();
    const auto slash = file.find_last_of('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    return file + ":" + std::to_string(where.line());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
    return a.line() == b.line() && a.column() == b.column() && std::string_view(a.file_name()) == b.file_name();
}

[[noreturn]] void misuse(const char* what) {
    std::fprintf(stderr, "ember kernel interpreter: %s called outside a kernel\n", what);
    std::abort();
}

SimThread& require_thread(const char* what) {
    SimThread* thread = current_thread;
    if (!thread) misuse(what);
    return *thread;
}

// ============================================================================================
// [SECTION] fiber stacks
// ============================================================================================

// Kernel frames are small, but an exception unwinding through them, the sanitizers'
// runtimes and a printf need room; pages are only touched when used.
#if defined(EMBER_INTERPRETER_UNDER_ASAN)
constexpr std::size_t kStackBytes = 1024 * 1024;
#else
constexpr std::size_t kStackBytes = 256 * 1024;
#endif

// Stacks mapped once per worker and reused for every simulated thread, with an
// inaccessible page below each so an overflow faults instead of corrupting a neighbour.
// A stack in use belongs to its fiber; one that is never returned (an abandoned fiber)
// stays mapped.
class StackPool {
  public:
    StackPool() : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {}
    ~StackPool() {
        for (void* base : free_) munmap(base, mapping_bytes());
    }
    boost::context::stack_context take() {
        void* base;
        if (!free_.empty()) {
            base = free_.back();
            free_.pop_back();
        } else {
            base = mmap(nullptr, mapping_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
            if (base == MAP_FAILED) {
                std::perror("ember kernel interpreter: mmap of a fiber stack");
                std::abort();
            }
            if (mprotect(base, page_, PROT_NONE) != 0) {
                std::perror("ember kernel interpreter: mprotect of a fiber stack's guard page");
                std::abort();
            }
        }
        last_low_ = reinterpret_cast<uintptr_t>(base);
        boost::context::stack_context context;
        context.size = kStackBytes;
        context.sp = static_cast<char*>(base) + mapping_bytes();
        return context;
    }
    void give_back(const boost::context::stack_context& context) {
        free_.push_back(static_cast<char*>(context.sp) - mapping_bytes());
    }
    // The stack handed out last (the fiber just created): its lowest address and size.
    uintptr_t last_low() const { return last_low_; }
    std::size_t mapping_bytes() const { return kStackBytes + page_; }

  private:
    std::size_t page_;
    std::vector<void*> free_;
    uintptr_t last_low_ = 0;
};

// Boost.Context's StackAllocator over a StackPool.
struct PooledStack {
    StackPool* pool;
    boost::context::stack_context allocate() { return pool->take(); }
    void deallocate(boost::context::stack_context& context) noexcept { pool->give_back(context); }
};

// AddressSanitizer must hear of every switch between stacks (before it, and once on the
// other side), or it takes the fiber stacks for corruption and cannot unwind a throw.
// Without ASan these do nothing.
void begin_switch(void** fake_stack, const void* stack, std::size_t bytes) {
#if defined(EMBER_INTERPRETER_UNDER_ASAN)
    __sanitizer_start_switch_fiber(fake_stack, stack, bytes);
#else
    (void)fake_stack, (void)stack, (void)bytes;
#endif
}
void end_switch(void* fake_stack, const void** from_stack, std::size_t* from_bytes) {
#if defined(EMBER_INTERPRETER_UNDER_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack, from_stack, from_bytes);
#else
    (void)fake_stack, (void)from_stack, (void)from_bytes;
#endif
}

// Fibers stopped at a forbidden access are never resumed (the access must not happen)
// nor destroyed (that would unwind them through it): they stay here, reachable, so
// leak checkers do not count them. A deliberately broken test kernel costs one stack.
std::vector<boost::context::fiber>* abandoned_fibers() {
    static auto* fibers = new std::vector<boost::context::fiber>();
    return fibers;
}

// ============================================================================================
// [SECTION] workers
// ============================================================================================

// What a worker thread keeps from block to block.
struct Worker {
    StackPool stacks;
    std::unique_ptr<std::byte[]> arena{new std::byte[kSharedArenaBytes]};
    std::unique_ptr<ShadowCell[]> shadow{new ShadowCell[kSharedArenaBytes]};
    Block block;

    Worker() {
        block.arena = arena.get();
        block.shadow = shadow.get();
#if defined(EMBER_INTERPRETER_UNDER_ASAN)
        // The worker's own stack, which fibers switch back to (for ASan's annotations).
        pthread_attr_t attributes;
        void* stack = nullptr;
        std::size_t bytes = 0;
        if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
            pthread_attr_getstack(&attributes, &stack, &bytes);
            pthread_attr_destroy(&attributes);
        }
        block.scheduler_stack = stack;
        block.scheduler_stack_bytes = bytes;
#endif
    }
    ~Worker() {
        block.threads.clear();
    }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
};

Worker& this_worker() {
    thread_local std::unique_ptr<Worker> worker;
    if (!worker) worker = std::make_unique<Worker>();
    return *worker;
}

int default_workers() {
    if (const char* text = std::getenv("EMBER_CUDA_INTERPRETER_WORKERS")) {
        const int value = std::atoi(text);
        if (value > 0) return value;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

void run_block(Launch& launch, Worker& worker, uint64_t linear_block);

void run_blocks(Launch& launch) {
    Worker& worker = this_worker();
    while (!launch.stopped.load(std::memory_order_relaxed)) {
        const uint64_t block = launch.next_block.fetch_add(1);
        if (block >= launch.block_count) break;
        run_block(launch, worker, block);
    }
}

// The launching thread runs blocks itself; helpers join it when a grid has several.
class WorkerPool {
  public:
    // Never destroyed, so a launch from a static destructor during exit still works;
    // the helpers wait on their condition variable until the process ends.
    static WorkerPool& instance() {
        static auto* pool = new WorkerPool;
        return *pool;
    }

    int size() const { return size_; }
    void set_size(int workers) {
        stop_helpers();
        size_ = std::max(1, workers);
    }

    void run(Launch& launch) {
        const bool with_helpers = size_ > 1 && launch.block_count > 1;
        if (with_helpers) {
            std::unique_lock lock(mutex_);
            while (static_cast<int>(helpers_.size()) < size_ - 1) helpers_.emplace_back([this] { helper_main(); });
            launch_ = &launch;
            ++generation_;
            remaining_ = static_cast<int>(helpers_.size());
            lock.unlock();
            wake_.notify_all();
        }
        run_blocks(launch);
        if (with_helpers) {
            std::unique_lock lock(mutex_);
            done_.wait(lock, [this] { return remaining_ == 0; });
            launch_ = nullptr;
        }
    }

  private:
    WorkerPool() : size_(default_workers()) {}

    void helper_main() {
        uint64_t seen = 0;
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            Launch* launch = launch_;
            lock.unlock();
            run_blocks(*launch);
            lock.lock();
            if (--remaining_ == 0) done_.notify_all();
        }
    }

    void stop_helpers() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto& helper : helpers_) helper.join();
        helpers_.clear();
        stopping_ = false;
    }

    int size_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::vector<std::thread> helpers_;
    Launch* launch_ = nullptr;
    uint64_t generation_ = 0;
    int remaining_ = 0;
    bool stopping_ = false;
};

// ============================================================================================
// [SECTION] running a block
// ============================================================================================

void release_barrier(Block& block);
void thread_exited(Block& block, SimThread& thread);

// ---- the ready queue and the switches between fibers ------------------------------------------

// A thread the block may run again; the running thread itself just goes on.
void make_ready(Block& block, SimThread& thread) {
    thread.state = ThreadState::runnable;
    if (&thread == current_thread) return;
    block.ready[(block.ready_head + block.ready_size++) % block.ready.size()] = thread.linear;
}

int take_ready(Block& block) {
    if (block.ready_size == 0) return -1;
    const int next = block.ready[block.ready_head];
    block.ready_head = (block.ready_head + 1) % block.ready.size();
    --block.ready_size;
    return next;
}

const void* stack_bottom(const SimThread& thread) {
    return reinterpret_cast<const void*>(thread.stack_low + thread.stack_bytes - kStackBytes);
}

// A switch hands the target the continuation of the fiber it left: file it where that
// fiber's continuation belongs (a finished fiber leaves none).
void keep_continuation(Block& block, boost::context::fiber&& returned) {
    if (block.switched_from >= 0)
        block.threads[block.switched_from].fiber = std::move(returned);
    else if (block.switched_from == Block::kFromScheduler)
        block.scheduler = std::move(returned);
}

// Runs thread `next` (or the worker's context when next < 0) instead of `from`, which
// returns from here when some fiber switches back to it.
void transfer(Block& block, SimThread& from, int next) {
    boost::context::fiber* target = &block.scheduler;
    const void* stack = block.scheduler_stack;
    std::size_t stack_bytes = block.scheduler_stack_bytes;
    current_thread = nullptr;
    if (next >= 0) {
        SimThread& to = block.threads[next];
        target = &to.fiber;
        stack = stack_bottom(to);
        stack_bytes = kStackBytes;
        current_thread = &to;
    }
    block.switched_from = from.linear;
    void* fake_stack = nullptr;
    begin_switch(&fake_stack, stack, stack_bytes);
    boost::context::fiber returned = std::move(*target).resume();
    end_switch(fake_stack, nullptr, nullptr);
    current_thread = &from;
    keep_continuation(block, std::move(returned));
}

// The fiber to run after one that waits or finishes: the next ready thread, or the
// worker's context when none is (or when the block is being abandoned).
int next_to_run(Block& block) {
    return block.aborting ? -1 : take_ready(block);
}

// ---- a simulated thread's life -----------------------------------------------------------------

boost::context::fiber thread_main(Block& block, SimThread& thread, boost::context::fiber&& caller) {
    end_switch(nullptr, nullptr, nullptr);
    keep_continuation(block, std::move(caller));
    if (!block.aborting) {
        try {
            block.launch->request.run_thread(block.launch->request.arguments.get());
        } catch (const KernelAbort&) {
        } catch (const boost::context::detail::forced_unwind&) {
            throw;  // Boost unwinding a fiber: must pass
        } catch (const std::exception& error) {
            const RuntimeScope runtime;
            report(*block.launch, FindingKind::kernel_exception, block.index, &thread.index, 0,
                   std::string("the kernel threw: ") + error.what());
            block.aborting = true;
        } catch (...) {
            const RuntimeScope runtime;
            report(*block.launch, FindingKind::kernel_exception, block.index, &thread.index, 0,
                   "the kernel threw a non-standard exception");
            block.aborting = true;
        }
    }
    {
        const RuntimeScope runtime;
        if (!block.aborting) thread_exited(block, thread);
    }
    thread.state = ThreadState::finished;
    const int next = next_to_run(block);
    block.switched_from = Block::kFromFinished;
    if (next >= 0) {
        SimThread& to = block.threads[next];
        begin_switch(nullptr, stack_bottom(to), kStackBytes);  // nullptr: this stack is done
        current_thread = &to;
        return std::move(to.fiber);
    }
    begin_switch(nullptr, block.scheduler_stack, block.scheduler_stack_bytes);
    current_thread = nullptr;
    return std::move(block.scheduler);
}

// From the worker's context: runs `thread` until no fiber of the block is ready.
void resume(Block& block, SimThread& thread) {
    block.switched_from = Block::kFromScheduler;
    current_thread = &thread;
    void* fake_stack = nullptr;
    begin_switch(&fake_stack, stack_bottom(thread), kStackBytes);
    boost::context::fiber returned = std::move(thread.fiber).resume();
    end_switch(fake_stack, nullptr, nullptr);
    current_thread = nullptr;
    keep_continuation(block, std::move(returned));
}

// Lists who waits where, for a block in which nothing can move.
std::string describe_waiting(const Block& block) {
    std::map<std::string, std::vector<int>> groups;
    for (const SimThread& thread : block.threads) {
        if (thread.state == ThreadState::at_barrier)
            groups["__syncthreads at " + format_site(thread.wait_site)].push_back(thread.linear);
        else if (thread.state == ThreadState::at_warp)
            groups["a warp intrinsic at " + format_site(thread.wait_site)].push_back(thread.linear);
    }
    std::ostringstream text;
    bool first = true;
    for (const auto& [place, threads] : groups) {
        if (!first) text << "; ";
        first = false;
        text << threads.size() << " thread" << (threads.size() == 1 ? "" : "s") << " (first "
             << format_index(block.threads[threads.front()].index) << ") wait in " << place;
    }
    if (block.finished > 0) text << "; " << block.finished << " returned";
    return text.str();
}

// Unwinds every fiber that is still waiting; a faulted one is abandoned instead.
void abandon_block(Block& block) {
    block.aborting = true;
    for (SimThread& thread : block.threads) {
        if (!thread.fiber) continue;
        if (thread.state == ThreadState::faulted) {
            abandoned_fibers()->push_back(std::move(thread.fiber));
            continue;
        }
        resume(block, thread);  // throws KernelAbort where it waits (or returns at once if never started)
    }
}

void run_block(Launch& launch, Worker& worker, uint64_t linear_block) {
    const LaunchRequest& request = launch.request;
    Block& block = worker.block;
    block.launch = &launch;
    block.index.x = static_cast<unsigned>(linear_block % request.grid.x);
    block.index.y = static_cast<unsigned>((linear_block / request.grid.x) % request.grid.y);
    block.index.z = static_cast<unsigned>(linear_block / (uint64_t(request.grid.x) * request.grid.y));
    block.dim = request.block;
    block.thread_count = static_cast<int>(request.block.x * request.block.y * request.block.z);
    block.finished = 0;
    block.aborting = false;
    block.barrier_arrived = 0;
    block.barrier_sites_differ = false;
    block.barrier_epoch = 0;
    reset_shared_memory(block, request.dynamic_shared_bytes);

    const int warps = (block.thread_count + kWarpSize - 1) / kWarpSize;
    block.warps.assign(static_cast<std::size_t>(warps), Warp{});
    for (int w = 0; w < warps; ++w) {
        const int lanes = std::min(kWarpSize, block.thread_count - w * kWarpSize);
        block.warps[w].lanes = lanes == kWarpSize ? 0xffffffffu : ((1u << lanes) - 1u);
    }

    block.threads.resize(static_cast<std::size_t>(block.thread_count));
    block.ready.assign(static_cast<std::size_t>(block.thread_count), 0);
    block.ready_head = 0;
    block.ready_size = 0;
    for (int i = 0; i < block.thread_count; ++i) {
        SimThread& thread = block.threads[i];
        thread.linear = i;
        thread.index.x = static_cast<unsigned>(i) % request.block.x;
        thread.index.y = (static_cast<unsigned>(i) / request.block.x) % request.block.y;
        thread.index.z = static_cast<unsigned>(i) / (request.block.x * request.block.y);
        thread.warp = i / kWarpSize;
        thread.lane = i % kWarpSize;
        thread.block = &block;
        thread.fiber = boost::context::fiber(std::allocator_arg, PooledStack{&worker.stacks},
                                             [&block, &thread](boost::context::fiber&& caller) {
                                                 return thread_main(block, thread, std::move(caller));
                                             });
        thread.stack_low = worker.stacks.last_low();
        thread.stack_bytes = worker.stacks.mapping_bytes();
        make_ready(block, thread);
    }

    // The fibers switch among themselves; control comes back here when none is ready.
    while (!block.aborting) {
        const int next = take_ready(block);
        if (next < 0) break;
        resume(block, block.threads[next]);
    }
    if (!block.aborting && block.finished < block.thread_count) {
        report(launch, FindingKind::barrier_divergence, block.index, nullptr, 0,
               "the block cannot go on: " + describe_waiting(block));
        block.aborting = true;
    }
    if (block.aborting) {
        launch.stopped = true;
        abandon_block(block);
    }
    block.threads.clear();
}

// ============================================================================================
// [SECTION] __syncthreads
// ============================================================================================

void release_barrier(Block& block) {
    int count = 0, all = 1, any = 0;
    const SimThread* first_waiter = nullptr;
    for (SimThread& thread : block.threads) {
        if (thread.state != ThreadState::at_barrier) continue;
        if (!first_waiter) first_waiter = &thread;
        count += thread.barrier_value;
        all &= thread.barrier_value;
        any |= thread.barrier_value;
    }
    if (block.finished > 0 && first_waiter) {
        const SimThread* gone = nullptr;
        for (const SimThread& thread : block.threads)
            if (thread.state == ThreadState::finished) {
                gone = &thread;
                break;
            }
        report(*block.launch, FindingKind::barrier_divergence, block.index, gone ? &gone->index : nullptr, 0,
               std::to_string(block.finished) + " thread(s) returned without reaching the __syncthreads at " +
                   format_site(block.barrier_site) + " that " + std::to_string(block.barrier_arrived) +
                   " thread(s) wait at",
               "exit:" + format_site(block.barrier_site));
    }
    if (block.barrier_sites_differ && first_waiter) {
        std::map<std::string, int> sites;
        for (const SimThread& thread : block.threads)
            if (thread.state == ThreadState::at_barrier) ++sites[format_site(thread.wait_site)];
        std::string listing;
        for (const auto& [site, threads] : sites)
            listing += (listing.empty() ? "" : ", ") + std::to_string(threads) + " at " + site;
        report(*block.launch, FindingKind::barrier_divergence, block.index, &first_waiter->index, 0,
               "threads of one block synchronised at different __syncthreads calls: " + listing, "sites:" + listing);
    }
    const int result = block.barrier_kind == BarrierKind::count ? count
                       : block.barrier_kind == BarrierKind::all ? all
                       : block.barrier_kind == BarrierKind::any ? any
                                                                : 0;
    ++block.barrier_epoch;
    block.barrier_arrived = 0;
    block.barrier_sites_differ = false;
    for (SimThread& thread : block.threads) {
        if (thread.state != ThreadState::at_barrier) continue;
        thread.barrier_result = result;
        make_ready(block, thread);
    }
}

void fail_warp(Block& block, const SimThread* thread, const std::string& message) {
    report(*block.launch, FindingKind::warp_divergence, block.index, thread ? &thread->index : nullptr, 0, message);
    block.aborting = true;
}

const char* warp_op_name(WarpOp op) {
    switch (op) {
        case WarpOp::sync:
            return "__syncwarp";
        case WarpOp::shuffle:
            return "__shfl_sync";
        case WarpOp::shuffle_up:
            return "__shfl_up_sync";
        case WarpOp::shuffle_down:
            return "__shfl_down_sync";
        case WarpOp::shuffle_xor:
            return "__shfl_xor_sync";
        case WarpOp::ballot:
            return "__ballot_sync";
        case WarpOp::any:
            return "__any_sync";
        case WarpOp::all:
            return "__all_sync";
    }
    return "a warp intrinsic";
}

std::string hex(unsigned mask) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", mask);
    return text;
}

void thread_exited(Block& block, SimThread& thread) {
    thread.state = ThreadState::finished;
    ++block.finished;
    Warp& warp = block.warps[thread.warp];
    const unsigned self = 1u << thread.lane;
    warp.exited |= self;
    for (const PendingCollective& pending : warp.pending) {
        if (!(pending.mask & self)) continue;
        fail_warp(block, &thread,
                  "lane " + std::to_string(thread.lane) + " returned, but lanes " + hex(pending.arrived) +
                      " wait for it in " + warp_op_name(pending.op) + "(mask " + hex(pending.mask) + ") at " +
                      format_site(pending.site));
        return;
    }
    if (block.barrier_arrived > 0 && block.barrier_arrived + block.finished == block.thread_count)
        release_barrier(block);
}

// ============================================================================================
// [SECTION] launches
// ============================================================================================

std::mutex& launch_mutex() {
    static auto* mutex = new std::mutex;  // never destroyed: see WorkerPool
    return *mutex;
}

std::string validate(const LaunchRequest& request) {
    const dim3& b = request.block;
    const dim3& g = request.grid;
    const auto dims = [](const dim3& d) { return format_index(uint3{d.x, d.y, d.z}); };
    if (b.x == 0 || b.y == 0 || b.z == 0) return "block " + dims(b) + " has a zero dimension";
    if (b.x > 1024 || b.y > 1024 || b.z > 64) return "block " + dims(b) + " exceeds (1024,1024,64)";
    if (uint64_t(b.x) * b.y * b.z > 1024) return "block " + dims(b) + " has more than 1024 threads";
    if (g.x == 0 || g.y == 0 || g.z == 0) return "grid " + dims(g) + " has a zero dimension";
    if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) return "grid " + dims(g) + " exceeds (2^31-1,65535,65535)";
    if (request.dynamic_shared_bytes > kSharedLimitBytes)
        return std::to_string(request.dynamic_shared_bytes) + " bytes of dynamic shared memory exceed the " +
               std::to_string(kSharedLimitBytes) + " a block may have";
    return {};
}

}  // namespace

void set_last_error(cudaError_t code, const std::string& detail);  // cuda_runtime.cpp
bool capture_launch(const LaunchRequest& request);                 // cuda_runtime.cpp

void wait(SimThread& thread) {
    Block& block = *thread.block;
    transfer(block, thread, next_to_run(block));
    if (block.aborting) throw KernelAbort{};
}

void abandon(SimThread& thread) {
    Block& block = *thread.block;
    thread.state = ThreadState::faulted;
    block.aborting = true;
    block.launch->stopped = true;
    transfer(block, thread, -1);
    std::fprintf(stderr, "ember kernel interpreter: an abandoned thread was resumed\n");
    std::abort();
}

void execute_launch(const LaunchRequest& request) {
    std::lock_guard lock(launch_mutex());
    static std::atomic<uint64_t> launches{0};
    Launch launch;
    launch.id = ++launches;
    launch.request = request;
    launch.block_count = uint64_t(request.grid.x) * request.grid.y * request.grid.z;
    launch.memory = memory_snapshot();
    launch.arguments_base = reinterpret_cast<uintptr_t>(request.arguments.get());
    launch.static_image_begin = reinterpret_cast<uintptr_t>(&__executable_start);
    launch.static_image_end = reinterpret_cast<uintptr_t>(&_end);
    WorkerPool::instance().run(launch);
    if (launch.finding_count > 0) {
        std::string detail = launch.first_finding;
        if (launch.finding_count > 1)
            detail += " (and " + std::to_string(launch.finding_count - 1) + " more finding" +
                      (launch.finding_count > 2 ? "s" : "") + ")";
        set_last_error(launch.out_of_bounds ? cudaErrorIllegalAddress : cudaErrorLaunchFailure, detail);
    }
}

}  // namespace ember::cuda_interpreter::detail

namespace ember::cuda_interpreter {

using namespace detail;

void submit_launch(LaunchRequest request) {
    count_launch(request);
    const std::string problem = validate(request);
    if (!problem.empty()) {
        set_last_error(cudaErrorInvalidConfiguration, std::string("EMBER_LAUNCH(") + request.kernel + ") at " +
                                                          request.file + ":" + std::to_string(request.line) + ": " +
                                                          problem);
        return;
    }
    if (capture_launch(request)) return;
    execute_launch(request);
}

// ============================================================================================
// [SECTION] __syncthreads (the kernel side)
// ============================================================================================

int block_barrier(BarrierKind kind, int predicate, std::source_location where) {
    SimThread& thread = require_thread("__syncthreads");
    const RuntimeScope runtime;
    Block& block = *thread.block;
    if (block.barrier_arrived == 0) {
        block.barrier_kind = kind;
        block.barrier_site = where;
    } else if (!same_site(block.barrier_site, where) || block.barrier_kind != kind) {
        block.barrier_sites_differ = true;
    }
    ++block.barrier_arrived;
    thread.barrier_value = predicate;
    thread.state = ThreadState::at_barrier;
    thread.wait_site = where;
    if (block.barrier_arrived + block.finished == block.thread_count)
        release_barrier(block);
    else
        wait(thread);
    return thread.barrier_result;
}

// ============================================================================================
// [SECTION] warp intrinsics
// ============================================================================================

namespace {

bool power_of_two(int width) {
    return width > 0 && width <= kWarpSize && (width & (width - 1)) == 0;
}

// Fills each participant's result and lets them go.
void complete(Block& block, Warp& warp, PendingCollective& pending, int warp_index) {
    unsigned ballot = 0;
    for (int lane = 0; lane < kWarpSize; ++lane)
        if ((pending.mask >> lane) & 1u && pending.values[lane] != 0) ballot |= 1u << lane;
    for (int lane = 0; lane < kWarpSize; ++lane) {
        if (!((pending.mask >> lane) & 1u)) continue;
        SimThread& thread = block.threads[warp_index * kWarpSize + lane];
        uint64_t result = 0;
        const int segment = lane / pending.width * pending.width;
        int source = lane;
        switch (pending.op) {
            case WarpOp::sync:
                break;
            case WarpOp::ballot:
                result = ballot;
                break;
            case WarpOp::any:
                result = ballot != 0;
                break;
            case WarpOp::all:
                result = ballot == pending.mask;
                break;
            case WarpOp::shuffle:
                source = segment + (pending.arguments[lane] & (pending.width - 1));
                break;
            case WarpOp::shuffle_up:
                source = lane - pending.arguments[lane];
                if (source < segment) source = lane;
                break;
            case WarpOp::shuffle_down:
                source = lane + pending.arguments[lane];
                if (source >= segment + pending.width) source = lane;
                break;
            case WarpOp::shuffle_xor:
                source = lane ^ pending.arguments[lane];
                if (source >= segment + pending.width || source >= kWarpSize || source < 0) source = lane;
                break;
        }
        if (pending.op == WarpOp::shuffle || pending.op == WarpOp::shuffle_up || pending.op == WarpOp::shuffle_down ||
            pending.op == WarpOp::shuffle_xor) {
            if (!((pending.mask >> source) & 1u)) {
                report(*block.launch, FindingKind::warp_divergence, block.index, &thread.index, 0,
                       std::string(warp_op_name(pending.op)) + " at " + format_site(pending.site) + ": lane " +
                           std::to_string(lane) + " reads lane " + std::to_string(source) +
                           ", which is not in the mask " + hex(pending.mask) + " (its value is undefined)",
                       "shuffle-source:" + format_site(pending.site));
                source = lane;
            }
            result = pending.values[source];
        }
        thread.collective_result = result;
        make_ready(block, thread);
    }
    ++warp.sync_epoch;
}

}  // namespace

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int lane_argument, int width,
                         std::source_location where) {
    SimThread& thread = require_thread(warp_op_name(op));
    const RuntimeScope runtime;
    Block& block = *thread.block;
    Warp& warp = block.warps[thread.warp];
    const unsigned self = 1u << thread.lane;
    // Only a finding needs the description: build it only then.
    const auto call = [&] {
        return std::string(warp_op_name(op)) + "(mask " + hex(mask) + ") at " + format_site(where);
    };
    if (!(mask & self)) {
        report(*block.launch, FindingKind::warp_divergence, block.index, &thread.index, 0,
               call() + ": the calling lane " + std::to_string(thread.lane) + " is not in the mask", "self:" + call());
        mask |= self;
    }
    if (mask & ~warp.lanes) {
        report(*block.launch, FindingKind::warp_divergence, block.index, &thread.index, 0,
               call() + ": the mask names lanes " + hex(mask & ~warp.lanes) + " that this block does not have",
               "lanes:" + call());
        mask &= warp.lanes;
    }
    if (!power_of_two(width)) {
        report(*block.launch, FindingKind::warp_divergence, block.index, &thread.index, 0,
               call() + ": width " + std::to_string(width) + " is not a power of two up to 32", "width:" + call());
        width = kWarpSize;
    }
    if (mask & warp.exited) {
        fail_warp(block, &thread, call() + ": the mask names lanes " + hex(mask & warp.exited) + " that have returned");
        wait(thread);
    }
    PendingCollective* pending = nullptr;
    for (PendingCollective& candidate : warp.pending) {
        if (candidate.mask == mask) {
            pending = &candidate;
            break;
        }
        if (candidate.mask & mask) {
            fail_warp(block, &thread,
                      call() + " while lanes " + hex(candidate.arrived) + " wait in " + warp_op_name(candidate.op) +
                          "(mask " + hex(candidate.mask) + ") at " + format_site(candidate.site) +
                          ": overlapping masks");
            wait(thread);
        }
    }
    if (!pending) {
        warp.pending.emplace_back();
        pending = &warp.pending.back();
        pending->op = op;
        pending->mask = mask;
        pending->width = width;
        pending->site = where;
    } else if (pending->op != op || pending->width != width) {
        fail_warp(block, &thread,
                  call() + " while lanes " + hex(pending->arrived) + " wait in " + warp_op_name(pending->op) + " at " +
                      format_site(pending->site) + ": the lanes of a warp call different intrinsics");
        wait(thread);
    }
    pending->values[thread.lane] = value;
    pending->arguments[thread.lane] = lane_argument;
    pending->arrived |= self;
    thread.state = ThreadState::at_warp;
    thread.wait_site = where;
    if (pending->arrived == pending->mask) {
        complete(block, warp, *pending, thread.warp);
        warp.pending.erase(warp.pending.begin() + (pending - warp.pending.data()));
    } else {
        wait(thread);
    }
    return thread.collective_result;
}

unsigned active_mask() {
    SimThread& thread = require_thread("__activemask");
    const Warp& warp = thread.block->warps[thread.warp];
    return warp.lanes & ~warp.exited;
}

// ============================================================================================
// [SECTION] thread geometry and settings
// ============================================================================================

uint3 thread_index() {
    return require_thread("threadIdx").index;
}
uint3 block_index() {
    return require_thread("blockIdx").block->index;
}
dim3 block_dim() {
    return require_thread("blockDim").block->dim;
}
dim3 grid_dim() {
    return require_thread("gridDim").block->launch->request.grid;
}

namespace {
std::atomic<unsigned> g_grid_stride_cap{0};
}

unsigned grid_stride_cap() {
    return g_grid_stride_cap.load(std::memory_order_relaxed);
}
void set_grid_stride_cap(unsigned blocks) {
    g_grid_stride_cap = blocks;
}

void set_workers(int count) {
    std::lock_guard lock(launch_mutex());
    WorkerPool::instance().set_size(count);
}
int workers() {
    return WorkerPool::instance().size();
}

}  // namespace ember::cuda_interpreter

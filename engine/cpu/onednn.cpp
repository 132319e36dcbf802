// onednn.cpp: the oneDNN engine, streams, thread team, scratch buffers and the
// op-implementation switch shared by the CPU fast paths (onednn.h, implementation.h).
#include "engine/cpu/onednn.h"

#include "common/os.h"

#include "engine/cpu/implementation.h"
#include "engine/cpu/parallel.h"
#include "engine/core/nvtx.h"

#include <cblas.h>
#include <omp.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace ember::cpu {

namespace {

OpImplementation implementation_from_environment() {
    const char* value = std::getenv("EMBER_CPU_REFERENCE");
    return value != nullptr && std::strcmp(value, "1") == 0 ? OpImplementation::reference : OpImplementation::fast;
}

std::atomic<OpImplementation>& current_implementation() {
    static std::atomic<OpImplementation> implementation{implementation_from_environment()};
    return implementation;
}

}  // namespace

void set_op_implementation(OpImplementation implementation) {
    current_implementation().store(implementation);
}
OpImplementation op_implementation() {
    return current_implementation().load(std::memory_order_relaxed);
}

// CPUs this process may run on (its affinity mask), read once: mpirun binds each rank
// to its share of the cores, and a team larger than that only makes threads wait for
// each other's time slices.
int allowed_cpus() {
    static const int count = [] {
        const std::size_t cpus = os::allowed_cpus().size();
        return cpus == 0 ? 1 << 16 : int(cpus);  // unknown: no cap
    }();
    return count;
}

int compute_threads() {
    return std::max(1, std::min(openblas_get_num_threads(), allowed_cpus()));
}
void set_compute_threads(int threads) {
    openblas_set_num_threads(std::max(1, threads));
}

std::string name_jit_kernels_for_profilers() {
    // VTune's hook is oneDNN's default; the perf map is added to it.
    if (dnnl_set_jit_profiling_flags(DNNL_JIT_PROFILE_VTUNE | DNNL_JIT_PROFILE_LINUX_PERFMAP) != dnnl_success)
        return "";
    return "/tmp/perf-" + std::to_string(getpid()) + ".map";
}

namespace {

// A signal delivered to a thread while it runs one of oneDNN's JIT kernels must not be
// pushed onto that thread's stack: with Debian's oneDNN 2.6, a 199 Hz SIGPROF (the
// sampling of `ember train --profile`, or any sampling profiler) corrupted the heap
// within a few dozen steps ("corrupted size vs. prev_size" in dnnl_sgemm), and the
// same run with the signal frames on an alternate stack is clean. So every thread
// that runs oneDNN gets an alternate signal stack of its own; handlers installed with
// SA_ONSTACK (the collector's) run there. A thread that already has one keeps it.
struct SignalStack {
    std::unique_ptr<char[]> memory;
    ~SignalStack() {
        if (!memory) return;
        stack_t disable{};
        disable.ss_flags = SS_DISABLE;
        sigaltstack(&disable, nullptr);
    }
};

void give_thread_a_signal_stack() {
    thread_local SignalStack stack;
    if (stack.memory) return;
    stack_t current{};
    if (sigaltstack(nullptr, &current) != 0 || (current.ss_flags & SS_DISABLE) == 0) return;
    const long minimum = sysconf(_SC_MINSIGSTKSZ);
    const std::size_t size = std::max<std::size_t>(64 << 10, minimum > 0 ? 4 * static_cast<std::size_t>(minimum) : 0);
    std::unique_ptr<char[]> memory(new char[size]);
    stack_t alternate{};
    alternate.ss_sp = memory.get();
    alternate.ss_size = size;
    if (sigaltstack(&alternate, nullptr) == 0) stack.memory = std::move(memory);
}

// The team's other threads get a name ("cpu compute 1", ...) for profiles and
// debuggers (the kernel's thread name, and NVTX's for a recording); the calling thread
// keeps its own.
void name_team_thread() {
    const int index = omp_get_thread_num();
    if (index == 0) return;
    thread_local int named = 0;
    if (named == index) return;
    named = index;
    const std::string name = "cpu compute " + std::to_string(index);
    pthread_setname_np(pthread_self(), name.c_str());  // at most 15 characters: fits
    nvtx::name_thread(name.c_str());
}

}  // namespace

int thread_team() {
    // omp_set_num_threads sets the calling thread's next teams; oneDNN reads the same
    // value when it plans and runs a primitive. Cheap: two reads of a global and a
    // thread-local.
    const int threads = compute_threads();
    if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
    // Once per calling thread and team size: the caller and the team's threads (which
    // OpenMP keeps and reuses for the calling thread's later teams) get signal stacks.
    thread_local int prepared_threads = 0;
    if (prepared_threads < threads) {
        give_thread_a_signal_stack();
#pragma omp parallel num_threads(threads)
        {
            give_thread_a_signal_stack();
            name_team_thread();
        }
        prepared_threads = threads;
    }
    return threads;
}

namespace onednn {

dnnl::engine& cpu_engine() {
    static dnnl::engine engine = [] {
        try {
            return dnnl::engine(dnnl::engine::kind::cpu, 0);
        } catch (const dnnl::error& e) {
            rethrow("engine(cpu, 0)", "the CPU engine", e);
        }
    }();
    return engine;
}

dnnl::stream& cpu_stream() {
    thread_local dnnl::stream stream = [] {
        try {
            return dnnl::stream(cpu_engine());
        } catch (const dnnl::error& e) {
            rethrow("stream(cpu engine)", "the calling thread's stream", e);
        }
    }();
    return stream;
}

void rethrow(const char* call, const std::string& what, const dnnl::error& error) {
    throw std::runtime_error(std::string("oneDNN ") + call + " (" + what + "): " + error.what() + " (status " +
                             std::to_string(static_cast<int>(error.status)) + ")");
}

namespace {

struct ScratchBuffer {
    void* data = nullptr;
    std::size_t capacity = 0;
    ~ScratchBuffer() { std::free(data); }
};

}  // namespace

void* scratch(ScratchSlot slot, std::size_t bytes) {
    thread_local ScratchBuffer buffers[static_cast<int>(ScratchSlot::count)];
    ScratchBuffer& buffer = buffers[static_cast<int>(slot)];
    if (bytes > buffer.capacity) {
        std::free(buffer.data);
        const std::size_t rounded = (bytes + 63) / 64 * 64;
        buffer.data = std::aligned_alloc(64, rounded);
        if (buffer.data == nullptr) {
            buffer.capacity = 0;
            throw std::bad_alloc();
        }
        buffer.capacity = rounded;
    }
    return buffer.data;
}

dnnl::memory::desc activation_desc(const Tensor& t) {
    using tag = dnnl::memory::format_tag;
    const bool same_in_both_layouts = t.shape[1] == 1 || t.shape[2] * t.shape[3] == 1;
    return dnnl::memory::desc({t.shape[0], t.shape[1], t.shape[2], t.shape[3]}, dnnl::memory::data_type::f32,
                              t.layout == Layout::nhwc || same_in_both_layouts ? tag::nhwc : tag::nchw);
}

dnnl::memory::desc channels_last_desc(const dnnl::memory::desc& activation) {
    return dnnl::memory::desc(activation.dims(), activation.data_type(), dnnl::memory::format_tag::nhwc);
}

dnnl::memory::desc filter_desc(const Tensor& t) {
    using tag = dnnl::memory::format_tag;
    return dnnl::memory::desc({t.shape[0], t.shape[1], t.shape[2], t.shape[3]}, dnnl::memory::data_type::f32,
                              t.layout == Layout::nhwc ? tag::ohwi : tag::oihw);
}

dnnl::memory::desc vector_desc(int64_t length) {
    return dnnl::memory::desc({length}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
}

dnnl::memory::desc with_any_format(const dnnl::memory::desc& desc) {
    return dnnl::memory::desc(desc.dims(), desc.data_type(), dnnl::memory::format_tag::any);
}

Staged::Staged(const dnnl::memory::desc& user_desc, const dnnl::memory::desc& compute_desc, bool inbound, bool outbound)
    : user(user_desc), compute(compute_desc) {
    if (!reordered()) return;
    try {
        if (inbound)
            to_compute = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), user, cpu_engine(), compute));
        if (outbound) to_user = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), compute, cpu_engine(), user));
    } catch (const dnnl::error& e) {
        rethrow("reorder::primitive_desc", "between the caller's and the primitive's formats", e);
    }
}

dnnl::memory Staged::in(void* data, ScratchSlot slot) const {
    dnnl::memory user_memory(user, cpu_engine(), data);
    if (!reordered()) return user_memory;
    dnnl::memory compute_memory(compute, cpu_engine(), scratch(slot, compute.get_size()));
    cpu::thread_team();
    try {
        to_compute->execute(cpu_stream(), user_memory, compute_memory);
    } catch (const dnnl::error& e) {
        rethrow("reorder::execute", "into the primitive's format", e);
    }
    return compute_memory;
}

dnnl::memory Staged::target(void* data, ScratchSlot slot) const {
    if (!reordered()) return dnnl::memory(user, cpu_engine(), data);
    return dnnl::memory(compute, cpu_engine(), scratch(slot, compute.get_size()));
}

void Staged::out(dnnl::memory computed, void* data) const {
    if (!reordered()) return;
    dnnl::memory user_memory(user, cpu_engine(), data);
    cpu::thread_team();
    try {
        to_user->execute(cpu_stream(), computed, user_memory);
    } catch (const dnnl::error& e) {
        rethrow("reorder::execute", "into the caller's format", e);
    }
}

void execute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> arguments) {
    if (scratchpad.get_size() > 0)
        arguments.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad, cpu_engine(),
                                                            scratch(ScratchSlot::scratchpad, scratchpad.get_size())));
    cpu::thread_team();
    primitive.execute(cpu_stream(), arguments);
}

void add_into(float* dst, const float* src, int64_t count) {
    parallel_for(count, 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dst[i] += src[i];
    });
}

}  // namespace onednn
}  // namespace ember::cpu

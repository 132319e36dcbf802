// device_api.h: what a kernel sees when the kernel interpreter compiles it with the
// host compiler (through prelude.h): the thread and block indices, __syncthreads and
// its reductions, the warp intrinsics, atomics, the device math functions that libm
// lacks, shared-memory declarations and the launch object behind EMBER_LAUNCH.
//
// Everything that touches interpreter state is defined out of line (scheduler.cpp,
// memcheck.cpp), in files compiled without the memory-access hooks: only the kernels'
// own loads and stores reach memcheck.cpp.
#pragma once

#include <cuda_runtime.h>
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ember::cuda_interpreter {

// ---- thread geometry ------------------------------------------------------------------
uint3 thread_index();
uint3 block_index();
dim3 block_dim();
dim3 grid_dim();

// ---- block barriers ---------------------------------------------------------------------
enum class BarrierKind : int { plain = 0, count = 1, all = 2, any = 3 };
// Waits until every thread of the block arrives; returns the reduction of `predicate`.
int block_barrier(BarrierKind kind, int predicate, std::source_location where);

// ---- warp collectives --------------------------------------------------------------------
enum class WarpOp : int { sync = 0, shuffle, shuffle_up, shuffle_down, shuffle_xor, ballot, any, all };
// The caller's lane contributes `value` (bits) and `lane_argument`; returns the result the
// operation defines for the caller once every lane named in `mask` has arrived.
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int lane_argument, int width,
                         std::source_location where);
unsigned active_mask();

template <class T>
inline uint64_t to_bits(T value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp exchanges carry up to 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <class T>
inline T from_bits(uint64_t bits) {
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

// ---- shared memory -------------------------------------------------------------------------
// One per EMBER_SHARED declaration site (a function-local static): names the variable
// in reports and keys its per-block storage.
class SharedDeclaration {
  public:
    SharedDeclaration(const char* name, const char* file, int line);
    int id() const { return id_; }

  private:
    int id_;
};
void* shared_storage(const SharedDeclaration& declaration, std::size_t bytes, std::size_t alignment);
void* dynamic_shared_storage();

template <class T>
T& shared_variable(const SharedDeclaration& declaration) {
    // No constructor runs: shared memory is uninitialized on a device, and the
    // interpreter fills it with a NaN pattern and flags reads before the first write.
    return *static_cast<T*>(shared_storage(declaration, sizeof(T), alignof(T)));
}
template <class T>
T* dynamic_shared() {
    return static_cast<T*>(dynamic_shared_storage());
}

// ---- the launch behind EMBER_LAUNCH ----------------------------------------------------------
struct LaunchRequest {
    const char* kernel = nullptr;  // as written at the launch site
    const char* file = nullptr;    // the launch site
    int line = 0;
    dim3 grid, block;
    std::size_t dynamic_shared_bytes = 0;
    cudaStream_t stream = nullptr;
    void (*run_thread)(const void* arguments) = nullptr;  // the kernel body for one thread
    std::shared_ptr<const void> arguments;                // the kernel pointer and its parameters
    std::size_t argument_bytes = 0;
};
// Validates the configuration, runs every block (or records the launch into a
// capturing stream) and leaves the outcome for cudaGetLastError().
void submit_launch(LaunchRequest request);

// The lowered grid-stride cap (0: none); see ember::cuda::grid_stride_blocks.
unsigned grid_stride_cap();

template <class... Params>
class KernelLaunch {
  public:
    using Kernel = void (*)(Params...);
    KernelLaunch(const char* kernel_name, const char* file, int line, Kernel kernel, dim3 grid, dim3 block,
                 std::size_t dynamic_shared_bytes = 0, cudaStream_t stream = nullptr)
        : kernel_(kernel),
          request_{.kernel = kernel_name,
                   .file = file,
                   .line = line,
                   .grid = grid,
                   .block = block,
                   .dynamic_shared_bytes = dynamic_shared_bytes,
                   .stream = stream} {}

    // Arguments are converted to the parameter types and copied, as a launch does.
    template <class... Args>
    void operator()(Args&&... args) {
        static_assert(sizeof...(Args) == sizeof...(Params), "kernel launched with the wrong number of arguments");
        using Stored = std::tuple<Kernel, std::decay_t<Params>...>;
        auto stored = std::make_shared<const Stored>(kernel_, std::forward<Args>(args)...);
        request_.run_thread = [](const void* arguments) {
            std::apply([](Kernel kernel, const auto&... parameters) { kernel(parameters...); },
                       *static_cast<const Stored*>(arguments));
        };
        request_.argument_bytes = sizeof(Stored);
        request_.arguments = std::move(stored);
        submit_launch(std::move(request_));
    }

  private:
    Kernel kernel_;
    LaunchRequest request_;
};

template <class... Params>
KernelLaunch(const char*, const char*, int, void (*)(Params...), dim3, dim3, std::size_t = 0, cudaStream_t = nullptr)
    -> KernelLaunch<Params...>;

// ---- atomics ---------------------------------------------------------------------------------
// Checked like any other access (bounds, and shared memory's initialization state), then
// performed atomically: blocks on different workers really run at once. Each takes the
// value types its CUDA function does; atomics.cpp instantiates exactly those.
template <class T, class... Types>
concept one_of = (std::is_same_v<T, Types> || ...);
template <class T>
concept atomic_add_type = one_of<T, int, unsigned, unsigned long long, float, double>;
template <class T>
concept atomic_exchange_type = one_of<T, int, unsigned, unsigned long long, float>;
template <class T>
concept atomic_compare_exchange_type = one_of<T, int, unsigned, unsigned long long>;
template <class T>
concept atomic_integer_type = one_of<T, int, unsigned>;  // sub, min, max, or, and, xor

template <atomic_add_type T>
T atomic_add(T* address, T value);
template <atomic_exchange_type T>
T atomic_exchange(T* address, T value);
template <atomic_compare_exchange_type T>
T atomic_compare_exchange(T* address, T compare, T value);
template <atomic_integer_type T>
T atomic_min(T* address, T value);
template <atomic_integer_type T>
T atomic_max(T* address, T value);
template <atomic_integer_type T>
T atomic_or(T* address, T value);
template <atomic_integer_type T>
T atomic_and(T* address, T value);
template <atomic_integer_type T>
T atomic_xor(T* address, T value);
void thread_fence();

}  // namespace ember::cuda_interpreter

// ---- the CUDA device API, by its CUDA names ---------------------------------------------------
inline constexpr int warpSize = 32;

inline void __syncthreads(std::source_location where = std::source_location::current()) {
    ember::cuda_interpreter::block_barrier(ember::cuda_interpreter::BarrierKind::plain, 0, where);
}
inline int __syncthreads_count(int predicate, std::source_location where = std::source_location::current()) {
    return ember::cuda_interpreter::block_barrier(ember::cuda_interpreter::BarrierKind::count, predicate != 0, where);
}
inline int __syncthreads_and(int predicate, std::source_location where = std::source_location::current()) {
    return ember::cuda_interpreter::block_barrier(ember::cuda_interpreter::BarrierKind::all, predicate != 0, where);
}
inline int __syncthreads_or(int predicate, std::source_location where = std::source_location::current()) {
    return ember::cuda_interpreter::block_barrier(ember::cuda_interpreter::BarrierKind::any, predicate != 0, where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location where = std::source_location::current()) {
    ember::cuda_interpreter::warp_collective(ember::cuda_interpreter::WarpOp::sync, mask, 0, 0, 32, where);
}
inline unsigned __activemask() {
    return ember::cuda_interpreter::active_mask();
}

namespace ember::cuda_interpreter {
// The four shuffles: `var` from the lane that `op` and `lane` name, within `width`.
template <class T>
inline T shuffle(WarpOp op, unsigned mask, T var, int lane, int width, std::source_location where) {
    return from_bits<T>(warp_collective(op, mask, to_bits(var), lane, width, where));
}
}  // namespace ember::cuda_interpreter

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
                     std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return ci::shuffle(ci::WarpOp::shuffle, mask, var, src_lane, width, where);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                        std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return ci::shuffle(ci::WarpOp::shuffle_up, mask, var, static_cast<int>(delta), width, where);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                          std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return ci::shuffle(ci::WarpOp::shuffle_down, mask, var, static_cast<int>(delta), width, where);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                         std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return ci::shuffle(ci::WarpOp::shuffle_xor, mask, var, lane_mask, width, where);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return static_cast<unsigned>(ci::warp_collective(ci::WarpOp::ballot, mask, predicate != 0, 0, 32, where));
}
inline int __any_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return static_cast<int>(ci::warp_collective(ci::WarpOp::any, mask, predicate != 0, 0, 32, where));
}
inline int __all_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
    namespace ci = ember::cuda_interpreter;
    return static_cast<int>(ci::warp_collective(ci::WarpOp::all, mask, predicate != 0, 0, 32, where));
}

// The value's type is the pointee's (std::type_identity_t): a literal converts, as it
// does to the parameter of the CUDA overload.
template <ember::cuda_interpreter::atomic_add_type T>
inline T atomicAdd(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_add(a, v);
}
template <ember::cuda_interpreter::atomic_integer_type T>
inline T atomicSub(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_add(a, T(0) - v);
}
template <ember::cuda_interpreter::atomic_exchange_type T>
inline T atomicExch(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_exchange(a, v);
}
template <ember::cuda_interpreter::atomic_compare_exchange_type T>
inline T atomicCAS(T* a, std::type_identity_t<T> compare, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_compare_exchange(a, compare, v);
}
template <ember::cuda_interpreter::atomic_integer_type T>
inline T atomicMin(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_min(a, v);
}
template <ember::cuda_interpreter::atomic_integer_type T>
inline T atomicMax(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_max(a, v);
}
template <ember::cuda_interpreter::atomic_integer_type T>
inline T atomicOr(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_or(a, v);
}
template <ember::cuda_interpreter::atomic_integer_type T>
inline T atomicAnd(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_and(a, v);
}
template <ember::cuda_interpreter::atomic_integer_type T>
inline T atomicXor(T* a, std::type_identity_t<T> v) {
    return ember::cuda_interpreter::atomic_xor(a, v);
}
inline void __threadfence() {
    ember::cuda_interpreter::thread_fence();
}
inline void __threadfence_block() {
    ember::cuda_interpreter::thread_fence();
}

// Device math that the C library lacks (the rest, expf, tanhf, fmaxf, ..., is libm's).
// Intrinsics with reduced accuracy on a device compute exactly here: parity tolerances
// cover the difference.
inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
    return 1.0 / sqrt(x);
}
inline float __expf(float x) {
    return expf(x);
}
inline float __logf(float x) {
    return logf(x);
}
inline float __fdividef(float x, float y) {
    return x / y;
}
inline float __saturatef(float x) {
    return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
}
inline float __fmaf_rn(float a, float b, float c) {
    return fmaf(a, b, c);
}
inline int __float_as_int(float x) {
    return ember::cuda_interpreter::from_bits<int>(ember::cuda_interpreter::to_bits(x));
}
inline float __int_as_float(int x) {
    return ember::cuda_interpreter::from_bits<float>(ember::cuda_interpreter::to_bits(x));
}
inline unsigned __float_as_uint(float x) {
    return ember::cuda_interpreter::from_bits<unsigned>(ember::cuda_interpreter::to_bits(x));
}
inline float __uint_as_float(unsigned x) {
    return ember::cuda_interpreter::from_bits<float>(ember::cuda_interpreter::to_bits(x));
}
inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}
inline int __clz(int x) {
    return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}

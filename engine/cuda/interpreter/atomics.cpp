// atomics.cpp: atomicAdd and friends. Blocks run on several workers at once, so these
// are real atomic operations (std::atomic_ref); each is checked first like any other
// access (bounds; in shared memory it counts as a write that races with nothing).
#include "engine/cuda/interpreter/simt.h"

#include <atomic>

namespace ember::cuda_interpreter {

namespace {

template <class T>
std::atomic_ref<T> checked(T* address) {
    detail::check_atomic_access(address, sizeof(T));
    return std::atomic_ref<T>(*address);
}

template <class T, class Update>
T update(T* address, Update next) {
    auto ref = checked(address);
    T old = ref.load();
    while (!ref.compare_exchange_weak(old, next(old))) {
    }
    return old;
}

}  // namespace

template <atomic_add_type T>
T atomic_add(T* a, T v) {
    return checked(a).fetch_add(v);
}
template <atomic_exchange_type T>
T atomic_exchange(T* a, T v) {
    return checked(a).exchange(v);
}
template <atomic_compare_exchange_type T>
T atomic_compare_exchange(T* a, T compare, T v) {
    checked(a).compare_exchange_strong(compare, v);
    return compare;  // the old value either way
}
template <atomic_integer_type T>
T atomic_min(T* a, T v) {
    return update(a, [v](T old) { return old < v ? old : v; });
}
template <atomic_integer_type T>
T atomic_max(T* a, T v) {
    return update(a, [v](T old) { return old > v ? old : v; });
}
template <atomic_integer_type T>
T atomic_or(T* a, T v) {
    return checked(a).fetch_or(v);
}
template <atomic_integer_type T>
T atomic_and(T* a, T v) {
    return checked(a).fetch_and(v);
}
template <atomic_integer_type T>
T atomic_xor(T* a, T v) {
    return checked(a).fetch_xor(v);
}

// Every type each concept in device_api.h admits, instantiated here for the kernels.
template int atomic_add(int*, int);
template unsigned atomic_add(unsigned*, unsigned);
template unsigned long long atomic_add(unsigned long long*, unsigned long long);
template float atomic_add(float*, float);
template double atomic_add(double*, double);
template int atomic_exchange(int*, int);
template unsigned atomic_exchange(unsigned*, unsigned);
template unsigned long long atomic_exchange(unsigned long long*, unsigned long long);
template float atomic_exchange(float*, float);
template int atomic_compare_exchange(int*, int, int);
template unsigned atomic_compare_exchange(unsigned*, unsigned, unsigned);
template unsigned long long atomic_compare_exchange(unsigned long long*, unsigned long long, unsigned long long);
template int atomic_min(int*, int);
template unsigned atomic_min(unsigned*, unsigned);
template int atomic_max(int*, int);
template unsigned atomic_max(unsigned*, unsigned);
template int atomic_or(int*, int);
template unsigned atomic_or(unsigned*, unsigned);
template int atomic_and(int*, int);
template unsigned atomic_and(unsigned*, unsigned);
template int atomic_xor(int*, int);
template unsigned atomic_xor(unsigned*, unsigned);

void thread_fence() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace ember::cuda_interpreter

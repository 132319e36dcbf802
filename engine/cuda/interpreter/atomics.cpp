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

int atomic_add(int* a, int v) {
    return checked(a).fetch_add(v);
}
unsigned atomic_add(unsigned* a, unsigned v) {
    return checked(a).fetch_add(v);
}
unsigned long long atomic_add(unsigned long long* a, unsigned long long v) {
    return checked(a).fetch_add(v);
}
float atomic_add(float* a, float v) {
    return checked(a).fetch_add(v);
}
double atomic_add(double* a, double v) {
    return checked(a).fetch_add(v);
}
int atomic_exchange(int* a, int v) {
    return checked(a).exchange(v);
}
unsigned atomic_exchange(unsigned* a, unsigned v) {
    return checked(a).exchange(v);
}
unsigned long long atomic_exchange(unsigned long long* a, unsigned long long v) {
    return checked(a).exchange(v);
}
float atomic_exchange(float* a, float v) {
    return checked(a).exchange(v);
}

int atomic_compare_exchange(int* a, int compare, int v) {
    checked(a).compare_exchange_strong(compare, v);
    return compare;  // the old value either way
}
unsigned atomic_compare_exchange(unsigned* a, unsigned compare, unsigned v) {
    checked(a).compare_exchange_strong(compare, v);
    return compare;
}
unsigned long long atomic_compare_exchange(unsigned long long* a, unsigned long long compare, unsigned long long v) {
    checked(a).compare_exchange_strong(compare, v);
    return compare;
}

int atomic_min(int* a, int v) {
    return update(a, [v](int old) { return old < v ? old : v; });
}
unsigned atomic_min(unsigned* a, unsigned v) {
    return update(a, [v](unsigned old) { return old < v ? old : v; });
}
int atomic_max(int* a, int v) {
    return update(a, [v](int old) { return old > v ? old : v; });
}
unsigned atomic_max(unsigned* a, unsigned v) {
    return update(a, [v](unsigned old) { return old > v ? old : v; });
}
int atomic_or(int* a, int v) {
    return checked(a).fetch_or(v);
}
unsigned atomic_or(unsigned* a, unsigned v) {
    return checked(a).fetch_or(v);
}
int atomic_and(int* a, int v) {
    return checked(a).fetch_and(v);
}
unsigned atomic_and(unsigned* a, unsigned v) {
    return checked(a).fetch_and(v);
}
int atomic_xor(int* a, int v) {
    return checked(a).fetch_xor(v);
}
unsigned atomic_xor(unsigned* a, unsigned v) {
    return checked(a).fetch_xor(v);
}

void thread_fence() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace ember::cuda_interpreter

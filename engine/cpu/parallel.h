// parallel.h: how the CPU ops split their loops over the OpenMP team (engine/cpu only).
//
// parallel_for(count, grain, body) calls body(begin, end) on contiguous, equal slices of
// [0, count), one per thread, the same slices for the same count and thread count (a
// static schedule). for_slices() does that on the fast path and calls body(0, count)
// once on the reference path (implementation.h), so an op written as a loop over
// slices keeps one copy of its arithmetic: when its iterations write disjoint outputs,
// fast and reference agree bit for bit. Fewer than `grain` iterations per thread would
// not pay for waking a thread (a few microseconds), so small loops use fewer threads or
// run on the caller alone. Bodies must not throw: check arguments before the loop.
#pragma once

#include "engine/core/tensor.h"
#include "engine/cpu/implementation.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace ember::cpu {

// Sizes the calling thread's OpenMP team (oneDNN's threads and the loops below) to
// compute_threads() and returns it. Called before every parallel region and before a
// oneDNN primitive is created (primitives plan their work for the team they see then).
int thread_team();

template <class Body>
void parallel_for(int64_t count, int64_t grain, const Body& body) {
    if (count <= 0) return;
    const int64_t useful = std::max<int64_t>(1, count / std::max<int64_t>(1, grain));
    const int threads = static_cast<int>(std::min<int64_t>(thread_team(), useful));
    if (threads <= 1) {
        body(int64_t{0}, count);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        const int64_t team = omp_get_num_threads(), index = omp_get_thread_num();
        body(count * index / team, count * (index + 1) / team);
    }
}

// The fast path applies: fast implementation selected and every defined tensor f32.
inline bool fast_f32(std::initializer_list<const Tensor*> tensors) {
    if (op_implementation() != OpImplementation::fast) return false;
    for (const Tensor* t : tensors)
        if (t->defined() && t->dtype != DType::f32) return false;
    return true;
}

// Elementwise loops: at least ~16k values (64 KiB of floats) per thread.
constexpr int64_t kElementGrain = 1 << 14;

template <class Body>
void for_slices(int64_t count, int64_t grain, const Body& body) {
    if (op_implementation() == OpImplementation::fast)
        parallel_for(count, grain, body);
    else if (count > 0)
        body(int64_t{0}, count);
}

}  // namespace ember::cpu

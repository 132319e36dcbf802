// onednn.h: what the CPU fast paths share (engine/cpu only, not a public header).
//   - one oneDNN CPU engine and a stream per thread;
//   - Scratch: per-thread, 64-byte aligned buffers that grow to the largest request and
//     are then reused, so a training step allocates nothing once its shapes repeat;
//   - Staged: a tensor in the format a primitive wants - the caller's buffer when the
//     formats agree, else a scratch buffer and a cached reorder;
//   - rethrow(): every oneDNN error becomes a std::runtime_error naming the call and
//     the shapes it was given.
#pragma once

#include "engine/core/tensor.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>

namespace ember::cpu::onednn {

// The hash of a primitive cache's key: its fields combined in order (boost's hash_combine).
inline std::size_t hash_fields(std::initializer_list<int64_t> fields) {
    std::size_t h = 0;
    for (int64_t v : fields) h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();  // one per calling thread

// [[noreturn]]: "oneDNN <call> (<what>): <message> (status <n>)".
[[noreturn]] void rethrow(const char* call, const std::string& what, const dnnl::error& error);

// Per-thread scratch buffers, one per slot, each grown to the largest size asked of it.
// A slot's pointer is valid until the next request of the same slot on this thread.
enum class ScratchSlot : int {
    scratchpad = 0,  // a primitive's own workspace
    activation,      // x (or y) in the primitive's format
    gradient,        // dy in the primitive's format
    filter,          // weights in the primitive's format
    result,          // what the primitive writes, before its reorder into the caller's tensor
    accumulation,    // a result in the caller's format, before it is added (GradWrite::accumulate)
    subsample,       // the pixels a strided 1x1 convolution reads, or their gradient
    count
};
void* scratch(ScratchSlot slot, std::size_t bytes);

// Memory descriptors of ember tensors (f32): 4-D activations nchw/nhwc, filters KCRS
// (oihw) or KRSC (ohwi) as the tensor's layout says, 1-D vectors. An activation with one
// channel or one pixel per image sits in memory the same way in both layouts and is
// described as nhwc, so it needs no reorder into a primitive that computes in nhwc.
dnnl::memory::desc activation_desc(const Tensor& t);
// The same dims, nhwc.
dnnl::memory::desc channels_last_desc(const dnnl::memory::desc& activation);
dnnl::memory::desc filter_desc(const Tensor& t);
dnnl::memory::desc vector_desc(int64_t length);
dnnl::memory::desc with_any_format(const dnnl::memory::desc& desc);

// A tensor as a primitive wants it. `user` is the ember tensor's format, `compute` the
// primitive's; when they differ, the reorders between them are created once here.
struct Staged {
    dnnl::memory::desc user, compute;
    std::optional<dnnl::reorder> to_compute, to_user;

    Staged() = default;
    Staged(const dnnl::memory::desc& user_desc, const dnnl::memory::desc& compute_desc, bool inbound, bool outbound);
    bool reordered() const { return user != compute; }
    // The data in the compute format: `data` itself, or a scratch copy reordered from it.
    dnnl::memory in(void* data, ScratchSlot slot) const;
    // Where the primitive writes: `data` itself, or a scratch buffer to hand to out().
    dnnl::memory target(void* data, ScratchSlot slot) const;
    // Moves a result from target() into `data` (nothing to do when not reordered).
    void out(dnnl::memory computed, void* data) const;
};

// Runs a primitive with the thread team sized and its scratchpad from the scratchpad slot.
void execute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> arguments);

// dst[i] += src[i] (threaded): the accumulate half of GradWrite when a primitive can
// only store.
void add_into(float* dst, const float* src, int64_t count);

}  // namespace ember::cpu::onednn

// cpu_util.h: argument checks and typed access shared by the CPU reference ops.
// The reference computes in double (it is the yardstick for finite differences and
// for the CUDA backend) except where OpenBLAS sgemm is the point (GEMM, conv in f32).
#pragma once

#include "engine/core/tensor.h"
#include "engine/ops/common.h"

#include <string>
#include <vector>

namespace ember::cpu {

inline bool is_float(DType t) {
    return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}

// Every tensor an op touches must be defined, on the CPU and of a float dtype.
inline void check_float_cpu(const Tensor& t, const char* op, const char* name) {
    require(t.defined(), op, std::string(name) + " is undefined");
    require(t.device == Device::cpu, op, std::string(name) + " must be a cpu tensor: " + t.describe());
    require(is_float(t.dtype), op, std::string(name) + " must be a float tensor: " + t.describe());
}

inline void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
    require(same_shape(a, b), op, "shapes differ: " + a.describe() + " vs " + b.describe());
}

inline double get(const Tensor& t, int64_t i) {
    return load_as_double(t.data, t.dtype, i);
}
inline void set(const Tensor& t, int64_t i, double v) {
    store_from_double(t.data, t.dtype, i, v);
}
inline void write(const Tensor& t, int64_t i, double v, ops::GradWrite mode) {
    if (mode == ops::GradWrite::accumulate) v += get(t, i);
    set(t, i, v);
}

// Element offset of (n, c, spatial s) in a (N,C) or (N,C,H,W) tensor of either layout.
inline int64_t channel_offset(const Tensor& t, int64_t n, int64_t c, int64_t s) {
    if (t.rank == 2) return n * t.shape[1] + c;
    return t.offset4(n, c, s / t.shape[3], s % t.shape[3]);
}

// True when every tensor is f32: ops then take a plain-pointer loop (the training
// case on the CPU) instead of per-element dtype dispatch.
inline bool all_f32(std::initializer_list<const Tensor*> tensors) {
    for (const Tensor* t : tensors)
        if (t->defined() && t->dtype != DType::f32) return false;
    return true;
}

// `count` consecutive elements of t starting at element `first`, as double. The
// channels-last loops read one row of C channels at a time through this; f32 (the
// training case) is a plain converting loop, other dtypes go through get().
inline void load_row(const Tensor& t, int64_t first, int64_t count, double* out) {
    if (t.dtype == DType::f32) {
        const float* in = t.as<float>() + first;
        for (int64_t i = 0; i < count; ++i) out[i] = in[i];
        return;
    }
    for (int64_t i = 0; i < count; ++i) out[i] = get(t, first + i);
}

// Writes (store or +=) `count` doubles to consecutive elements of t from `first`,
// rounding as write() does: the old value is added in double, then stored.
inline void store_row(const Tensor& t, int64_t first, int64_t count, const double* values, ops::GradWrite mode) {
    if (t.dtype == DType::f32) {
        float* out = t.as<float>() + first;
        if (mode == ops::GradWrite::accumulate)
            for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(out[i] + values[i]);
        else
            for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(values[i]);
        return;
    }
    for (int64_t i = 0; i < count; ++i) write(t, first + i, values[i], mode);
}

// A 4-D tensor's values in logical NCHW order, as T (for im2col/GEMM paths).
template <class T>
std::vector<T> load_nchw(const Tensor& t) {
    std::vector<T> out(static_cast<std::size_t>(t.numel()));
    int64_t N = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
    if (t.layout == Layout::nchw && t.dtype == DType::f32 && sizeof(T) == 4) {
        const float* src = t.as<float>();
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(src[i]);
        return out;
    }
    if (t.layout == Layout::nhwc && t.dtype == DType::f32) {
        // Channels-last f32: a transpose of each image's [HW, C] block to [C, HW].
        const float* src = t.as<float>();
        const int64_t spatial = H * W;
        for (int64_t n = 0; n < N; ++n) {
            const float* image = src + n * spatial * C;
            T* target = out.data() + n * C * spatial;
            for (int64_t s = 0; s < spatial; ++s)
                for (int64_t c = 0; c < C; ++c) target[c * spatial + s] = static_cast<T>(image[s * C + c]);
        }
        return out;
    }
    std::size_t i = 0;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t w = 0; w < W; ++w) out[i++] = static_cast<T>(get(t, t.offset4(n, c, h, w)));
    return out;
}

// Writes NCHW-ordered values into a 4-D tensor of any layout/dtype (store or +=).
template <class T>
void store_nchw(const std::vector<T>& values, const Tensor& t, ops::GradWrite mode) {
    if (t.layout == Layout::nchw && t.dtype == DType::f32) {  // the common case, no index math
        float* out = t.as<float>();
        const std::size_t n = values.size();
        if (mode == ops::GradWrite::accumulate)
            for (std::size_t i = 0; i < n; ++i) out[i] += static_cast<float>(values[i]);
        else
            for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(values[i]);
        return;
    }
    int64_t N = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
    if (t.layout == Layout::nhwc && t.dtype == DType::f32) {
        // Channels-last f32: each image's [C, HW] values transposed into its [HW, C] block.
        float* out = t.as<float>();
        const int64_t spatial = H * W;
        const bool accumulate = mode == ops::GradWrite::accumulate;
        for (int64_t n = 0; n < N; ++n) {
            float* image = out + n * spatial * C;
            const T* source = values.data() + n * C * spatial;
            for (int64_t s = 0; s < spatial; ++s)
                for (int64_t c = 0; c < C; ++c) {
                    const float value = static_cast<float>(source[c * spatial + s]);
                    image[s * C + c] = accumulate ? image[s * C + c] + value : value;
                }
        }
        return;
    }
    std::size_t i = 0;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t w = 0; w < W; ++w) write(t, t.offset4(n, c, h, w), static_cast<double>(values[i++]), mode);
}

}  // namespace ember::cpu

// onednn_conv.cpp: the fast path of the CPU convolution (f32, nchw or nhwc): oneDNN
// convolution primitives for forward, backward-data and backward-weights, created once
// per shape and cached with the reorders between the caller's layout and the formats
// the primitives compute in. conv.cpp calls these for f32 tensors; its im2col + sgemm
// loops stay the reference.
//
// The primitives compute in nhwc whatever the caller's layout: nchw tensors are reordered
// in and out (a copy each way), filters are reordered to the primitive's choice. Measured
// on cpu2 (AVX-512, 2 threads, batch 128, best of 15, one sitting; ms forward /
// backward-data / backward-weights, reorders included):
//                                   16->16 3x3 28x28    32->32 3x3 14x14    64->64 3x3 7x7
//   nchw as given (im2col + GEMM)   4.78 / 7.22 / 10.4  3.36 / 4.18 / 3.47  2.88 / 3.06 / 2.70
//   nchw via blocked nChw16c        1.56 / 1.69 / 1.64  1.31 / 1.46 / 1.27  1.13 / 1.20 / 1.28
//   nchw via nhwc                   1.72 / 1.72 / 1.53  1.29 / 1.59 / 1.26  1.18 / 1.36 / 1.16
//   nhwc as given                   1.26 / 1.20 / 1.06  1.02 / 1.20 / 1.00  1.02 / 1.10 / 1.06
// The blocked format and nhwc cost about the same for nchw callers; going through nhwc
// keeps the two layouts bit-identical (the same primitive sees the same values), and
// channels-last models skip the reorders altogether.
//
// A 1x1 convolution with a stride or padding never reaches oneDNN as such: ember gathers
// the pixels it reads and hands oneDNN the unit-stride 1x1 convolution of that subsample
// (see "Strided 1x1 convolutions" below for why).
#include "engine/cpu/implementation.h"
#include "engine/cpu/onednn.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/parallel.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

namespace ember::cpu {
namespace {

using onednn::ScratchSlot;
using onednn::Staged;

enum class Direction : uint8_t { forward, backward_data, backward_weights };

struct ConvKey {
    int64_t n, c, h, w, k, r, s, p, q;
    int stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
    Layout layout;
    bool bias;
    Direction direction;
    int threads;  // a primitive splits its work for the team it was created with
    bool operator==(const ConvKey&) const = default;
};

struct ConvKeyHash {
    std::size_t operator()(const ConvKey& key) const {
        return onednn::hash_fields({key.n, key.c, key.h, key.w, key.k, key.r, key.s, key.p, key.q, key.stride_h,
                                    key.stride_w, key.pad_h, key.pad_w, key.dilation_h, key.dilation_w,
                                    static_cast<int64_t>(key.layout), key.bias, static_cast<int64_t>(key.direction),
                                    key.threads});
    }
};

// One direction of one convolution shape: its primitive and how each tensor gets into
// (and out of) the primitive's formats.
struct ConvPlan {
    dnnl::primitive primitive;
    dnnl::memory::desc scratchpad;
    Staged activation;  // x: forward and backward-weights
    Staged gradient;    // dy: both backward directions
    Staged filter;      // weights (forward, backward-data) or their gradient (backward-weights)
    Staged output;      // y (forward) or dx (backward-data)
    std::string implementation;
};

std::string describe(const ConvKey& key) {
    return "x [" + std::to_string(key.n) + "," + std::to_string(key.c) + "," + std::to_string(key.h) + "," +
           std::to_string(key.w) + "] " + (key.layout == Layout::nhwc ? "nhwc" : "nchw") + ", weight [" +
           std::to_string(key.k) + "," + std::to_string(key.c) + "," + std::to_string(key.r) + "," +
           std::to_string(key.s) + "], y [" + std::to_string(key.n) + "," + std::to_string(key.k) + "," +
           std::to_string(key.p) + "," + std::to_string(key.q) + "], stride " + std::to_string(key.stride_h) + "x" +
           std::to_string(key.stride_w) + ", pad " + std::to_string(key.pad_h) + "x" + std::to_string(key.pad_w) +
           ", dilation " + std::to_string(key.dilation_h) + "x" + std::to_string(key.dilation_w) +
           (key.bias ? ", bias" : "") + ", " + std::to_string(key.threads) + " threads";
}

// The primitive a primitive descriptor makes, with its scratchpad and implementation name.
template <class Primitive, class PrimitiveDesc>
void adopt(ConvPlan& plan, const PrimitiveDesc& desc) {
    plan.primitive = Primitive(desc);
    plan.scratchpad = desc.scratchpad_desc();
    plan.implementation = desc.impl_info_str();
}

std::unique_ptr<ConvPlan> make_plan(const ConvKey& key, const dnnl::memory::desc& x_user,
                                    const dnnl::memory::desc& w_user, const dnnl::memory::desc& y_user) {
    using dnnl::memory;
    const memory::desc x_compute = onednn::channels_last_desc(x_user);
    const memory::desc y_compute = onednn::channels_last_desc(y_user);
    const memory::desc w_any = onednn::with_any_format(w_user);
    const memory::desc bias_desc = key.bias ? onednn::vector_desc(key.k) : memory::desc();
    // oneDNN counts dilation from 0 and takes the right padding the output actually
    // reaches (ember's output size rounds down, as nn.Conv2d's): no columns the kernels
    // would compute and throw away, and never below zero.
    const memory::dims strides{key.stride_h, key.stride_w};
    const memory::dims dilates{key.dilation_h - 1, key.dilation_w - 1};
    const memory::dims pad_left{key.pad_h, key.pad_w};
    auto right_padding = [](int64_t in, int64_t out, int64_t kernel, int stride, int pad, int dilation) {
        return std::max<int64_t>(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - in - pad);
    };
    const memory::dims pad_right{right_padding(key.h, key.p, key.r, key.stride_h, key.pad_h, key.dilation_h),
                                 right_padding(key.w, key.q, key.s, key.stride_w, key.pad_w, key.dilation_w)};
    dnnl::primitive_attr attributes;
    attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto plan = std::make_unique<ConvPlan>();
    const char* call = "convolution_forward::primitive_desc";
    try {
        dnnl::convolution_forward::desc forward_desc(dnnl::prop_kind::forward_training,
                                                     dnnl::algorithm::convolution_direct, x_compute, w_any, bias_desc,
                                                     y_compute, strides, dilates, pad_left, pad_right);
        dnnl::convolution_forward::primitive_desc forward(forward_desc, attributes, onednn::cpu_engine());
        // A backward direction's primitive descriptor, with the forward one as its hint.
        auto backward_desc = [&]<class Backward>(std::type_identity<Backward>) {
            typename Backward::desc desc(dnnl::algorithm::convolution_direct, x_compute, w_any, y_compute, strides,
                                         dilates, pad_left, pad_right);
            return typename Backward::primitive_desc(desc, attributes, onednn::cpu_engine(), forward);
        };
        switch (key.direction) {
            case Direction::forward:
                adopt<dnnl::convolution_forward>(*plan, forward);
                plan->activation = Staged(x_user, forward.src_desc(), true, false);
                plan->filter = Staged(w_user, forward.weights_desc(), true, false);
                plan->output = Staged(y_user, forward.dst_desc(), false, true);
                break;
            case Direction::backward_data: {
                call = "convolution_backward_data::primitive_desc";
                const auto data = backward_desc(std::type_identity<dnnl::convolution_backward_data>{});
                adopt<dnnl::convolution_backward_data>(*plan, data);
                plan->gradient = Staged(y_user, data.diff_dst_desc(), true, false);
                plan->filter = Staged(w_user, data.weights_desc(), true, false);
                plan->output = Staged(x_user, data.diff_src_desc(), false, true);
                break;
            }
            case Direction::backward_weights: {
                call = "convolution_backward_weights::primitive_desc";
                const auto weights = backward_desc(std::type_identity<dnnl::convolution_backward_weights>{});
                adopt<dnnl::convolution_backward_weights>(*plan, weights);
                plan->activation = Staged(x_user, weights.src_desc(), true, false);
                plan->gradient = Staged(y_user, weights.diff_dst_desc(), true, false);
                plan->filter = Staged(w_user, weights.diff_weights_desc(), false, true);
                break;
            }
        }
    } catch (const dnnl::error& e) {
        onednn::rethrow(call, describe(key), e);
    }
    return plan;
}

// Plans live for the process: a model has a handful of convolution shapes.
const ConvPlan& plan_for(const ConvKey& key, const Tensor& x, const Tensor& weight, const Tensor& y) {
    static std::mutex mutex;
    static std::unordered_map<ConvKey, std::unique_ptr<ConvPlan>, ConvKeyHash> plans;
    std::lock_guard<std::mutex> lock(mutex);
    auto found = plans.find(key);
    if (found != plans.end()) return *found->second;
    auto plan = make_plan(key, onednn::activation_desc(x), onednn::filter_desc(weight), onednn::activation_desc(y));
    return *plans.emplace(key, std::move(plan)).first->second;
}

ConvKey conv_key(const Tensor& x, const Tensor& weight, const Tensor& y, const ops::Conv2dParams& params, bool bias,
                 Direction direction) {
    return {x.shape[0],
            x.shape[1],
            x.shape[2],
            x.shape[3],
            weight.shape[0],
            weight.shape[2],
            weight.shape[3],
            y.shape[2],
            y.shape[3],
            params.stride_h,
            params.stride_w,
            params.pad_h,
            params.pad_w,
            params.dilation_h,
            params.dilation_w,
            x.layout,
            bias,
            direction,
            thread_team()};
}

// Runs `plan` writing into `data` (store), or into a scratch tensor that is then added
// to `data` (accumulate): the primitives only overwrite.
template <class Run>
void write_output(const Staged& staged, void* data, int64_t count, ops::GradWrite write, Run run) {
    void* destination = data;
    if (write == ops::GradWrite::accumulate)
        destination = onednn::scratch(ScratchSlot::accumulation, static_cast<std::size_t>(count) * sizeof(float));
    dnnl::memory target = staged.target(destination, ScratchSlot::result);
    run(target);
    staged.out(target, destination);
    if (write == ops::GradWrite::accumulate)
        onednn::add_into(static_cast<float*>(data), static_cast<const float*>(destination), count);
}

// ---------------------------------------------------------------------------------------
// Strided 1x1 convolutions
// ---------------------------------------------------------------------------------------
// A 1x1 convolution with stride (sh, sw) and padding (ph, pw) reads pixel
// (p sh - ph, q sw - pw) for output (p, q), and nothing else: it is the unit-stride,
// unpadded 1x1 convolution of that subsample. oneDNN's jit_1x1 kernels make the subsample
// themselves ("reduce to unit stride") in a workspace of the scratchpad, and in oneDNN
// 2.6 backward-weights sizes that workspace for the tensor's channels while the kernel
// writes whole channel blocks (8 on AVX2, 16 on AVX-512) for nhwc data: with fewer
// channels than a block (ResNet's 4->8 shortcut) it writes past the scratchpad. On AVX2
// that gave a filter gradient off by its whole size, endless loops inside the JIT kernel
// and a corrupted heap (malloc aborting in a later dnnl_primitive_create); on AVX-512 the
// same shapes with 8 to 15 channels crash. So ember gathers the subsample itself, in the
// caller's layout, and oneDNN only ever sees unit strides and no padding for 1x1 kernels;
// the gather costs one read of a quarter of x (stride 2), as oneDNN's own copy did.

bool is_strided_pointwise(const Tensor& weight, const ops::Conv2dParams& params) {
    return weight.shape[2] == 1 && weight.shape[3] == 1 &&
           (params.stride_h != 1 || params.stride_w != 1 || params.pad_h != 0 || params.pad_w != 0);
}

// A [N, C, P, Q] f32 tensor in `layout`, in this thread's subsample scratch buffer.
Tensor subsample_tensor(int64_t n, int64_t c, int64_t p, int64_t q, Layout layout) {
    void* data = onednn::scratch(ScratchSlot::subsample, static_cast<std::size_t>(n * c * p * q) * sizeof(float));
    return make_tensor(data, DType::f32, {n, c, p, q}, Device::cpu, layout);
}

// The pixels a strided 1x1 convolution reads: x [N, C, H, W] -> [N, C, P, Q] in x's
// layout, zero where the padding is read.
Tensor gather_subsample(const Tensor& x, const ops::Conv2dParams& params, int64_t p_size, int64_t q_size) {
    const int64_t n_size = x.shape[0], c_size = x.shape[1], h_size = x.shape[2], w_size = x.shape[3];
    Tensor sub = subsample_tensor(n_size, c_size, p_size, q_size, x.layout);
    const float* in = x.as<float>();
    float* out = sub.as<float>();
    if (x.layout == Layout::nhwc) {
        // One row of C channels per output pixel.
        parallel_for(n_size * p_size, 16, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const int64_t n = row / p_size, p = row % p_size, h = p * params.stride_h - params.pad_h;
                float* destination = out + row * q_size * c_size;
                for (int64_t q = 0; q < q_size; ++q, destination += c_size) {
                    const int64_t w = q * params.stride_w - params.pad_w;
                    if (h < 0 || h >= h_size || w < 0 || w >= w_size)
                        std::fill(destination, destination + c_size, 0.0f);
                    else
                        std::copy_n(in + ((n * h_size + h) * w_size + w) * c_size, c_size, destination);
                }
            }
        });
    } else {
        // One output row of Q pixels per (n, c, p).
        parallel_for(n_size * c_size * p_size, 64, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const int64_t plane = row / p_size, p = row % p_size, h = p * params.stride_h - params.pad_h;
                float* destination = out + row * q_size;
                const float* source = in + plane * h_size * w_size + h * w_size;
                for (int64_t q = 0; q < q_size; ++q) {
                    const int64_t w = q * params.stride_w - params.pad_w;
                    destination[q] = h < 0 || h >= h_size || w < 0 || w >= w_size ? 0.0f : source[w];
                }
            }
        });
    }
    return sub;
}

// The inverse: dx from the subsample's gradient, zero (store) or unchanged (accumulate)
// at the pixels the convolution never reads.
void scatter_subsample(const Tensor& sub, const Tensor& dx, const ops::Conv2dParams& params, ops::GradWrite write) {
    const int64_t c_size = dx.shape[1], h_size = dx.shape[2], w_size = dx.shape[3], p_size = sub.shape[2],
                  q_size = sub.shape[3];
    const bool accumulate = write == ops::GradWrite::accumulate;
    // The subsample pixel that dx pixel (h, w) is, or -1.
    auto source_index = [](int64_t x, int stride, int pad, int64_t size) -> int64_t {
        const int64_t shifted = x + pad;
        if (shifted % stride != 0 || shifted / stride >= size) return -1;
        return shifted / stride;
    };
    const float* in = sub.as<float>();
    float* out = dx.as<float>();
    if (dx.layout == Layout::nhwc) {
        parallel_for(dx.shape[0] * h_size, 16, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const int64_t n = row / h_size, h = row % h_size;
                const int64_t p = source_index(h, params.stride_h, params.pad_h, p_size);
                float* destination = out + row * w_size * c_size;
                for (int64_t w = 0; w < w_size; ++w, destination += c_size) {
                    const int64_t q = p < 0 ? -1 : source_index(w, params.stride_w, params.pad_w, q_size);
                    const float* source = q < 0 ? nullptr : in + ((n * p_size + p) * q_size + q) * c_size;
                    if (accumulate) {
                        if (source != nullptr)
                            for (int64_t c = 0; c < c_size; ++c) destination[c] += source[c];
                    } else if (source != nullptr) {
                        std::copy_n(source, c_size, destination);
                    } else {
                        std::fill(destination, destination + c_size, 0.0f);
                    }
                }
            }
        });
    } else {
        parallel_for(dx.shape[0] * c_size * h_size, 64, [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
                const int64_t plane = row / h_size, h = row % h_size;
                const int64_t p = source_index(h, params.stride_h, params.pad_h, p_size);
                float* destination = out + row * w_size;
                const float* source = p < 0 ? nullptr : in + (plane * p_size + p) * q_size;
                for (int64_t w = 0; w < w_size; ++w) {
                    const int64_t q = source == nullptr ? -1 : source_index(w, params.stride_w, params.pad_w, q_size);
                    const float value = q < 0 ? 0.0f : source[q];
                    destination[w] = accumulate ? destination[w] + value : value;
                }
            }
        });
    }
}

ops::Conv2dParams unit_stride() {
    return {};
}

}  // namespace

void onednn_conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                           const ops::Conv2dParams& params) {
    if (is_strided_pointwise(weight, params))
        return onednn_conv2d_forward(gather_subsample(x, params, y.shape[2], y.shape[3]), weight, bias, y,
                                     unit_stride());
    const ConvKey key = conv_key(x, weight, y, params, bias.defined(), Direction::forward);
    const ConvPlan& plan = plan_for(key, x, weight, y);
    try {
        dnnl::memory x_memory = plan.activation.in(x.data, ScratchSlot::activation);
        dnnl::memory w_memory = plan.filter.in(weight.data, ScratchSlot::filter);
        write_output(plan.output, y.data, y.numel(), ops::GradWrite::store, [&](dnnl::memory& y_memory) {
            std::unordered_map<int, dnnl::memory> arguments{
                {DNNL_ARG_SRC, x_memory}, {DNNL_ARG_WEIGHTS, w_memory}, {DNNL_ARG_DST, y_memory}};
            if (bias.defined())
                arguments.emplace(DNNL_ARG_BIAS,
                                  dnnl::memory(onednn::vector_desc(key.k), onednn::cpu_engine(), bias.data));
            onednn::execute(plan.primitive, plan.scratchpad, std::move(arguments));
        });
    } catch (const dnnl::error& e) {
        onednn::rethrow("convolution_forward::execute", describe(key) + ", " + plan.implementation, e);
    }
}

void onednn_conv2d_backward_data(const Tensor& weight, const Tensor& dy, const Tensor& dx,
                                 const ops::Conv2dParams& params, ops::GradWrite write) {
    if (is_strided_pointwise(weight, params)) {
        Tensor sub = subsample_tensor(dx.shape[0], dx.shape[1], dy.shape[2], dy.shape[3], dx.layout);
        onednn_conv2d_backward_data(weight, dy, sub, unit_stride(), ops::GradWrite::store);
        scatter_subsample(sub, dx, params, write);
        return;
    }
    const ConvKey key = conv_key(dx, weight, dy, params, false, Direction::backward_data);
    const ConvPlan& plan = plan_for(key, dx, weight, dy);
    try {
        dnnl::memory dy_memory = plan.gradient.in(dy.data, ScratchSlot::gradient);
        dnnl::memory w_memory = plan.filter.in(weight.data, ScratchSlot::filter);
        write_output(plan.output, dx.data, dx.numel(), write, [&](dnnl::memory& dx_memory) {
            onednn::execute(
                plan.primitive, plan.scratchpad,
                {{DNNL_ARG_DIFF_DST, dy_memory}, {DNNL_ARG_WEIGHTS, w_memory}, {DNNL_ARG_DIFF_SRC, dx_memory}});
        });
    } catch (const dnnl::error& e) {
        onednn::rethrow("convolution_backward_data::execute", describe(key) + ", " + plan.implementation, e);
    }
}

void onednn_conv2d_backward_filter(const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                   const ops::Conv2dParams& params, ops::GradWrite write) {
    if (is_strided_pointwise(dweight, params))
        return onednn_conv2d_backward_filter(gather_subsample(x, params, dy.shape[2], dy.shape[3]), dy, dweight,
                                             unit_stride(), write);
    const ConvKey key = conv_key(x, dweight, dy, params, false, Direction::backward_weights);
    const ConvPlan& plan = plan_for(key, x, dweight, dy);
    try {
        dnnl::memory x_memory = plan.activation.in(x.data, ScratchSlot::activation);
        dnnl::memory dy_memory = plan.gradient.in(dy.data, ScratchSlot::gradient);
        write_output(plan.filter, dweight.data, dweight.numel(), write, [&](dnnl::memory& dw_memory) {
            onednn::execute(
                plan.primitive, plan.scratchpad,
                {{DNNL_ARG_SRC, x_memory}, {DNNL_ARG_DIFF_DST, dy_memory}, {DNNL_ARG_DIFF_WEIGHTS, dw_memory}});
        });
    } catch (const dnnl::error& e) {
        onednn::rethrow("convolution_backward_weights::execute", describe(key) + ", " + plan.implementation, e);
    }
}

}  // namespace ember::cpu

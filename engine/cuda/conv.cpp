// conv.cpp: cuDNN convolution forward / backward-data / backward-filter with the
// algorithm chosen through the context's ConvAlgoCache (benchmark or heuristics),
// fp32 accumulation (CUDNN_DATA_FLOAT compute) and TF32 only when allowed.
#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/cuda/context.h"
#include "engine/cuda/conv_autotune.h"
#include "engine/ops/conv.h"

#include <cudnn.h>

#include <string>
#include <vector>

namespace ember::ops {

// Per-channel bias add and bias gradient kernels (conv_bias.cu).
void conv_bias_add_cuda(CudaContext& ctx, const Tensor& bias, const Tensor& y);

namespace {

cudnnDataType_t cudnn_type(DType t) {
    switch (t) {
        case DType::f32:
            return CUDNN_DATA_FLOAT;
        case DType::f16:
            return CUDNN_DATA_HALF;
        case DType::bf16:
            return CUDNN_DATA_BFLOAT16;
        default:
            break;
    }
    throw std::invalid_argument(std::string("conv2d_cuda: unsupported dtype ") + dtype_name(t));
}

cudnnTensorFormat_t cudnn_format(Layout l) {
    return l == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// The three descriptors of one convolution, destroyed on every exit path.
struct ConvDescriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    ConvAlgoKey key{};
    bool strict_fp32 = false;

    ConvDescriptors(CudaContext& ctx, ConvDirection direction, const Tensor& x_t, const Tensor& w_t, const Tensor& y_t,
                    const Conv2dParams& p) {
        const char* op = "conv2d_cuda";
        for (const Tensor* t : {&x_t, &w_t, &y_t})
            require(t->defined() && t->device == Device::cuda && t->rank == 4, op,
                    "x, weight and y must be 4-D cuda tensors");
        require(x_t.dtype == w_t.dtype && x_t.dtype == y_t.dtype, op, "x, weight and y dtypes differ");
        require(x_t.layout == w_t.layout && x_t.layout == y_t.layout, op, "x, weight and y layouts differ");
        require(w_t.shape[1] == x_t.shape[1], op, "weight channels differ from x");
        const int64_t p_out = conv_output_size(x_t.shape[2], w_t.shape[2], p.stride_h, p.pad_h, p.dilation_h);
        const int64_t q_out = conv_output_size(x_t.shape[3], w_t.shape[3], p.stride_w, p.pad_w, p.dilation_w);
        require(y_t.shape[0] == x_t.shape[0] && y_t.shape[1] == w_t.shape[0] && y_t.shape[2] == p_out &&
                    y_t.shape[3] == q_out,
                op, "output shape mismatch: " + y_t.describe());
        const cudnnDataType_t type = cudnn_type(x_t.dtype);
        const cudnnTensorFormat_t format = cudnn_format(x_t.layout);
        EMBER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
        EMBER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
        EMBER_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
        EMBER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
        EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, format, type, int(x_t.shape[0]), int(x_t.shape[1]),
                                                     int(x_t.shape[2]), int(x_t.shape[3])));
        EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, format, type, int(y_t.shape[0]), int(y_t.shape[1]),
                                                     int(y_t.shape[2]), int(y_t.shape[3])));
        EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, type, format, int(w_t.shape[0]), int(w_t.shape[1]),
                                                     int(w_t.shape[2]), int(w_t.shape[3])));
        EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                                                          p.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        strict_fp32 = x_t.dtype == DType::f32 && !ctx.allow_tf32;
        cudnnMathType_t math = strict_fp32               ? CUDNN_FMA_MATH
                               : x_t.dtype == DType::f32 ? CUDNN_DEFAULT_MATH
                                                         : CUDNN_TENSOR_OP_MATH;
        EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
        key.direction = direction;
        key.benchmark = ctx.cudnn_benchmark;
        key.deterministic = ctx.deterministic;
        key.fields = {x_t.shape[0], x_t.shape[1],       x_t.shape[2],        x_t.shape[3], w_t.shape[0], w_t.shape[2],
                      w_t.shape[3], p.stride_h,         p.stride_w,          p.pad_h,      p.pad_w,      p.dilation_h,
                      p.dilation_w, int64_t(x_t.dtype), int64_t(x_t.layout), int64_t(math)};
    }
    ~ConvDescriptors() {
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (x) cudnnDestroyTensorDescriptor(x);
    }
    ConvDescriptors(const ConvDescriptors&) = delete;
    ConvDescriptors& operator=(const ConvDescriptors&) = delete;
};

// First result that succeeded and fits the workspace (cuDNN sorts by time or by
// expected speed); under `deterministic`, the first of those that cuDNN marks
// CUDNN_DETERMINISTIC (some backward-filter algorithms add partial sums with atomics,
// so two runs differ in the last bits).
template <class Perf>
ConvAlgoChoice pick(const std::vector<Perf>& results, int count, std::size_t workspace_limit, bool timed,
                    bool deterministic, const char* what) {
    for (int i = 0; i < count; ++i) {
        if (results[i].status != CUDNN_STATUS_SUCCESS || results[i].memory > workspace_limit) continue;
        if (deterministic && results[i].determinism != CUDNN_DETERMINISTIC) continue;
        ConvAlgoChoice choice;
        choice.algorithm = static_cast<int>(results[i].algo);
        choice.workspace_bytes = results[i].memory;
        choice.time_ms = timed ? results[i].time : -1.0f;
        choice.tensor_ops = results[i].mathType == CUDNN_TENSOR_OP_MATH;
        return choice;
    }
    throw std::runtime_error(std::string(what) + ": cuDNN found no usable " + (deterministic ? "deterministic " : "") +
                             "algorithm within " + std::to_string(workspace_limit) + " workspace bytes");
}

// Scratch output for cudnnFind*Ex, which writes its output while timing: the real
// output may hold gradients to accumulate into.
struct FindScratch {
    Buffer buffer;
    explicit FindScratch(std::size_t bytes) : buffer(device_allocator(), bytes) {}
};

void apply_math_type(const ConvDescriptors& d, const ConvAlgoChoice& choice) {
    if (d.strict_fp32) return;  // stays CUDNN_FMA_MATH: no TF32 sneaking in
    EMBER_CUDNN_CHECK(
        cudnnSetConvolutionMathType(d.conv, choice.tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH));
}

// The algorithm for d's shape: from the cache, or searched once and cached. The search
// is the same for the three directions: cudnnFind*Ex (`find`, timed, writing into
// scratch output of scratch_bytes) under cudnn_benchmark, cuDNN's heuristics
// (`get`, cudnnGet*Algorithm_v7) otherwise; then the first usable result. The
// convolution's math type is set to match the choice.
template <class Perf, class Find, class Get>
const ConvAlgoChoice& choose_algorithm(CudaContext& ctx, const ConvDescriptors& d, int algo_count,
                                       std::size_t scratch_bytes, const char* what, Find find, Get get) {
    const ConvAlgoChoice* cached = ctx.conv_algorithms->find(d.key);
    if (!cached) {
        ctx.conv_algorithms->count_search();
        std::vector<Perf> results(algo_count);
        int count = 0;
        if (ctx.cudnn_benchmark) {
            FindScratch scratch(scratch_bytes);
            find(scratch.buffer.data(), algo_count, &count, results.data());
        } else {
            get(algo_count, &count, results.data());
        }
        ctx.conv_algorithms->insert(
            d.key, pick(results, count, ctx.workspace_bytes, ctx.cudnn_benchmark, ctx.deterministic, what));
        cached = ctx.conv_algorithms->find(d.key);
    }
    apply_math_type(d, *cached);
    return *cached;
}

}  // namespace

void conv2d_forward_cuda(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                         const Conv2dParams& params) {
    ConvDescriptors d(ctx, ConvDirection::forward, x, weight, y, params);
    const ConvAlgoChoice& chosen = choose_algorithm<cudnnConvolutionFwdAlgoPerf_t>(
        ctx, d, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, y.bytes(), "conv2d_forward_cuda",
        [&](void* scratch, int n, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
            EMBER_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(ctx.cudnn, d.x, x.data, d.w, weight.data, d.conv,
                                                                     d.y, scratch, n, count, results, ctx.workspace,
                                                                     ctx.workspace_bytes));
        },
        [&](int n, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
            EMBER_CUDNN_CHECK(
                cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn, d.x, d.w, d.conv, d.y, n, count, results));
        });
    const float alpha = 1.0f, beta = 0.0f;
    EMBER_CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn, &alpha, d.x, x.data, d.w, weight.data, d.conv,
                                              static_cast<cudnnConvolutionFwdAlgo_t>(chosen.algorithm), ctx.workspace,
                                              ctx.workspace_bytes, &beta, d.y, y.data));
    if (bias.defined()) conv_bias_add_cuda(ctx, bias, y);
}

void conv2d_backward_data_cuda(CudaContext& ctx, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                               const Conv2dParams& params, GradWrite write) {
    ConvDescriptors d(ctx, ConvDirection::backward_data, dx, weight, dy, params);
    const ConvAlgoChoice& chosen = choose_algorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
        ctx, d, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, dx.bytes(), "conv2d_backward_data_cuda",
        [&](void* scratch, int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
            EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.cudnn, d.w, weight.data, d.y, dy.data,
                                                                          d.conv, d.x, scratch, n, count, results,
                                                                          ctx.workspace, ctx.workspace_bytes));
        },
        [&](int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
            EMBER_CUDNN_CHECK(
                cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn, d.w, d.y, d.conv, d.x, n, count, results));
        });
    const float alpha = 1.0f, beta = write == GradWrite::accumulate ? 1.0f : 0.0f;
    EMBER_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn, &alpha, d.w, weight.data, d.y, dy.data, d.conv,
                                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(chosen.algorithm),
                                                   ctx.workspace, ctx.workspace_bytes, &beta, d.x, dx.data));
}

void conv2d_backward_filter_cuda(CudaContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                 const Conv2dParams& params, GradWrite write) {
    ConvDescriptors d(ctx, ConvDirection::backward_filter, x, dweight, dy, params);
    const ConvAlgoChoice& chosen = choose_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
        ctx, d, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, dweight.bytes(), "conv2d_backward_filter_cuda",
        [&](void* scratch, int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
            EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.cudnn, d.x, x.data, d.y, dy.data,
                                                                            d.conv, d.w, scratch, n, count, results,
                                                                            ctx.workspace, ctx.workspace_bytes));
        },
        [&](int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
            EMBER_CUDNN_CHECK(
                cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn, d.x, d.y, d.conv, d.w, n, count, results));
        });
    const float alpha = 1.0f, beta = write == GradWrite::accumulate ? 1.0f : 0.0f;
    EMBER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn, &alpha, d.x, x.data, d.y, dy.data, d.conv,
                                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(chosen.algorithm),
                                                     ctx.workspace, ctx.workspace_bytes, &beta, d.w, dweight.data));
}

}  // namespace ember::ops

// cudnn_autotune: what `torch.backends.cudnn.benchmark = True` buys. One convolution
// (64 filters 3x3, batch 32, 64 channels, 64x64 input, padding 1) run with the
// algorithm cuDNN's heuristics pick, then with the fastest algorithm found by timing
// every available one on this shape (cudnnFind*). The tuning canon measured
// 1430 us -> 840 us forward. ember's trainer does the same search once per shape
// when `switches.cudnn_benchmark = true` (engine/cuda/conv_autotune.h).
//
//   sample_cudnn_autotune
#include "samples/common.h"

#include <cudnn.h>

#include <vector>

#define CUDNN_CHECK(expr) SAMPLE_CHECK_STATUS(expr, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

namespace {

constexpr int N = 32, C = 64, H = 64, W = 64, K = 64, R = 3, S = 3;

struct Conv {
    cudnnHandle_t handle;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    float *x, *w, *y, *dy, *dx, *dw;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
};

void ensure_workspace(Conv& c, size_t bytes) {
    if (bytes <= c.workspace_bytes) return;
    if (c.workspace) SAMPLE_CHECK(cudaFree(c.workspace));
    SAMPLE_CHECK(cudaMalloc(&c.workspace, bytes));
    c.workspace_bytes = bytes;
}

}  // namespace

int main() {
    if (!sample_has_device("cudnn_autotune")) return 0;
    Conv c{};
    CUDNN_CHECK(cudnnCreate(&c.handle));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&c.x_desc));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&c.y_desc));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&c.w_desc));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c.conv_desc));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(c.x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(c.w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S));
    CUDNN_CHECK(
        cudnnSetConvolution2dDescriptor(c.conv_desc, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(c.y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W));

    size_t x_n = size_t(N) * C * H * W, w_n = size_t(K) * C * R * S, y_n = size_t(N) * K * H * W;
    SAMPLE_CHECK(cudaMalloc(&c.x, x_n * 4));
    SAMPLE_CHECK(cudaMalloc(&c.dx, x_n * 4));
    SAMPLE_CHECK(cudaMalloc(&c.w, w_n * 4));
    SAMPLE_CHECK(cudaMalloc(&c.dw, w_n * 4));
    SAMPLE_CHECK(cudaMalloc(&c.y, y_n * 4));
    SAMPLE_CHECK(cudaMalloc(&c.dy, y_n * 4));
    std::vector<float> host(x_n);
    for (size_t i = 0; i < x_n; ++i) host[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    SAMPLE_CHECK(cudaMemcpy(c.x, host.data(), x_n * 4, cudaMemcpyHostToDevice));
    SAMPLE_CHECK(cudaMemcpy(c.w, host.data(), w_n * 4, cudaMemcpyHostToDevice));
    SAMPLE_CHECK(cudaMemcpy(c.dy, host.data(), y_n * 4, cudaMemcpyHostToDevice));
    const float one = 1.0f, zero = 0.0f;

    // Heuristic choice (cudnn.benchmark = False).
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd_heuristic[8];
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(c.handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc, 8,
                                                       &returned, fwd_heuristic));
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data_heuristic[8];
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(c.handle, c.w_desc, c.y_desc, c.conv_desc, c.x_desc, 8,
                                                            &returned, bwd_data_heuristic));
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter_heuristic[8];
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(c.handle, c.x_desc, c.y_desc, c.conv_desc, c.w_desc, 8,
                                                              &returned, bwd_filter_heuristic));
    // Measured choice (cudnn.benchmark = True): cuDNN times each algorithm.
    ensure_workspace(c, size_t(1) << 30);
    cudnnConvolutionFwdAlgoPerf_t fwd_found[16];
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(c.handle, c.x_desc, c.x, c.w_desc, c.w, c.conv_desc, c.y_desc,
                                                       c.y, 16, &returned, fwd_found, c.workspace, c.workspace_bytes));
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data_found[16];
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(c.handle, c.w_desc, c.w, c.y_desc, c.dy, c.conv_desc,
                                                            c.x_desc, c.dx, 16, &returned, bwd_data_found, c.workspace,
                                                            c.workspace_bytes));
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter_found[16];
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(c.handle, c.x_desc, c.x, c.y_desc, c.dy, c.conv_desc,
                                                              c.w_desc, c.dw, 16, &returned, bwd_filter_found,
                                                              c.workspace, c.workspace_bytes));

    auto forward = [&](cudnnConvolutionFwdAlgo_t algo) {
        CUDNN_CHECK(cudnnConvolutionForward(c.handle, &one, c.x_desc, c.x, c.w_desc, c.w, c.conv_desc, algo,
                                            c.workspace, c.workspace_bytes, &zero, c.y_desc, c.y));
    };
    auto backward = [&](cudnnConvolutionBwdDataAlgo_t data_algo, cudnnConvolutionBwdFilterAlgo_t filter_algo) {
        CUDNN_CHECK(cudnnConvolutionBackwardData(c.handle, &one, c.w_desc, c.w, c.y_desc, c.dy, c.conv_desc, data_algo,
                                                 c.workspace, c.workspace_bytes, &zero, c.x_desc, c.dx));
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(c.handle, &one, c.x_desc, c.x, c.y_desc, c.dy, c.conv_desc,
                                                   filter_algo, c.workspace, c.workspace_bytes, &zero, c.w_desc, c.dw));
    };
    float fwd_default = sample_time_ms(5, 50, [&] { forward(fwd_heuristic[0].algo); });
    float fwd_tuned = sample_time_ms(5, 50, [&] { forward(fwd_found[0].algo); });
    float both_default = sample_time_ms(5, 50, [&] {
        forward(fwd_heuristic[0].algo);
        backward(bwd_data_heuristic[0].algo, bwd_filter_heuristic[0].algo);
    });
    float both_tuned = sample_time_ms(5, 50, [&] {
        forward(fwd_found[0].algo);
        backward(bwd_data_found[0].algo, bwd_filter_found[0].algo);
    });
    std::printf("conv 3x3, N=%d C=%d H=W=%d K=%d (fp32, NCHW)\n", N, C, H, K);
    std::printf("%-22s %14s %14s %8s\n", "", "heuristic us", "autotuned us", "ratio");
    std::printf("%-22s %14.1f %14.1f %7.2fx\n", "forward", fwd_default * 1e3, fwd_tuned * 1e3, fwd_default / fwd_tuned);
    std::printf("%-22s %14.1f %14.1f %7.2fx\n", "forward + backward", both_default * 1e3, both_tuned * 1e3,
                both_default / both_tuned);
    std::printf("algorithms: forward %d -> %d, backward data %d -> %d, backward filter %d -> %d\n",
                fwd_heuristic[0].algo, fwd_found[0].algo, bwd_data_heuristic[0].algo, bwd_data_found[0].algo,
                bwd_filter_heuristic[0].algo, bwd_filter_found[0].algo);
    for (float* p : {c.x, c.dx, c.w, c.dw, c.y, c.dy}) SAMPLE_CHECK(cudaFree(p));
    SAMPLE_CHECK(cudaFree(c.workspace));
    cudnnDestroy(c.handle);
    return 0;
}

// Our own kernels' ops against their CPU twins in the kernel interpreter, at the shapes
// where kernels go wrong: 0 and 1 elements, sizes that are not multiples of the block
// or the warp, a channel count past one tile, rows past the reduction's row groups,
// nchw and nhwc, f32/f16/bf16, and (with the grid-stride cap lowered to 2 blocks) the
// grid-stride tail. The comparisons are parity_checks.h's, shared with the `gpu` tests;
// the attention helpers and the conv/linear bias kernels, which no `gpu` test reaches
// without cuBLAS or cuDNN around them, are compared here directly.
#include "engine/cuda/interpreter/interpreter.h"
#include "engine/ops/attention.h"
#include "engine/ops/conv.h"
#include "engine/ops/gemm.h"
#include "tests/engine/ops/parity_checks.h"

namespace ember::ops {
// engine/cuda/conv_bias.cu: the bias add of conv2d_forward_cuda (declared in conv.cpp).
void conv_bias_add_cuda(CudaContext& ctx, const Tensor& bias, const Tensor& y);
}  // namespace ember::ops

namespace {

using namespace ember;
using namespace ember::ops;
using namespace ember::test;
namespace interpreter = ember::cuda_interpreter;

constexpr DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};

class OpsEdges : public ::testing::Test {
  protected:
    void SetUp() override { ctx = std::make_unique<CudaContext>(); }
    void TearDown() override { interpreter::set_grid_stride_cap(0); }
    std::unique_ptr<CudaContext> ctx;
    std::mt19937 rng{77};
};

// Every launch of these tests runs at most 2 blocks of a grid-stride kernel, so each
// thread goes round its loop several times.
class OpsGridStrideTail : public OpsEdges {
  protected:
    void SetUp() override {
        OpsEdges::SetUp();
        interpreter::set_grid_stride_cap(2);
    }
};

TEST_F(OpsEdges, PointwiseAtZeroOneAndOddSizes) {
    struct Shape {
        int64_t rows, cols;
    };
    for (DType t : kFloatTypes)
        for (Shape s : {Shape{1, 0}, Shape{1, 1}, Shape{1, 31}, Shape{1, 257}, Shape{5, 103}})
            check_pointwise_ops(*ctx, t, s.rows, s.cols, rng);
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 1, 1, 1}, {3, 7, 5, 9}, {2, 33, 1, 1}})
        check_convert_layout(*ctx, shape, rng);
}

TEST_F(OpsGridStrideTail, Pointwise) {
    for (DType t : kFloatTypes) check_pointwise_ops(*ctx, t, 3, 1000, rng);
    check_convert_layout(*ctx, {2, 9, 11, 13}, rng);
}

TEST_F(OpsEdges, BatchNormChannelTilesRowGroupsAndTinyBatches) {
    for (DType t : kFloatTypes) {
        // 40 channels: a full tile of 32 and a partial one (channels-last), or 40 blocks (nchw).
        for (Layout layout : {Layout::nchw, Layout::nhwc}) check_batchnorm(*ctx, t, {3, 40, 5, 7}, layout, rng);
        // Three values per channel, the fewest that make a well-conditioned comparison
        // (one gives variance 0, two give dx = 0 exactly: relative errors of rounding).
        check_batchnorm(*ctx, t, {1, 3, 3, 1}, Layout::nhwc, rng);
        check_batchnorm(*ctx, t, {3, 3}, Layout::nchw, rng);
        check_batchnorm(*ctx, t, {1100, 2}, Layout::nchw, rng);  // rows past the 1024 row groups
    }
    check_batchnorm(*ctx, DType::f32, {1100, 1, 1, 3}, Layout::nchw, rng);  // images past the groups
}

TEST_F(OpsGridStrideTail, BatchNorm) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) check_batchnorm(*ctx, DType::f32, {4, 6, 9, 11}, layout, rng);
}

TEST_F(OpsEdges, PoolingWindowsAtTheEdges) {
    Pool2dParams one;
    one.kernel_h = one.kernel_w = 1;
    one.stride_h = one.stride_w = 1;
    Pool2dParams overlapping;  // every input under several windows
    overlapping.kernel_h = overlapping.kernel_w = 3;
    overlapping.stride_h = overlapping.stride_w = 1;
    overlapping.pad_h = overlapping.pad_w = 1;
    Pool2dParams global;  // global average pooling of 7x7
    global.kernel_h = global.kernel_w = 7;
    global.stride_h = global.stride_w = 1;
    Pool2dParams floor;  // 2x2 stride 2 over an odd size drops the last row and column
    for (Layout layout : {Layout::nchw, Layout::nhwc})
        for (DType t : kFloatTypes) {
            check_pooling(*ctx, t, {1, 1, 1, 1}, layout, one, rng);
            check_pooling(*ctx, t, {2, 3, 5, 6}, layout, overlapping, rng);
            check_pooling(*ctx, t, {2, 5, 7, 7}, layout, global, rng);
            check_pooling(*ctx, t, {1, 3, 5, 5}, layout, floor, rng);
            check_pooling(*ctx, t, {0, 3, 5, 6}, layout, overlapping, rng);  // an empty batch
        }
}

TEST_F(OpsGridStrideTail, Pooling) {
    Pool2dParams p;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    p.pad_h = p.pad_w = 1;
    for (Layout layout : {Layout::nchw, Layout::nhwc}) check_pooling(*ctx, DType::f32, {2, 40, 9, 9}, layout, p, rng);
}

TEST_F(OpsEdges, SoftmaxCrossEntropyRowsAndClasses) {
    for (DType t : kFloatTypes) {
        check_softmax_cross_entropy(*ctx, t, 0, 10, rng);
        check_softmax_cross_entropy(*ctx, t, 1, 1, rng);
        check_softmax_cross_entropy(*ctx, t, 3, 257, rng);
        check_softmax_cross_entropy(*ctx, t, 2, 2000, rng);  // classes past the 256 threads
    }
}

TEST_F(OpsEdges, LayerNormRowsAndWidths) {
    for (DType t : kFloatTypes) {
        check_layernorm(*ctx, t, {1, 1}, rng);
        check_layernorm(*ctx, t, {1, 1, 257}, rng);
        check_layernorm(*ctx, t, {3, 1000}, rng);  // a row longer than the block
        check_layernorm(*ctx, t, {1100, 3}, rng);  // rows past the 1024 row groups of dgamma
        check_layernorm_unfused(*ctx, t, 1, 1, rng);
        check_layernorm_unfused(*ctx, t, 3, 1000, rng);
    }
}

TEST_F(OpsEdges, LayerNormOfNoRows) {
    for (DType t : kFloatTypes) {
        check_layernorm(*ctx, t, {0, 8}, rng);
        check_layernorm_unfused(*ctx, t, 0, 8, rng);
    }
}

TEST_F(OpsGridStrideTail, LayerNormUnfused) {
    check_layernorm_unfused(*ctx, DType::f32, 7, 300, rng);
    check_layernorm(*ctx, DType::f32, {7, 300}, rng);
}

TEST_F(OpsEdges, EmbeddingCountsAndWidths) {
    for (DType t : kFloatTypes) {
        check_embedding(*ctx, t, 0, 5, 4, rng);
        check_embedding(*ctx, t, 1, 1, 1, rng);
        check_embedding(*ctx, t, 300, 7, 257, rng);  // many ids per row: atomics collide
    }
}

TEST_F(OpsGridStrideTail, Embedding) {
    check_embedding(*ctx, DType::f32, 40, 9, 33, rng);
}

// ---- the attention helpers ----------------------------------------------------------------

void check_move_heads(CudaContext& ctx, DType t, const HeadLayout& l, std::mt19937& rng) {
    const std::vector<int64_t> row_shape = {l.batch * l.tokens, l.parts * l.model_dim()};
    const std::vector<int64_t> head_shape = {l.batch * l.heads, l.tokens, l.head_dim};
    const std::string what = std::string(dtype_name(t)) + " B" + std::to_string(l.batch) + " T" +
                             std::to_string(l.tokens) + " H" + std::to_string(l.heads) + " dh" +
                             std::to_string(l.head_dim) + " part " + std::to_string(l.part) + "/" +
                             std::to_string(l.parts);
    HostTensor rows = random_tensor(t, row_shape, rng), heads(t, head_shape);
    move_heads_cpu(rows, heads, l, true);
    DeviceTensor d_rows(rows);
    auto d_heads = output_like(heads);
    move_heads_cuda(ctx, d_rows, *d_heads, l, true);
    expect_close(*d_heads, heads, 1e-12, "move_heads to heads " + what);
    // Back: only this part's columns are written, so both sides start from the same rows.
    HostTensor back = random_tensor(t, row_shape, rng), head_values = random_tensor(t, head_shape, rng);
    DeviceTensor d_back(back), d_head_values(head_values);
    move_heads_cpu(back, head_values, l, false);
    move_heads_cuda(ctx, d_back, d_head_values, l, false);
    expect_close(d_back, back, 1e-12, "move_heads to rows " + what);
}

void check_softmax_rows(CudaContext& ctx, int64_t rows, int64_t cols, std::mt19937& rng) {
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    HostTensor scores = random_tensor(DType::f32, {rows, cols}, rng, Layout::nchw, -5.0, 5.0);
    HostTensor probabilities(DType::f32, {rows, cols});
    softmax_rows_cpu(scores, probabilities);
    DeviceTensor d_scores(scores);
    auto d_probabilities = output_like(probabilities);
    softmax_rows_cuda(ctx, d_scores, *d_probabilities);
    expect_close(*d_probabilities, probabilities, 1e-5, "softmax_rows " + what);
    HostTensor dprobabilities = random_tensor(DType::f32, {rows, cols}, rng), dscores(DType::f32, {rows, cols});
    softmax_rows_backward_cpu(probabilities, dprobabilities, dscores, 0.125f);
    DeviceTensor d_dprobabilities(dprobabilities);
    auto d_dscores = output_like(dscores);
    softmax_rows_backward_cuda(ctx, *d_probabilities, d_dprobabilities, *d_dscores, 0.125f);
    expect_close(*d_dscores, dscores, 1e-5, "softmax_rows_backward " + what);
}

TEST_F(OpsEdges, AttentionMoveHeads) {
    for (DType t : kFloatTypes) {
        HeadLayout fused_qkv{2, 5, 3, 7, 3, 1};
        check_move_heads(*ctx, t, fused_qkv, rng);
        HeadLayout output{1, 1, 1, 1, 1, 0};
        check_move_heads(*ctx, t, output, rng);
        HeadLayout wide{3, 11, 4, 24, 3, 2};  // 3168 elements: 13 blocks, the last partial
        check_move_heads(*ctx, t, wide, rng);
    }
}

TEST_F(OpsEdges, AttentionSoftmaxRows) {
    // One warp per row, 8 rows per block: 1 and 9 rows leave warps idle; 1, 33 and 100
    // columns are under, just over and three times a warp.
    for (int64_t rows : {1, 9, 17})
        for (int64_t cols : {1, 33, 100}) check_softmax_rows(*ctx, rows, cols, rng);
}

// ---- bias kernels (conv forward's bias add, conv and linear bias gradients) ------------------

void check_conv_bias(CudaContext& ctx, DType t, const std::vector<int64_t>& dy_shape, Layout layout,
                     std::mt19937& rng) {
    const int64_t K = dy_shape[1];
    const std::string what = std::string(dtype_name(t)) + " " + layout_name(layout) + " " + shape_text(dy_shape);
    HostTensor dy = random_tensor(t, dy_shape, rng, layout);
    HostTensor dbias(DType::f32, {K});
    DeviceTensor d_dy(dy);
    for (GradWrite write : {GradWrite::store, GradWrite::accumulate}) {
        if (write == GradWrite::store) fill_value(dbias, 0.5);
        HostTensor start = dbias;
        DeviceTensor d_dbias(start);
        conv2d_backward_bias_cpu(dy, dbias, write);
        conv2d_backward_bias_cuda(ctx, d_dy, d_dbias, write);
        expect_close(d_dbias, dbias, tolerance(DType::f32, true),
                     "conv bias backward " + std::string(write == GradWrite::store ? "store " : "accumulate ") + what);
    }
    // Forward: the bias add, against the CPU convolution with and without a bias.
    const std::vector<int64_t> x_shape = {dy_shape[0], 2, dy_shape[2], dy_shape[3]};
    HostTensor x = random_tensor(t, x_shape, rng, layout), w = random_tensor(t, {K, 2, 1, 1}, rng, layout);
    HostTensor bias = random_tensor(DType::f32, {K}, rng);
    HostTensor y_plain(t, dy_shape, layout), y_biased(t, dy_shape, layout);
    Conv2dParams p;
    p.stride_h = p.stride_w = 1;
    conv2d_forward_cpu(x, w, {}, y_plain, p);
    conv2d_forward_cpu(x, w, bias, y_biased, p);
    DeviceTensor d_y(y_plain), d_bias(bias);
    conv_bias_add_cuda(ctx, d_bias, d_y);
    expect_close(d_y, y_biased, tolerance(t), "conv bias add " + what);
}

TEST_F(OpsEdges, ConvBiasForwardAndBackward) {
    for (Layout layout : {Layout::nchw, Layout::nhwc})
        for (DType t : kFloatTypes) {
            check_conv_bias(*ctx, t, {1, 1, 1, 1}, layout, rng);
            check_conv_bias(*ctx, t, {2, 5, 3, 3}, layout, rng);
            check_conv_bias(*ctx, t, {2, 300, 2, 1}, layout, rng);  // two column tiles (nhwc)
            check_conv_bias(*ctx, t, {0, 4, 3, 3}, layout, rng);    // an empty batch: zero sums
        }
    check_conv_bias(*ctx, DType::f32, {600, 3, 2, 1}, Layout::nhwc, rng);  // rows past the row groups
}

TEST_F(OpsGridStrideTail, ConvBias) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) check_conv_bias(*ctx, DType::f32, {3, 7, 9, 10}, layout, rng);
}

TEST_F(OpsEdges, LinearBiasBackward) {
    struct Shape {
        int64_t rows, cols;
    };
    for (DType t : kFloatTypes)
        for (Shape s : {Shape{0, 5}, Shape{1, 1}, Shape{7, 300}, Shape{2000, 3}}) {
            HostTensor dy = random_tensor(t, {s.rows, s.cols}, rng), dbias(DType::f32, {s.cols});
            fill_value(dbias, 0.25);
            DeviceTensor d_dy(dy), d_dbias(dbias);
            bias_backward_cpu(dy, dbias, GradWrite::accumulate);
            bias_backward_cuda(*ctx, d_dy, d_dbias, GradWrite::accumulate);
            expect_close(d_dbias, dbias, tolerance(DType::f32, true),
                         std::string("linear bias backward ") + dtype_name(t) + " " + shape_text({s.rows, s.cols}));
        }
}

}  // namespace

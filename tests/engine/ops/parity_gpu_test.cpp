// Every CUDA op built on our own kernels against its CPU twin (label `gpu`). The kernel
// interpreter compiles this same file into engine_cuda_interpreter_ops_parity_test and
// runs it on the CPU; its edge shapes are in tests/engine/cuda_interpreter/. The
// comparisons (NaN-poisoned outputs, relative L2 error per dtype) are parity_checks.h's;
// the ops that call cuBLAS or cuDNN are device-only: library_parity_gpu_test.cpp.
#include "tests/engine/ops/parity_checks.h"

namespace {

using namespace ember;
using namespace ember::ops;
using namespace ember::test;

using OpsParity = CudaParityTest;

TEST_F(OpsParity, BatchNormTrainEvalBackward) {
    // Three shapes: (N,C,H,W) nchw, the same channels-last, and BatchNorm1d's (N,C).
    for (int variant = 0; variant < 3; ++variant) {
        const Layout layout = variant == 1 ? Layout::nhwc : Layout::nchw;
        const std::vector<int64_t> shape =
            variant == 2 ? std::vector<int64_t>{40, 6} : std::vector<int64_t>{8, 6, 5, 7};
        for (DType t : {DType::f32, DType::bf16}) check_batchnorm(*ctx, t, shape, layout, rng);
    }
    // The resnet model's BatchNorms at batch 8, both layouts.
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 16, 28, 28}, std::vector<int64_t>{8, 32, 14, 14}})
        for (Layout layout : {Layout::nchw, Layout::nhwc}) check_batchnorm(*ctx, DType::f32, shape, layout, rng);
}

TEST_F(OpsParity, PointwiseActivationsDropoutAndElementwise) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) check_pointwise_ops(*ctx, t, 3, 1000, rng);
    check_convert_layout(*ctx, {2, 5, 3, 4}, rng);
}

TEST_F(OpsParity, Pooling) {
    Pool2dParams p;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    p.pad_h = p.pad_w = 1;
    for (Layout layout : {Layout::nchw, Layout::nhwc})
        for (DType t : {DType::f32, DType::bf16}) check_pooling(*ctx, t, {3, 4, 13, 11}, layout, p, rng);
}

TEST_F(OpsParity, SoftmaxCrossEntropy) {
    for (DType t : {DType::f32, DType::bf16, DType::f16})
        for (int64_t classes : {10, 1000}) check_softmax_cross_entropy(*ctx, t, 64, classes, rng);
}

// A target outside [0, V) is not read past the row: its loss is NaN, its dlogits 0,
// and the other rows equal the CPU's.
TEST_F(OpsParity, SoftmaxCrossEntropyOutOfRangeTarget) {
    const int64_t rows = 4, classes = 10;
    HostTensor logits = random_tensor(f32, {rows, classes}, rng, Layout::nchw, -3.0, 3.0);
    HostTensor targets(DType::i32, {rows});
    for (int64_t r = 0; r < rows; ++r) targets.set(r, r);
    HostTensor losses(f32, {rows}), dlogits(f32, {rows, classes});
    softmax_cross_entropy_cpu(logits, targets, losses, dlogits, 1.0f);
    targets.set(2, classes + 1000);  // out of range on the device only
    DeviceTensor d_logits(logits), d_targets(targets);
    auto d_losses = output_like(losses), d_dlogits = output_like(dlogits);
    softmax_cross_entropy_cuda(*ctx, d_logits, d_targets, *d_losses, *d_dlogits, 1.0f);
    HostTensor got_losses = d_losses->download(losses), got_dlogits = d_dlogits->download(dlogits);
    for (int64_t r = 0; r < rows; ++r) {
        if (r == 2) {
            EXPECT_TRUE(std::isnan(got_losses.get(r)));
            for (int64_t v = 0; v < classes; ++v) EXPECT_EQ(got_dlogits.get(r * classes + v), 0.0);
        } else {
            EXPECT_NEAR(got_losses.get(r), losses.get(r), 1e-5);
            for (int64_t v = 0; v < classes; ++v)
                EXPECT_NEAR(got_dlogits.get(r * classes + v), dlogits.get(r * classes + v), 1e-5);
        }
    }
}

TEST_F(OpsParity, LayerNorm) {
    for (DType t : {DType::f32, DType::bf16})
        for (int64_t C : {48, 768}) check_layernorm(*ctx, t, {2, 17, C}, rng);
}

// The unfused chain on cuda against its cpu twin and against the fused cuda op; the
// 2000-row case spreads the column sums over several row groups.
TEST_F(OpsParity, LayerNormUnfused) {
    struct Shape {
        int64_t rows, C;
    };
    for (DType t : {DType::f32, DType::f16, DType::bf16})
        for (Shape shape : {Shape{34, 48}, Shape{34, 768}, Shape{2000, 64}})
            check_layernorm_unfused(*ctx, t, shape.rows, shape.C, rng);
}

TEST_F(OpsParity, Embedding) {
    for (DType t : {DType::f32, DType::bf16}) check_embedding(*ctx, t, 200, 50, 32, rng);
}

}  // namespace

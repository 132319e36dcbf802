// Every CUDA op against its CPU twin (label `gpu`): random inputs, outputs poisoned
// with NaN patterns first (an unwritten element cannot pass), relative L2 error per
// dtype: f32 1e-5 (1e-4 for GEMM/conv reductions, TF32 off), f16 1e-3, bf16 1e-2.
// Also the device allocator, pinned pool, streams/events and the conv autotuner cache.
#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/core/stream.h"
#include "engine/cuda/context.h"
#include "engine/cuda/conv_autotune.h"
#include "engine/ops/activation.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/conv.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/gemm.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"
#include "tests/engine/ops/test_util.h"
#include "tests/support/gpu.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>

namespace {

using namespace ember;
using namespace ember::ops;
using ember::test::HostTensor;

constexpr DType f32 = DType::f32;

double tolerance(DType t, bool reduction_heavy = false) {
    switch (t) {
        case DType::f16: return 1e-3;
        case DType::bf16: return 1e-2;
        default: return reduction_heavy ? 1e-4 : 1e-5;
    }
}

// A device copy of a host tensor, in the caching allocator.
struct DeviceTensor {
    Buffer buffer;
    Tensor view;
    explicit DeviceTensor(const HostTensor& host) : buffer(device_allocator(), host.view.bytes() + 8) {
        view = host.view;
        view.data = buffer.data();
        view.device = Device::cuda;
        upload(host);
    }
    void upload(const HostTensor& host) {
        EMBER_CUDA_CHECK(cudaMemcpy(view.data, host.view.data, view.bytes(), cudaMemcpyHostToDevice));
    }
    void poison() { EMBER_CUDA_CHECK(cudaMemset(view.data, 0xff, view.bytes())); }
    HostTensor download(const HostTensor& like) const {
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        HostTensor host = like;
        EMBER_CUDA_CHECK(cudaMemcpy(host.view.data, view.data, view.bytes(), cudaMemcpyDeviceToHost));
        return host;
    }
    operator const Tensor&() const { return view; }
};

// Poisoned device output shaped like `host`.
std::unique_ptr<DeviceTensor> output_like(const HostTensor& host) {
    auto d = std::make_unique<DeviceTensor>(host);
    d->poison();
    return d;
}

void expect_close(const DeviceTensor& gpu, const HostTensor& cpu, double tol, const std::string& what) {
    HostTensor got = gpu.download(cpu);
    std::vector<double> g = test::values(got), c = test::values(cpu);
    for (std::size_t i = 0; i < g.size(); ++i)
        ASSERT_TRUE(std::isfinite(g[i])) << what << ": element " << i << " unwritten or not finite";
    EXPECT_LT(test::relative_l2(g, c), tol) << what;
}

HostTensor random_tensor(DType dtype, std::initializer_list<int64_t> shape, std::mt19937& rng,
                         Layout layout = Layout::nchw, double low = -1.0, double high = 1.0) {
    HostTensor t(dtype, shape, layout);
    test::fill_random(t, rng, low, high);  // set() rounds into f16/bf16
    return t;
}

class OpsParity : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_runtime_status().reason;
        ctx = std::make_unique<CudaContext>();
    }
    std::unique_ptr<CudaContext> ctx;
    std::mt19937 rng{2024};
};

TEST_F(OpsParity, GemmAllEpiloguesAndDtypes) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        HostTensor a = random_tensor(t, {37, 64}, rng), b = random_tensor(t, {64, 24}, rng);
        HostTensor bias = random_tensor(t, {24}, rng);
        HostTensor c(t, {37, 24}), pre(t, {37, 24});
        DeviceTensor da(a), db(b), dbias(bias);
        for (Epilogue e : {Epilogue::none, Epilogue::bias, Epilogue::bias_gelu}) {
            for (bool save_pre : {false, true}) {
                if (save_pre && e != Epilogue::bias_gelu) continue;
                GemmArgs args;
                args.epilogue = e;
                args.bias = bias;
                if (save_pre) args.pre_activation = pre;
                gemm_cpu(a, b, c, args);
                auto dc = output_like(c), dpre = output_like(pre);
                GemmArgs device_args = args;
                device_args.bias = dbias;
                device_args.pre_activation = save_pre ? dpre->view : Tensor{};
                gemm_cuda(*ctx, da, db, *dc, device_args);
                std::string what = std::string("gemm ") + dtype_name(t) + " epilogue " +
                                   std::to_string(int(e)) + (save_pre ? " +pre" : "");
                expect_close(*dc, c, tolerance(t, true), what);
                if (save_pre) expect_close(*dpre, pre, tolerance(t, true), what + " pre_activation");
            }
        }
        // Transposes and f32 output from low-precision inputs.
        HostTensor at = random_tensor(t, {64, 37}, rng), bt = random_tensor(t, {24, 64}, rng);
        HostTensor c32(f32, {37, 24});
        GemmArgs args;
        args.transpose_a = args.transpose_b = true;
        args.alpha = 0.5f;
        gemm_cpu(at, bt, c32, args);
        DeviceTensor dat(at), dbt(bt);
        auto dc32 = output_like(c32);
        gemm_cuda(*ctx, dat, dbt, *dc32, args);
        expect_close(*dc32, c32, tolerance(f32, true) * (t == f32 ? 1 : 10),
                     std::string("gemm transposed f32-out ") + dtype_name(t));
    }
}

TEST_F(OpsParity, LinearBackwardStoreAndAccumulate) {
    for (DType t : {DType::f32, DType::bf16}) {
        HostTensor x = random_tensor(t, {33, 20}, rng), w = random_tensor(t, {12, 20}, rng);
        HostTensor dy = random_tensor(t, {33, 12}, rng);
        HostTensor dx(t, {33, 20}), dw(f32, {12, 20}), db(f32, {12});
        DeviceTensor d_x(x), d_w(w), d_dy(dy);
        // dw/db (f32 even for bf16 operands) accumulate onto ones; dx stored over poison.
        test::fill_value(dw, 1.0);
        test::fill_value(db, 1.0);
        auto d_dx = output_like(dx);
        DeviceTensor d_dw(dw), d_db(db);
        linear_backward_cpu(x, w, dy, dx, dw, db, GradWrite::store, GradWrite::accumulate);
        linear_backward_cuda(*ctx, d_x, d_w, d_dy, *d_dx, d_dw, d_db, GradWrite::store, GradWrite::accumulate);
        expect_close(*d_dx, dx, tolerance(t, true), std::string("linear dx ") + dtype_name(t));
        expect_close(d_dw, dw, tolerance(t, true), std::string("linear dweight ") + dtype_name(t));
        expect_close(d_db, db, tolerance(t, true), std::string("linear dbias ") + dtype_name(t));
    }
}

TEST_F(OpsParity, ConvForwardBackwardLayoutsDtypesAndAutotune) {
    Conv2dParams p;
    p.stride_h = p.stride_w = 1;
    p.pad_h = p.pad_w = 1;
    for (bool benchmark : {false, true}) {
        ctx->cudnn_benchmark = benchmark;
        for (Layout layout : {Layout::nchw, Layout::nhwc}) {
            for (DType t : {DType::f32, DType::bf16, DType::f16}) {
                HostTensor x = random_tensor(t, {4, 8, 12, 12}, rng, layout);
                HostTensor w = random_tensor(t, {16, 8, 3, 3}, rng, layout);
                HostTensor bias = random_tensor(f32, {16}, rng);
                HostTensor dy = random_tensor(t, {4, 16, 12, 12}, rng, layout);
                HostTensor y(t, {4, 16, 12, 12}, layout), dx(t, {4, 8, 12, 12}, layout);
                HostTensor dw(t, {16, 8, 3, 3}, layout), db(f32, {16});
                conv2d_forward_cpu(x, w, bias, y, p);
                conv2d_backward_data_cpu(w, dy, dx, p, GradWrite::store);
                conv2d_backward_filter_cpu(x, dy, dw, p, GradWrite::store);
                conv2d_backward_bias_cpu(dy, db, GradWrite::store);
                DeviceTensor d_x(x), d_w(w), d_bias(bias), d_dy(dy);
                auto d_y = output_like(y), d_dx = output_like(dx), d_dw = output_like(dw), d_db = output_like(db);
                conv2d_forward_cuda(*ctx, d_x, d_w, d_bias, *d_y, p);
                conv2d_backward_data_cuda(*ctx, d_w, d_dy, *d_dx, p, GradWrite::store);
                conv2d_backward_filter_cuda(*ctx, d_x, d_dy, *d_dw, p, GradWrite::store);
                conv2d_backward_bias_cuda(*ctx, d_dy, *d_db, GradWrite::store);
                std::string what = std::string("conv ") + dtype_name(t) + " " + layout_name(layout) +
                                   (benchmark ? " benchmark" : " heuristic");
                expect_close(*d_y, y, tolerance(t, true), what + " forward");
                expect_close(*d_dx, dx, tolerance(t, true), what + " dx");
                expect_close(*d_dw, dw, tolerance(t, true) * (t == f32 ? 1 : 2), what + " dweight");
                expect_close(*d_db, db, tolerance(f32, true), what + " dbias");
                // Accumulate mode: dx += again.
                HostTensor dx_twice = dx;
                conv2d_backward_data_cpu(w, dy, dx_twice, p, GradWrite::accumulate);
                conv2d_backward_data_cuda(*ctx, d_w, d_dy, *d_dx, p, GradWrite::accumulate);
                expect_close(*d_dx, dx_twice, tolerance(t, true), what + " dx accumulate");
            }
        }
    }
    // Each (shape, dtype, layout, direction, benchmark) was searched once; repeating hits the cache.
    const uint64_t searches = ctx->conv_algorithms->searches();
    EXPECT_EQ(searches, ctx->conv_algorithms->size());
    HostTensor x = random_tensor(f32, {4, 8, 12, 12}, rng), w = random_tensor(f32, {16, 8, 3, 3}, rng);
    HostTensor y(f32, {4, 16, 12, 12});
    DeviceTensor d_x(x), d_w(w), d_y(y);
    conv2d_forward_cuda(*ctx, d_x, d_w, {}, d_y, p);
    EXPECT_EQ(ctx->conv_algorithms->searches(), searches);
}

TEST_F(OpsParity, BatchNormTrainEvalBackward) {
    // Three shapes: (N,C,H,W) nchw, the same channels-last, and BatchNorm1d's (N,C).
    for (int variant = 0; variant < 3; ++variant) {
        const Layout layout = variant == 1 ? Layout::nhwc : Layout::nchw;
        for (DType t : {DType::f32, DType::bf16}) {
            HostTensor x = variant == 2 ? random_tensor(t, {40, 6}, rng, layout, -2.0, 3.0)
                                        : random_tensor(t, {8, 6, 5, 7}, rng, layout, -2.0, 3.0);
            HostTensor dy = x;
            test::fill_random(dy, rng);
            HostTensor gamma = random_tensor(f32, {6}, rng, Layout::nchw, 0.5, 1.5);
            HostTensor beta = random_tensor(f32, {6}, rng);
            HostTensor running_mean(f32, {6}), running_var(f32, {6});
            test::fill_value(running_var, 1.0);
            HostTensor y = x, dx = x, mean(f32, {6}), invstd(f32, {6});
            HostTensor dgamma(f32, {6}), dbeta(f32, {6});
            DeviceTensor d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta), d_rm(running_mean), d_rv(running_var);
            BatchNormParams params;
            batchnorm_forward_train_cpu(x, gamma, beta, y, running_mean, running_var, mean, invstd, params);
            batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
            auto d_y = output_like(y), d_mean = output_like(mean), d_invstd = output_like(invstd);
            auto d_dx = output_like(dx), d_dgamma = output_like(dgamma), d_dbeta = output_like(dbeta);
            batchnorm_forward_train_cuda(*ctx, d_x, d_gamma, d_beta, *d_y, d_rm, d_rv, *d_mean, *d_invstd, params);
            batchnorm_backward_cuda(*ctx, d_x, d_dy, d_gamma, *d_mean, *d_invstd, *d_dx, *d_dgamma,
                                    *d_dbeta, GradWrite::store, GradWrite::store);
            std::string what = std::string("batchnorm ") + dtype_name(t) + " " +
                               (variant == 2 ? "2-D" : layout_name(layout));
            expect_close(*d_y, y, tolerance(t), what + " y");
            expect_close(*d_mean, mean, 1e-5, what + " mean");
            expect_close(*d_invstd, invstd, 1e-5, what + " invstd");
            expect_close(d_rm, running_mean, 1e-5, what + " running_mean");
            expect_close(d_rv, running_var, 1e-5, what + " running_var");
            expect_close(*d_dx, dx, tolerance(t, true), what + " dx");
            expect_close(*d_dgamma, dgamma, 1e-4, what + " dgamma");
            expect_close(*d_dbeta, dbeta, 1e-4, what + " dbeta");
            batchnorm_forward_eval_cpu(x, gamma, beta, running_mean, running_var, y, params);
            d_y->poison();
            batchnorm_forward_eval_cuda(*ctx, d_x, d_gamma, d_beta, d_rm, d_rv, *d_y, params);
            expect_close(*d_y, y, tolerance(t), what + " eval");
        }
    }
}

TEST_F(OpsParity, PointwiseActivationsDropoutAndElementwise) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        const std::string name = dtype_name(t);
        HostTensor x = random_tensor(t, {3, 1000}, rng, Layout::nchw, -4.0, 4.0);
        HostTensor other = random_tensor(t, {3, 1000}, rng);
        HostTensor dy = random_tensor(t, {3, 1000}, rng);
        HostTensor y(t, {3, 1000}), dx(t, {3, 1000}), scratch(f32, {3000});
        DeviceTensor d_x(x), d_other(other), d_dy(dy), d_scratch(scratch);
        auto d_y = output_like(y), d_dx = output_like(dx);

        relu_forward_cpu(x, y);
        relu_forward_cuda(*ctx, d_x, *d_y);
        expect_close(*d_y, y, tolerance(t), "relu " + name);
        relu_backward_cpu(y, dy, dx, GradWrite::store);
        relu_backward_cuda(*ctx, *d_y, d_dy, *d_dx, GradWrite::store);
        expect_close(*d_dx, dx, tolerance(t), "relu backward " + name);

        gelu_forward_cpu(x, y);
        d_y->poison();
        gelu_forward_cuda(*ctx, d_x, *d_y);
        expect_close(*d_y, y, tolerance(t), "gelu " + name);
        d_y->poison();
        gelu_forward_unfused_cuda(*ctx, d_x, *d_y, d_scratch);
        expect_close(*d_y, y, tolerance(t), "gelu unfused " + name);
        gelu_backward_cpu(x, dy, dx, GradWrite::accumulate);
        gelu_backward_cuda(*ctx, d_x, d_dy, *d_dx, GradWrite::accumulate);
        expect_close(*d_dx, dx, tolerance(t), "gelu backward accumulate " + name);

        HostTensor mask(DType::u8, {3, 1000});
        DropoutParams dp;
        dp.p = 0.2f;
        dp.seed = 5;
        dp.offset = 1234;
        dropout_forward_cpu(x, y, mask, dp);
        auto d_mask = output_like(mask);
        d_y->poison();
        dropout_forward_cuda(*ctx, d_x, *d_y, *d_mask, dp);
        EXPECT_EQ(d_mask->download(mask).storage, mask.storage) << "dropout masks must be identical";
        expect_close(*d_y, y, tolerance(t), "dropout " + name);
        dropout_backward_cpu(dy, mask, dx, dp.p, GradWrite::store);
        d_dx->poison();
        dropout_backward_cuda(*ctx, d_dy, *d_mask, *d_dx, dp.p, GradWrite::store);
        expect_close(*d_dx, dx, tolerance(t), "dropout backward " + name);

        add_cpu(x, other, y);
        d_y->poison();
        add_cuda(*ctx, d_x, d_other, *d_y);
        expect_close(*d_y, y, tolerance(t), "add " + name);
        accumulate_grad_cpu(dy, dx, GradWrite::accumulate);
        accumulate_grad_cuda(*ctx, d_dy, *d_dx, GradWrite::accumulate);
        expect_close(*d_dx, dx, tolerance(t), "accumulate_grad " + name);
        scale_cpu(dx, 0.5f);
        scale_cuda(*ctx, *d_dx, 0.5f);
        expect_close(*d_dx, dx, tolerance(t), "scale " + name);
        HostTensor as_f32(f32, {3, 1000});
        cast_cpu(x, as_f32);
        auto d_f32 = output_like(as_f32);
        cast_cuda(*ctx, d_x, *d_f32);
        expect_close(*d_f32, as_f32, 1e-12, "cast to f32 " + name);
        fill_cpu(y, 0.75f);
        fill_cuda(*ctx, *d_y, 0.75f);
        expect_close(*d_y, y, 1e-12, "fill " + name);
    }
    HostTensor image = random_tensor(f32, {2, 5, 3, 4}, rng), last(f32, {2, 5, 3, 4}, Layout::nhwc);
    convert_layout_cpu(image, last);
    DeviceTensor d_image(image);
    auto d_last = output_like(last);
    convert_layout_cuda(*ctx, d_image, *d_last);
    expect_close(*d_last, last, 1e-12, "convert_layout");
}

TEST_F(OpsParity, Pooling) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        for (DType t : {DType::f32, DType::bf16}) {
            Pool2dParams p;
            p.kernel_h = p.kernel_w = 3;
            p.stride_h = p.stride_w = 2;
            p.pad_h = p.pad_w = 1;
            HostTensor x = random_tensor(t, {3, 4, 13, 11}, rng, layout);
            HostTensor dy = random_tensor(t, {3, 4, 7, 6}, rng, layout);
            HostTensor y(t, {3, 4, 7, 6}, layout), argmax(DType::i32, {3, 4, 7, 6}, layout);
            HostTensor dx(t, {3, 4, 13, 11}, layout);
            DeviceTensor d_x(x), d_dy(dy);
            auto d_y = output_like(y), d_argmax = output_like(argmax), d_dx = output_like(dx);
            std::string what = std::string(dtype_name(t)) + " " + layout_name(layout);
            maxpool2d_forward_cpu(x, y, argmax, p);
            maxpool2d_forward_cuda(*ctx, d_x, *d_y, *d_argmax, p);
            expect_close(*d_y, y, tolerance(t), "maxpool " + what);
            EXPECT_EQ(d_argmax->download(argmax).storage, argmax.storage) << "maxpool argmax " << what;
            maxpool2d_backward_cpu(dy, argmax, dx, p, GradWrite::store);
            maxpool2d_backward_cuda(*ctx, d_dy, *d_argmax, *d_dx, p, GradWrite::store);
            expect_close(*d_dx, dx, tolerance(t), "maxpool backward " + what);
            avgpool2d_forward_cpu(x, y, p);
            d_y->poison();
            avgpool2d_forward_cuda(*ctx, d_x, *d_y, p);
            expect_close(*d_y, y, tolerance(t), "avgpool " + what);
            avgpool2d_backward_cpu(dy, dx, p, GradWrite::accumulate);
            avgpool2d_backward_cuda(*ctx, d_dy, *d_dx, p, GradWrite::accumulate);
            expect_close(*d_dx, dx, tolerance(t), "avgpool backward accumulate " + what);
        }
    }
}

TEST_F(OpsParity, SoftmaxCrossEntropy) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        for (int64_t classes : {10, 1000}) {
            const int64_t rows = 64;
            HostTensor logits = random_tensor(t, {rows, classes}, rng, Layout::nchw, -6.0, 6.0);
            HostTensor targets(DType::i32, {rows});
            for (int64_t r = 0; r < rows; ++r) targets.set(r, (r * 7919) % classes);
            HostTensor losses(f32, {rows}), dlogits(t, {rows, classes});
            softmax_cross_entropy_cpu(logits, targets, losses, dlogits, 1.0f / rows);
            DeviceTensor d_logits(logits), d_targets(targets);
            auto d_losses = output_like(losses), d_dlogits = output_like(dlogits);
            softmax_cross_entropy_cuda(*ctx, d_logits, d_targets, *d_losses, *d_dlogits, 1.0f / rows);
            std::string what = std::string("softmax-CE ") + dtype_name(t) + " V=" + std::to_string(classes);
            expect_close(*d_losses, losses, 1e-5, what + " losses");
            expect_close(*d_dlogits, dlogits, tolerance(t), what + " dlogits");
            EXPECT_NEAR(mean_loss(d_losses->view), mean_loss(losses), 1e-4);
        }
    }
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
    for (DType t : {DType::f32, DType::bf16}) {
        for (int64_t C : {48, 768}) {
            HostTensor x = random_tensor(t, {2, 17, C}, rng, Layout::nchw, -2.0, 2.0);
            HostTensor dy = random_tensor(t, {2, 17, C}, rng);
            HostTensor gamma = random_tensor(f32, {C}, rng), beta = random_tensor(f32, {C}, rng);
            HostTensor y(t, {2, 17, C}), mean(f32, {34}), rstd(f32, {34}), dx(t, {2, 17, C});
            HostTensor dgamma(f32, {C}), dbeta(f32, {C});
            layernorm_forward_cpu(x, gamma, beta, y, mean, rstd);
            layernorm_backward_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
            DeviceTensor d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta);
            auto d_y = output_like(y), d_mean = output_like(mean), d_rstd = output_like(rstd);
            auto d_dx = output_like(dx), d_dgamma = output_like(dgamma), d_dbeta = output_like(dbeta);
            layernorm_forward_cuda(*ctx, d_x, d_gamma, d_beta, *d_y, *d_mean, *d_rstd);
            layernorm_backward_cuda(*ctx, d_x, d_dy, d_gamma, *d_mean, *d_rstd, *d_dx, *d_dgamma, *d_dbeta,
                                    GradWrite::store, GradWrite::store);
            std::string what = std::string("layernorm ") + dtype_name(t) + " C=" + std::to_string(C);
            expect_close(*d_y, y, tolerance(t), what + " y");
            expect_close(*d_mean, mean, 1e-5, what + " mean");
            expect_close(*d_rstd, rstd, 1e-5, what + " rstd");
            expect_close(*d_dx, dx, tolerance(t, true), what + " dx");
            expect_close(*d_dgamma, dgamma, 1e-4, what + " dgamma");
            expect_close(*d_dbeta, dbeta, 1e-4, what + " dbeta");
        }
    }
}

// The unfused chain on cuda against its cpu twin and against the fused cuda op; the
// 2000-row case spreads the column sums over several row groups.
TEST_F(OpsParity, LayerNormUnfused) {
    struct Shape {
        int64_t rows, C;
    };
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
        for (Shape shape : {Shape{34, 48}, Shape{34, 768}, Shape{2000, 64}}) {
            const int64_t rows = shape.rows, C = shape.C;
            HostTensor x = random_tensor(t, {rows, C}, rng, Layout::nchw, -2.0, 2.0);
            HostTensor dy = random_tensor(t, {rows, C}, rng);
            HostTensor gamma = random_tensor(f32, {C}, rng), beta = random_tensor(f32, {C}, rng);
            HostTensor y(t, {rows, C}), mean(f32, {rows}), rstd(f32, {rows}), dx(t, {rows, C});
            HostTensor dgamma(f32, {C}), dbeta(f32, {C});
            HostTensor forward_scratch(f32, {layernorm_forward_unfused_scratch(rows, C)});
            HostTensor backward_scratch(f32, {layernorm_backward_unfused_scratch(rows, C)});
            layernorm_forward_unfused_cpu(x, gamma, beta, y, mean, rstd, forward_scratch);
            layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, backward_scratch,
                                           GradWrite::store, GradWrite::store);
            DeviceTensor d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta);
            auto d_forward_scratch = output_like(forward_scratch), d_backward_scratch = output_like(backward_scratch);
            auto d_y = output_like(y), d_mean = output_like(mean), d_rstd = output_like(rstd);
            auto d_dx = output_like(dx), d_dgamma = output_like(dgamma), d_dbeta = output_like(dbeta);
            layernorm_forward_unfused_cuda(*ctx, d_x, d_gamma, d_beta, *d_y, *d_mean, *d_rstd, *d_forward_scratch);
            layernorm_backward_unfused_cuda(*ctx, d_x, d_dy, d_gamma, *d_mean, *d_rstd, *d_dx, *d_dgamma, *d_dbeta,
                                            *d_backward_scratch, GradWrite::store, GradWrite::store);
            const std::string what = std::string("layernorm unfused ") + dtype_name(t) + " " + std::to_string(rows) +
                                     "x" + std::to_string(C);
            expect_close(*d_y, y, tolerance(t), what + " y (cpu)");
            expect_close(*d_mean, mean, 1e-5, what + " mean (cpu)");
            expect_close(*d_rstd, rstd, 1e-5, what + " rstd (cpu)");
            expect_close(*d_dx, dx, tolerance(t, true), what + " dx (cpu)");
            expect_close(*d_dgamma, dgamma, 1e-4, what + " dgamma (cpu)");
            expect_close(*d_dbeta, dbeta, 1e-4, what + " dbeta (cpu)");

            // Against the fused cuda op on the same device inputs.
            HostTensor fused_y = d_y->download(y), fused_dx = d_dx->download(dx);
            HostTensor fused_dgamma = d_dgamma->download(dgamma), fused_dbeta = d_dbeta->download(dbeta);
            auto f_y = output_like(y), f_mean = output_like(mean), f_rstd = output_like(rstd);
            auto f_dx = output_like(dx), f_dgamma = output_like(dgamma), f_dbeta = output_like(dbeta);
            layernorm_forward_cuda(*ctx, d_x, d_gamma, d_beta, *f_y, *f_mean, *f_rstd);
            layernorm_backward_cuda(*ctx, d_x, d_dy, d_gamma, *f_mean, *f_rstd, *f_dx, *f_dgamma, *f_dbeta,
                                    GradWrite::store, GradWrite::store);
            expect_close(*f_y, fused_y, tolerance(t), what + " y (cuda fused)");
            expect_close(*f_dx, fused_dx, tolerance(t, true), what + " dx (cuda fused)");
            expect_close(*f_dgamma, fused_dgamma, 1e-4, what + " dgamma (cuda fused)");
            expect_close(*f_dbeta, fused_dbeta, 1e-4, what + " dbeta (cuda fused)");

            // Accumulate adds onto what store wrote, on both backends.
            layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, backward_scratch,
                                           GradWrite::accumulate, GradWrite::accumulate);
            layernorm_backward_unfused_cuda(*ctx, d_x, d_dy, d_gamma, *d_mean, *d_rstd, *d_dx, *d_dgamma, *d_dbeta,
                                            *d_backward_scratch, GradWrite::accumulate, GradWrite::accumulate);
            expect_close(*d_dx, dx, tolerance(t, true), what + " dx accumulate");
            expect_close(*d_dgamma, dgamma, 1e-4, what + " dgamma accumulate");
            expect_close(*d_dbeta, dbeta, 1e-4, what + " dbeta accumulate");
        }
    }
}

TEST_F(OpsParity, Embedding) {
    for (DType t : {DType::f32, DType::bf16}) {
        HostTensor table = random_tensor(t, {50, 32}, rng);
        HostTensor ids(DType::i32, {200});
        for (int i = 0; i < 200; ++i) ids.set(i, (i * 37) % 50);
        HostTensor out(t, {200, 32}), dout = random_tensor(t, {200, 32}, rng), dtable(f32, {50, 32});
        embedding_forward_cpu(ids, table, out);
        embedding_backward_cpu(ids, dout, dtable, GradWrite::store);
        DeviceTensor d_table(table), d_ids(ids), d_dout(dout);
        auto d_out = output_like(out), d_dtable = output_like(dtable);
        embedding_forward_cuda(*ctx, d_ids, d_table, *d_out);
        embedding_backward_cuda(*ctx, d_ids, d_dout, *d_dtable, GradWrite::store);
        expect_close(*d_out, out, 1e-12, std::string("embedding ") + dtype_name(t));
        expect_close(*d_dtable, dtable, 1e-5, std::string("embedding backward ") + dtype_name(t));
    }
}

TEST(DeviceMemory, CachingAllocatorStopsCallingCudaMalloc) {
    EMBER_REQUIRE_GPU();
    CachingAllocator allocator(cuda_raw_allocator());
    for (int step = 0; step < 4; ++step) {
        void* activations = allocator.allocate(24u << 20);
        void* scratch = allocator.allocate(3000);
        allocator.free(scratch);
        allocator.free(activations);
    }
    EXPECT_EQ(allocator.stats().raw_allocations, 2u);
    allocator.empty_cache();
    EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
}

TEST(DeviceMemory, PinnedPoolStreamsAndEvents) {
    EMBER_REQUIRE_GPU();
    PinnedHostPool pool;
    EXPECT_TRUE(pool.pinned());
    const std::size_t bytes = 16u << 20;
    void* host = pool.allocate(bytes);
    Buffer device(device_allocator(), bytes);
    Stream stream;
    Event start, end;
    start.record(stream.get());
    EMBER_CUDA_CHECK(cudaMemcpyAsync(device.data(), host, bytes, cudaMemcpyHostToDevice, stream.get()));
    end.record(stream.get());
    end.synchronize();
    EXPECT_TRUE(end.query());
    EXPECT_GT(Event::elapsed_ms(start, end), 0.0f);
    pool.free(host);
}

}  // namespace

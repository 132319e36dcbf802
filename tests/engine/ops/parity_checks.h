// parity_checks.h: the CUDA-vs-CPU comparisons of our own kernels' ops, one function per
// op family and shape, so one body serves two callers: parity_gpu_test.cpp (label `gpu`)
// runs them on a device at its shapes, and the kernel interpreter's tests
// (tests/engine/cuda_interpreter/) run the very same functions on the CPU, at those
// shapes and at the edges (0 and 1 elements, sizes off the block, the grid-stride tail).
//
// Inputs are random, outputs are poisoned with a NaN pattern first (an unwritten element
// cannot pass), and each result is compared by relative L2 error with the tolerance of
// its dtype: f32 1e-5 (1e-4 for reductions), f16 1e-3, bf16 1e-2.
#pragma once

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/cuda/context.h"
#include "engine/ops/activation.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/pooling.h"
#include "engine/ops/softmax_cross_entropy.h"
#include "tests/engine/ops/test_util.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ember::test {

// The fixture of the parity tests: a CUDA context (the test is skipped, saying why, on
// a machine with no usable device) and their random stream.
class CudaParityTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_runtime_status().reason;
        ctx = std::make_unique<CudaContext>();
    }
    std::unique_ptr<CudaContext> ctx;
    std::mt19937 rng{2024};
};

inline double tolerance(DType t, bool reduction_heavy = false) {
    switch (t) {
        case DType::f16:
            return 1e-3;
        case DType::bf16:
            return 1e-2;
        default:
            return reduction_heavy ? 1e-4 : 1e-5;
    }
}

// A device copy of a host tensor in a cudaMalloc block of exactly its size (at least one
// byte, so an empty tensor is still defined): a kernel reading past the end of it is an
// out-of-bounds access, which the kernel interpreter and compute-sanitizer report.
struct DeviceTensor {
    Tensor view;
    explicit DeviceTensor(const HostTensor& host) {
        view = host.view;
        view.device = Device::cuda;
        EMBER_CUDA_CHECK(cudaMalloc(&view.data, std::max<std::size_t>(view.bytes(), 1)));
        upload(host);
    }
    ~DeviceTensor() { cudaFree(view.data); }  // no throwing from a destructor
    DeviceTensor(const DeviceTensor&) = delete;
    DeviceTensor& operator=(const DeviceTensor&) = delete;

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
inline std::unique_ptr<DeviceTensor> output_like(const HostTensor& host) {
    auto d = std::make_unique<DeviceTensor>(host);
    d->poison();
    return d;
}

inline void expect_close(const DeviceTensor& gpu, const HostTensor& cpu, double tol, const std::string& what) {
    HostTensor got = gpu.download(cpu);
    std::vector<double> g = values(got), c = values(cpu);
    for (std::size_t i = 0; i < g.size(); ++i)
        ASSERT_TRUE(std::isfinite(g[i])) << what << ": element " << i << " unwritten or not finite";
    EXPECT_LT(relative_l2(g, c), tol) << what;
}

inline HostTensor random_tensor(DType dtype, const std::vector<int64_t>& shape, std::mt19937& rng,
                                Layout layout = Layout::nchw, double low = -1.0, double high = 1.0) {
    HostTensor t(dtype, shape, layout);
    fill_random(t, rng, low, high);  // set() rounds into f16/bf16
    return t;
}

inline std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) text += ',';
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

// ReLU, GELU (fused and the unfused chain), dropout, add, accumulate, scale, cast and
// fill, forward and backward, on a [rows, cols] tensor of dtype t.
inline void check_pointwise_ops(CudaContext& ctx, DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
    using namespace ember::ops;
    const std::string name = std::string(dtype_name(t)) + " " + shape_text({rows, cols});
    HostTensor x = random_tensor(t, {rows, cols}, rng, Layout::nchw, -4.0, 4.0);
    HostTensor other = random_tensor(t, {rows, cols}, rng);
    HostTensor dy = random_tensor(t, {rows, cols}, rng);
    HostTensor y(t, {rows, cols}), dx(t, {rows, cols}), scratch(DType::f32, {rows * cols});
    DeviceTensor d_x(x), d_other(other), d_dy(dy), d_scratch(scratch);
    auto d_y = output_like(y), d_dx = output_like(dx);

    relu_forward_cpu(x, y);
    relu_forward_cuda(ctx, d_x, *d_y);
    expect_close(*d_y, y, tolerance(t), "relu " + name);
    relu_backward_cpu(y, dy, dx, GradWrite::store);
    relu_backward_cuda(ctx, *d_y, d_dy, *d_dx, GradWrite::store);
    expect_close(*d_dx, dx, tolerance(t), "relu backward " + name);

    gelu_forward_cpu(x, y);
    d_y->poison();
    gelu_forward_cuda(ctx, d_x, *d_y);
    expect_close(*d_y, y, tolerance(t), "gelu " + name);
    d_y->poison();
    gelu_forward_unfused_cuda(ctx, d_x, *d_y, d_scratch);
    expect_close(*d_y, y, tolerance(t), "gelu unfused " + name);
    gelu_backward_cpu(x, dy, dx, GradWrite::accumulate);
    gelu_backward_cuda(ctx, d_x, d_dy, *d_dx, GradWrite::accumulate);
    expect_close(*d_dx, dx, tolerance(t), "gelu backward accumulate " + name);

    HostTensor mask(DType::u8, {rows, cols});
    DropoutParams dp;
    dp.p = 0.2f;
    dp.seed = 5;
    dp.offset = 1234;
    dropout_forward_cpu(x, y, mask, dp);
    auto d_mask = output_like(mask);
    d_y->poison();
    dropout_forward_cuda(ctx, d_x, *d_y, *d_mask, dp);
    EXPECT_EQ(d_mask->download(mask).storage, mask.storage) << "dropout masks must be identical: " << name;
    expect_close(*d_y, y, tolerance(t), "dropout " + name);
    dropout_backward_cpu(dy, mask, dx, dp.p, GradWrite::store);
    d_dx->poison();
    dropout_backward_cuda(ctx, d_dy, *d_mask, *d_dx, dp.p, GradWrite::store);
    expect_close(*d_dx, dx, tolerance(t), "dropout backward " + name);

    add_cpu(x, other, y);
    d_y->poison();
    add_cuda(ctx, d_x, d_other, *d_y);
    expect_close(*d_y, y, tolerance(t), "add " + name);
    accumulate_grad_cpu(dy, dx, GradWrite::accumulate);
    accumulate_grad_cuda(ctx, d_dy, *d_dx, GradWrite::accumulate);
    expect_close(*d_dx, dx, tolerance(t), "accumulate_grad " + name);
    scale_cpu(dx, 0.5f);
    scale_cuda(ctx, *d_dx, 0.5f);
    expect_close(*d_dx, dx, tolerance(t), "scale " + name);
    HostTensor as_f32(DType::f32, {rows, cols});
    cast_cpu(x, as_f32);
    auto d_f32 = output_like(as_f32);
    cast_cuda(ctx, d_x, *d_f32);
    expect_close(*d_f32, as_f32, 1e-12, "cast to f32 " + name);
    fill_cpu(y, 0.75f);
    fill_cuda(ctx, *d_y, 0.75f);
    expect_close(*d_y, y, 1e-12, "fill " + name);
}

// nchw -> nhwc of an (N, C, H, W) f32 tensor.
inline void check_convert_layout(CudaContext& ctx, const std::vector<int64_t>& shape, std::mt19937& rng) {
    HostTensor image = random_tensor(DType::f32, shape, rng), last(DType::f32, shape, Layout::nhwc);
    ops::convert_layout_cpu(image, last);
    DeviceTensor d_image(image);
    auto d_last = output_like(last);
    ops::convert_layout_cuda(ctx, d_image, *d_last);
    expect_close(*d_last, last, 1e-12, "convert_layout " + shape_text(shape));
}

// Training forward, backward and eval forward of x shaped (N, C, H, W) in `layout`, or
// (N, C) (BatchNorm1d).
inline void check_batchnorm(CudaContext& ctx, DType t, const std::vector<int64_t>& shape, Layout layout,
                            std::mt19937& rng) {
    using namespace ember::ops;
    const int64_t C = shape[1];
    HostTensor x = random_tensor(t, shape, rng, layout, -2.0, 3.0);
    HostTensor dy = x;
    fill_random(dy, rng);
    HostTensor gamma = random_tensor(DType::f32, {C}, rng, Layout::nchw, 0.5, 1.5);
    HostTensor beta = random_tensor(DType::f32, {C}, rng);
    HostTensor running_mean(DType::f32, {C}), running_var(DType::f32, {C});
    fill_value(running_var, 1.0);
    HostTensor y = x, dx = x, mean(DType::f32, {C}), invstd(DType::f32, {C});
    HostTensor dgamma(DType::f32, {C}), dbeta(DType::f32, {C});
    DeviceTensor d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta), d_rm(running_mean), d_rv(running_var);
    BatchNormParams params;
    batchnorm_forward_train_cpu(x, gamma, beta, y, running_mean, running_var, mean, invstd, params);
    batchnorm_backward_cpu(x, dy, gamma, mean, invstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
    auto d_y = output_like(y), d_mean = output_like(mean), d_invstd = output_like(invstd);
    auto d_dx = output_like(dx), d_dgamma = output_like(dgamma), d_dbeta = output_like(dbeta);
    batchnorm_forward_train_cuda(ctx, d_x, d_gamma, d_beta, *d_y, d_rm, d_rv, *d_mean, *d_invstd, params);
    batchnorm_backward_cuda(ctx, d_x, d_dy, d_gamma, *d_mean, *d_invstd, *d_dx, *d_dgamma, *d_dbeta, GradWrite::store,
                            GradWrite::store);
    const std::string what = std::string("batchnorm ") + dtype_name(t) + " " + shape_text(shape) +
                             (shape.size() == 2 ? "" : std::string(" ") + layout_name(layout));
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
    batchnorm_forward_eval_cuda(ctx, d_x, d_gamma, d_beta, d_rm, d_rv, *d_y, params);
    expect_close(*d_y, y, tolerance(t), what + " eval");
}

// Max and average pooling forward and backward of x shaped (N, C, H, W).
inline void check_pooling(CudaContext& ctx, DType t, const std::vector<int64_t>& shape, Layout layout,
                          const ops::Pool2dParams& p, std::mt19937& rng) {
    using namespace ember::ops;
    const int64_t P = (shape[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
    const int64_t Q = (shape[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
    const std::vector<int64_t> out_shape = {shape[0], shape[1], P, Q};
    HostTensor x = random_tensor(t, shape, rng, layout);
    HostTensor dy = random_tensor(t, out_shape, rng, layout);
    HostTensor y(t, out_shape, layout), argmax(DType::i32, out_shape, layout);
    HostTensor dx(t, shape, layout);
    DeviceTensor d_x(x), d_dy(dy);
    auto d_y = output_like(y), d_argmax = output_like(argmax), d_dx = output_like(dx);
    const std::string what = std::string(dtype_name(t)) + " " + layout_name(layout) + " " + shape_text(shape) + " k" +
                             std::to_string(p.kernel_h) + " s" + std::to_string(p.stride_h) + " p" +
                             std::to_string(p.pad_h);
    maxpool2d_forward_cpu(x, y, argmax, p);
    maxpool2d_forward_cuda(ctx, d_x, *d_y, *d_argmax, p);
    expect_close(*d_y, y, tolerance(t), "maxpool " + what);
    EXPECT_EQ(d_argmax->download(argmax).storage, argmax.storage) << "maxpool argmax " << what;
    maxpool2d_backward_cpu(dy, argmax, dx, p, GradWrite::store);
    maxpool2d_backward_cuda(ctx, d_dy, *d_argmax, *d_dx, p, GradWrite::store);
    expect_close(*d_dx, dx, tolerance(t), "maxpool backward " + what);
    avgpool2d_forward_cpu(x, y, p);
    d_y->poison();
    avgpool2d_forward_cuda(ctx, d_x, *d_y, p);
    expect_close(*d_y, y, tolerance(t), "avgpool " + what);
    avgpool2d_backward_cpu(dy, dx, p, GradWrite::accumulate);
    avgpool2d_backward_cuda(ctx, d_dy, *d_dx, p, GradWrite::accumulate);
    expect_close(*d_dx, dx, tolerance(t), "avgpool backward accumulate " + what);
}

inline void check_softmax_cross_entropy(CudaContext& ctx, DType t, int64_t rows, int64_t classes, std::mt19937& rng) {
    using namespace ember::ops;
    HostTensor logits = random_tensor(t, {rows, classes}, rng, Layout::nchw, -6.0, 6.0);
    HostTensor targets(DType::i32, {rows});
    for (int64_t r = 0; r < rows; ++r) targets.set(r, (r * 7919) % classes);
    HostTensor losses(DType::f32, {rows}), dlogits(t, {rows, classes});
    const float grad_scale = 1.0f / static_cast<float>(std::max<int64_t>(rows, 1));
    softmax_cross_entropy_cpu(logits, targets, losses, dlogits, grad_scale);
    DeviceTensor d_logits(logits), d_targets(targets);
    auto d_losses = output_like(losses), d_dlogits = output_like(dlogits);
    softmax_cross_entropy_cuda(ctx, d_logits, d_targets, *d_losses, *d_dlogits, grad_scale);
    const std::string what =
        std::string("softmax-CE ") + dtype_name(t) + " rows=" + std::to_string(rows) + " V=" + std::to_string(classes);
    expect_close(*d_losses, losses, 1e-5, what + " losses");
    expect_close(*d_dlogits, dlogits, tolerance(t), what + " dlogits");
    if (rows > 0) {
        EXPECT_NEAR(mean_loss(d_losses->view), mean_loss(losses), 1e-4) << what;
    }
}

// LayerNorm's six results on the device against the reference's (y, mean, rstd, dx,
// dgamma, dbeta, in that order), each at its tolerance: y and dx by dtype, the f32
// statistics 1e-5, the f32 parameter gradients (sums over rows) 1e-4.
inline void expect_layernorm_close(DType t, const std::array<const DeviceTensor*, 6>& got,
                                   const std::array<const HostTensor*, 6>& want, const std::string& what,
                                   const std::string& suffix = "") {
    const char* const names[] = {" y", " mean", " rstd", " dx", " dgamma", " dbeta"};
    const double tolerances[] = {tolerance(t), 1e-5, 1e-5, tolerance(t, true), 1e-4, 1e-4};
    for (std::size_t i = 0; i < got.size(); ++i)
        expect_close(*got[i], *want[i], tolerances[i], what + names[i] + suffix);
}

// Fused LayerNorm forward and backward over the last dim of x shaped `shape` ([..., C]).
inline void check_layernorm(CudaContext& ctx, DType t, const std::vector<int64_t>& shape, std::mt19937& rng) {
    using namespace ember::ops;
    const int64_t C = shape.back();
    int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    HostTensor x = random_tensor(t, shape, rng, Layout::nchw, -2.0, 2.0);
    HostTensor dy = random_tensor(t, shape, rng);
    HostTensor gamma = random_tensor(DType::f32, {C}, rng), beta = random_tensor(DType::f32, {C}, rng);
    HostTensor y(t, shape), mean(DType::f32, {rows}), rstd(DType::f32, {rows}), dx(t, shape);
    HostTensor dgamma(DType::f32, {C}), dbeta(DType::f32, {C});
    layernorm_forward_cpu(x, gamma, beta, y, mean, rstd);
    layernorm_backward_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, GradWrite::store, GradWrite::store);
    DeviceTensor d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta);
    auto d_y = output_like(y), d_mean = output_like(mean), d_rstd = output_like(rstd);
    auto d_dx = output_like(dx), d_dgamma = output_like(dgamma), d_dbeta = output_like(dbeta);
    layernorm_forward_cuda(ctx, d_x, d_gamma, d_beta, *d_y, *d_mean, *d_rstd);
    layernorm_backward_cuda(ctx, d_x, d_dy, d_gamma, *d_mean, *d_rstd, *d_dx, *d_dgamma, *d_dbeta, GradWrite::store,
                            GradWrite::store);
    const std::string what = std::string("layernorm ") + dtype_name(t) + " " + shape_text(shape);
    expect_layernorm_close(t, {d_y.get(), d_mean.get(), d_rstd.get(), d_dx.get(), d_dgamma.get(), d_dbeta.get()},
                           {&y, &mean, &rstd, &dx, &dgamma, &dbeta}, what);
}

// The unfused chain on cuda against its cpu twin and against the fused cuda op, then
// accumulate mode on both backends.
inline void check_layernorm_unfused(CudaContext& ctx, DType t, int64_t rows, int64_t C, std::mt19937& rng) {
    using namespace ember::ops;
    HostTensor x = random_tensor(t, {rows, C}, rng, Layout::nchw, -2.0, 2.0);
    HostTensor dy = random_tensor(t, {rows, C}, rng);
    HostTensor gamma = random_tensor(DType::f32, {C}, rng), beta = random_tensor(DType::f32, {C}, rng);
    HostTensor y(t, {rows, C}), mean(DType::f32, {rows}), rstd(DType::f32, {rows}), dx(t, {rows, C});
    HostTensor dgamma(DType::f32, {C}), dbeta(DType::f32, {C});
    HostTensor forward_scratch(DType::f32, {layernorm_forward_unfused_scratch(rows, C)});
    HostTensor backward_scratch(DType::f32, {layernorm_backward_unfused_scratch(rows, C)});
    layernorm_forward_unfused_cpu(x, gamma, beta, y, mean, rstd, forward_scratch);
    layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, backward_scratch, GradWrite::store,
                                   GradWrite::store);
    DeviceTensor d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta);
    auto d_forward_scratch = output_like(forward_scratch), d_backward_scratch = output_like(backward_scratch);
    auto d_y = output_like(y), d_mean = output_like(mean), d_rstd = output_like(rstd);
    auto d_dx = output_like(dx), d_dgamma = output_like(dgamma), d_dbeta = output_like(dbeta);
    layernorm_forward_unfused_cuda(ctx, d_x, d_gamma, d_beta, *d_y, *d_mean, *d_rstd, *d_forward_scratch);
    layernorm_backward_unfused_cuda(ctx, d_x, d_dy, d_gamma, *d_mean, *d_rstd, *d_dx, *d_dgamma, *d_dbeta,
                                    *d_backward_scratch, GradWrite::store, GradWrite::store);
    const std::string what =
        std::string("layernorm unfused ") + dtype_name(t) + " " + std::to_string(rows) + "x" + std::to_string(C);
    expect_layernorm_close(t, {d_y.get(), d_mean.get(), d_rstd.get(), d_dx.get(), d_dgamma.get(), d_dbeta.get()},
                           {&y, &mean, &rstd, &dx, &dgamma, &dbeta}, what, " (cpu)");

    // Against the fused cuda op on the same device inputs.
    HostTensor fused_y = d_y->download(y), fused_dx = d_dx->download(dx);
    HostTensor fused_dgamma = d_dgamma->download(dgamma), fused_dbeta = d_dbeta->download(dbeta);
    auto f_y = output_like(y), f_mean = output_like(mean), f_rstd = output_like(rstd);
    auto f_dx = output_like(dx), f_dgamma = output_like(dgamma), f_dbeta = output_like(dbeta);
    layernorm_forward_cuda(ctx, d_x, d_gamma, d_beta, *f_y, *f_mean, *f_rstd);
    layernorm_backward_cuda(ctx, d_x, d_dy, d_gamma, *f_mean, *f_rstd, *f_dx, *f_dgamma, *f_dbeta, GradWrite::store,
                            GradWrite::store);
    expect_close(*f_y, fused_y, tolerance(t), what + " y (cuda fused)");
    expect_close(*f_dx, fused_dx, tolerance(t, true), what + " dx (cuda fused)");
    expect_close(*f_dgamma, fused_dgamma, 1e-4, what + " dgamma (cuda fused)");
    expect_close(*f_dbeta, fused_dbeta, 1e-4, what + " dbeta (cuda fused)");

    // Accumulate adds onto what store wrote, on both backends.
    layernorm_backward_unfused_cpu(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, backward_scratch, GradWrite::accumulate,
                                   GradWrite::accumulate);
    layernorm_backward_unfused_cuda(ctx, d_x, d_dy, d_gamma, *d_mean, *d_rstd, *d_dx, *d_dgamma, *d_dbeta,
                                    *d_backward_scratch, GradWrite::accumulate, GradWrite::accumulate);
    expect_close(*d_dx, dx, tolerance(t, true), what + " dx accumulate");
    expect_close(*d_dgamma, dgamma, 1e-4, what + " dgamma accumulate");
    expect_close(*d_dbeta, dbeta, 1e-4, what + " dbeta accumulate");
}

// Gather of `count` ids from a [V, D] table, and the scatter-add backward.
inline void check_embedding(CudaContext& ctx, DType t, int64_t count, int64_t V, int64_t D, std::mt19937& rng) {
    using namespace ember::ops;
    HostTensor table = random_tensor(t, {V, D}, rng);
    HostTensor ids(DType::i32, {count});
    for (int64_t i = 0; i < count; ++i) ids.set(i, (i * 37) % V);
    HostTensor out(t, {count, D}), dout = random_tensor(t, {count, D}, rng), dtable(DType::f32, {V, D});
    embedding_forward_cpu(ids, table, out);
    embedding_backward_cpu(ids, dout, dtable, GradWrite::store);
    DeviceTensor d_table(table), d_ids(ids), d_dout(dout);
    auto d_out = output_like(out), d_dtable = output_like(dtable);
    embedding_forward_cuda(ctx, d_ids, d_table, *d_out);
    embedding_backward_cuda(ctx, d_ids, d_dout, *d_dtable, GradWrite::store);
    const std::string what =
        std::string(dtype_name(t)) + " ids=" + std::to_string(count) + " table " + shape_text({V, D});
    expect_close(*d_out, out, 1e-12, "embedding " + what);
    expect_close(*d_dtable, dtable, 1e-5, "embedding backward " + what);
}

}  // namespace ember::test

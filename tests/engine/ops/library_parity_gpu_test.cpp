// The ops that call NVIDIA's libraries (cuBLAS GEMMs and cuDNN convolutions) against their
// CPU twins, and the device allocator, pinned pool, streams, events and the conv
// autotuner cache (label `gpu`). Device-only, as their suite names say: the kernel
// interpreter runs our own kernels (parity_gpu_test.cpp), not NVIDIA's libraries.
// Comparisons and tolerances: parity_checks.h.
#include "engine/core/allocator.h"
#include "engine/core/stream.h"
#include "engine/cuda/conv_autotune.h"
#include "engine/ops/conv.h"
#include "engine/ops/gemm.h"
#include "tests/engine/ops/parity_checks.h"
#include "tests/support/gpu.h"

namespace {

using namespace ember;
using namespace ember::ops;
using namespace ember::test;

// Device-only: the kernel interpreter does not run NVIDIA's libraries.
using CublasParity = CudaParityTest;
using CudnnParity = CudaParityTest;

TEST_F(CublasParity, GemmAllEpiloguesAndDtypes) {
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
                std::string what = std::string("gemm ") + dtype_name(t) + " epilogue " + std::to_string(int(e)) +
                                   (save_pre ? " +pre" : "");
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

TEST_F(CublasParity, LinearBackwardStoreAndAccumulate) {
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

// The small shape, then the 3x3 convolutions of the resnet model at batch 8 (28x28 with
// 16 channels, the stride-2 step to 14x14, 14x14 with 32 channels).
struct ConvCase {
    std::int64_t n, c, hw, k, stride;
};
constexpr ConvCase kConvCases[] = {{4, 8, 12, 16, 1}, {8, 16, 28, 16, 1}, {8, 16, 28, 32, 2}, {8, 32, 14, 32, 1}};

TEST_F(CudnnParity, ConvForwardBackwardLayoutsDtypesAndAutotune) {
    for (const ConvCase& shape : kConvCases)
        for (bool benchmark : {false, true}) {
            Conv2dParams p;
            p.stride_h = p.stride_w = static_cast<int>(shape.stride);
            p.pad_h = p.pad_w = 1;
            const std::int64_t out = (shape.hw + 2 - 3) / shape.stride + 1;
            ctx->cudnn_benchmark = benchmark;
            for (Layout layout : {Layout::nchw, Layout::nhwc}) {
                for (DType t : {DType::f32, DType::bf16, DType::f16}) {
                    HostTensor x = random_tensor(t, {shape.n, shape.c, shape.hw, shape.hw}, rng, layout);
                    HostTensor w = random_tensor(t, {shape.k, shape.c, 3, 3}, rng, layout);
                    HostTensor bias = random_tensor(f32, {shape.k}, rng);
                    HostTensor dy = random_tensor(t, {shape.n, shape.k, out, out}, rng, layout);
                    HostTensor y(t, {shape.n, shape.k, out, out}, layout),
                        dx(t, {shape.n, shape.c, shape.hw, shape.hw}, layout);
                    HostTensor dw(t, {shape.k, shape.c, 3, 3}, layout), db(f32, {shape.k});
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
                    std::string what = std::string("conv ") + dtype_name(t) + " " + layout_name(layout) + " " +
                                       std::to_string(shape.c) + "x" + std::to_string(shape.hw) + "^2 -> " +
                                       std::to_string(shape.k) + " stride " + std::to_string(shape.stride) +
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
    Conv2dParams p;
    p.stride_h = p.stride_w = 1;
    p.pad_h = p.pad_w = 1;
    HostTensor x = random_tensor(f32, {4, 8, 12, 12}, rng), w = random_tensor(f32, {16, 8, 3, 3}, rng);
    HostTensor y(f32, {4, 16, 12, 12});
    DeviceTensor d_x(x), d_w(w), d_y(y);
    conv2d_forward_cuda(*ctx, d_x, d_w, {}, d_y, p);
    EXPECT_EQ(ctx->conv_algorithms->searches(), searches);
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

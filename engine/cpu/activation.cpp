// activation.cpp: CPU ReLU and GELU on tensors, plus GELU as the unfused chain of
// eight pointwise passes (the same sequence the CUDA backend launches as kernels).
// The f32 loops run over slices of elements that the fast path splits over the thread
// team (parallel.h); elementwise, so both paths agree bit for bit.
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/activation.h"

#include <cmath>

namespace ember::ops {
namespace {

void check_pointwise(const char* op, const Tensor& in, const Tensor& out) {
    cpu::check_float_cpu(in, op, "input");
    cpu::check_float_cpu(out, op, "output");
    require(in.numel() == out.numel(), op, "sizes differ: " + in.describe() + ", " + out.describe());
}

double gelu_double(double x) {
    const double k = 0.7978845608028654;
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double gelu_grad_double(double x) {
    const double k = 0.7978845608028654;
    double t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

}  // namespace

void relu_forward_cpu(const Tensor& x, const Tensor& y) {
    check_pointwise("relu_forward_cpu", x, y);
    if (cpu::all_f32({&x, &y})) {
        const float* in = x.as<float>();
        float* out = y.as<float>();
        cpu::for_slices(x.numel(), cpu::kElementGrain, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) out[i] = relu(in[i]);
        });
        return;
    }
    for (int64_t i = 0, end = x.numel(); i < end; ++i) {
        double v = cpu::get(x, i);
        cpu::set(y, i, v > 0 ? v : 0.0);
    }
}

void relu_backward_cpu(const Tensor& y, const Tensor& dy, const Tensor& dx, GradWrite write) {
    check_pointwise("relu_backward_cpu", y, dx);
    check_pointwise("relu_backward_cpu", dy, dx);
    if (cpu::all_f32({&y, &dy, &dx})) {
        const float* out = y.as<float>();
        const float* grad_out = dy.as<float>();
        float* grad_in = dx.as<float>();
        // Two loops without a branch on the data: a sign-dependent branch mispredicts
        // half the time and was the most expensive part of this op.
        const int64_t n = dx.numel();
        // Both operands are loaded unconditionally so the choice is a select.
        cpu::for_slices(n, cpu::kElementGrain, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                const float upstream = grad_out[i];
                const float kept = out[i] > 0.0f ? upstream : 0.0f;
                grad_in[i] = write == GradWrite::accumulate ? grad_in[i] + kept : kept;
            }
        });
        return;
    }
    for (int64_t i = 0, end = dx.numel(); i < end; ++i)
        cpu::write(dx, i, cpu::get(y, i) > 0 ? cpu::get(dy, i) : 0.0, write);
}

// f64 tensors use the double formula (finite-difference checks); others the shared
// float function the kernel uses.
void gelu_forward_cpu(const Tensor& x, const Tensor& y) {
    check_pointwise("gelu_forward_cpu", x, y);
    if (cpu::fast_f32({&x, &y})) {
        const float* in = x.as<float>();
        float* out = y.as<float>();
        cpu::parallel_for(x.numel(), cpu::kElementGrain / 16, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) out[i] = gelu_tanh(in[i]);
        });
        return;
    }
    for (int64_t i = 0, end = x.numel(); i < end; ++i) {
        double v = cpu::get(x, i);
        cpu::set(y, i, x.dtype == DType::f64 ? gelu_double(v) : gelu_tanh(static_cast<float>(v)));
    }
}

void gelu_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& dx, GradWrite write) {
    check_pointwise("gelu_backward_cpu", x, dx);
    check_pointwise("gelu_backward_cpu", dy, dx);
    if (cpu::fast_f32({&x, &dy, &dx})) {
        // The reference's double product and sum: one rounding, as cpu::write.
        const float *in = x.as<float>(), *grad_out = dy.as<float>();
        float* grad_in = dx.as<float>();
        const bool accumulate = write == GradWrite::accumulate;
        cpu::parallel_for(x.numel(), cpu::kElementGrain / 16, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                double v = double(grad_out[i]) * gelu_tanh_grad(in[i]);
                if (accumulate) v += grad_in[i];
                grad_in[i] = static_cast<float>(v);
            }
        });
        return;
    }
    for (int64_t i = 0, end = x.numel(); i < end; ++i) {
        double v = cpu::get(x, i);
        double grad = x.dtype == DType::f64 ? gelu_grad_double(v) : gelu_tanh_grad(static_cast<float>(v));
        cpu::write(dx, i, cpu::get(dy, i) * grad, write);
    }
}

void gelu_forward_unfused_cpu(const Tensor& x, const Tensor& y, const Tensor& scratch) {
    const char* op = "gelu_forward_unfused_cpu";
    check_pointwise(op, x, y);
    require(scratch.defined() && scratch.dtype == DType::f32 && scratch.device == Device::cpu &&
                scratch.numel() >= x.numel(),
            op, "scratch must be a cpu f32 tensor with at least x.numel() elements");
    const int64_t n = x.numel();
    float* t = scratch.as<float>();
    for (int64_t i = 0; i < n; ++i) {
        float v = load_as_float(x.data, x.dtype, i);
        t[i] = v * v * v;
    }
    for (int64_t i = 0; i < n; ++i) t[i] *= kGeluCubic;
    for (int64_t i = 0; i < n; ++i) t[i] += load_as_float(x.data, x.dtype, i);
    for (int64_t i = 0; i < n; ++i) t[i] *= kGeluSqrt2OverPi;
    for (int64_t i = 0; i < n; ++i) t[i] = tanhf(t[i]);
    for (int64_t i = 0; i < n; ++i) t[i] += 1.0f;
    for (int64_t i = 0; i < n; ++i) t[i] *= load_as_float(x.data, x.dtype, i);
    for (int64_t i = 0; i < n; ++i) store_from_float(y.data, y.dtype, i, 0.5f * t[i]);
}

}  // namespace ember::ops

// pooling.cpp: CPU max and average pooling, forward and backward, either layout.
#include "engine/cpu/cpu_util.h"
#include "engine/ops/pooling.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace ember::ops {
namespace {

void check_pool(const char* op, const Tensor& x, const Tensor& y, const Pool2dParams& p) {
    cpu::check_float_cpu(x, op, "input");
    cpu::check_float_cpu(y, op, "output");
    require(x.rank == 4 && y.rank == 4, op, "input and output must be 4-D");
    int64_t out_h = (x.shape[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
    int64_t out_w = (x.shape[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
    require(y.shape[0] == x.shape[0] && y.shape[1] == x.shape[1] && y.shape[2] == out_h &&
                y.shape[3] == out_w,
            op, "output must be [" + std::to_string(x.shape[0]) + "," + std::to_string(x.shape[1]) +
                    "," + std::to_string(out_h) + "," + std::to_string(out_w) + "]: " + y.describe());
}

void check_argmax(const char* op, const Tensor& argmax, const Tensor& y) {
    require(argmax.defined() && argmax.dtype == DType::i32 && argmax.device == Device::cpu &&
                argmax.numel() == y.numel(),
            op, "argmax must be a cpu i32 tensor shaped like the output");
}

}  // namespace

void maxpool2d_forward_cpu(const Tensor& x, const Tensor& y, const Tensor& argmax,
                           const Pool2dParams& p) {
    const char* op = "maxpool2d_forward_cpu";
    check_pool(op, x, y, p);
    check_argmax(op, argmax, y);
    const int64_t H = x.shape[2], W = x.shape[3];
    if (cpu::all_f32({&x, &y}) && x.layout == Layout::nchw && y.layout == Layout::nchw) {
        // Plane by plane with plain pointers (the CPU training path).
        const int64_t P = y.shape[2], Q = y.shape[3], planes = y.shape[0] * y.shape[1];
        const Pool2dParams q = p;  // a local copy: loads cannot alias the outputs
        for (int64_t plane = 0; plane < planes; ++plane) {
            const float* in = x.as<float>() + plane * H * W;
            float* out = y.as<float>() + plane * P * Q;
            int32_t* index = argmax.as<int32_t>() + plane * P * Q;
            for (int64_t oh = 0; oh < P; ++oh)
                for (int64_t ow = 0; ow < Q; ++ow) {
                    // The window clipped to the image; the first element seeds the
                    // maximum and only a strictly greater one replaces it (same tie
                    // rule as the generic path), with selects instead of branches.
                    const int64_t h_begin = std::max<int64_t>(oh * q.stride_h - q.pad_h, 0);
                    const int64_t h_end = std::min<int64_t>(oh * q.stride_h - q.pad_h + q.kernel_h, H);
                    const int64_t w_begin = std::max<int64_t>(ow * q.stride_w - q.pad_w, 0);
                    const int64_t w_end = std::min<int64_t>(ow * q.stride_w - q.pad_w + q.kernel_w, W);
                    float best = 0.0f;
                    int32_t best_index = -1;
                    if (h_begin < h_end && w_begin < w_end) {
                        best_index = static_cast<int32_t>(h_begin * W + w_begin);
                        best = in[best_index];
                        for (int64_t h = h_begin; h < h_end; ++h)
                            for (int64_t w = w_begin; w < w_end; ++w) {
                                const float v = in[h * W + w];
                                const bool greater = v > best;
                                best = greater ? v : best;
                                best_index = greater ? static_cast<int32_t>(h * W + w) : best_index;
                            }
                    }
                    out[oh * Q + ow] = best;
                    index[oh * Q + ow] = best_index;
                }
        }
        return;
    }
    for (int64_t n = 0; n < y.shape[0]; ++n)
        for (int64_t c = 0; c < y.shape[1]; ++c)
            for (int64_t oh = 0; oh < y.shape[2]; ++oh)
                for (int64_t ow = 0; ow < y.shape[3]; ++ow) {
                    double best = -std::numeric_limits<double>::infinity();
                    int32_t best_index = -1;
                    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
                        int64_t h = oh * p.stride_h - p.pad_h + kh;
                        if (h < 0 || h >= H) continue;
                        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                            int64_t w = ow * p.stride_w - p.pad_w + kw;
                            if (w < 0 || w >= W) continue;
                            double v = cpu::get(x, x.offset4(n, c, h, w));
                            if (v > best || best_index < 0) {
                                best = v;
                                best_index = static_cast<int32_t>(h * W + w);
                            }
                        }
                    }
                    int64_t out = y.offset4(n, c, oh, ow);
                    cpu::set(y, out, best_index < 0 ? 0.0 : best);  // empty window: 0, as the kernel
                    argmax.as<int32_t>()[out] = best_index;
                }
}

void maxpool2d_backward_cpu(const Tensor& dy, const Tensor& argmax, const Tensor& dx,
                            const Pool2dParams& p, GradWrite write) {
    const char* op = "maxpool2d_backward_cpu";
    check_pool(op, dx, dy, p);
    check_argmax(op, argmax, dy);
    const int64_t W = dx.shape[3];
    if (cpu::all_f32({&dy, &dx}) && dy.layout == Layout::nchw && dx.layout == Layout::nchw) {
        const int64_t plane_in = dx.shape[2] * W, plane_out = dy.shape[2] * dy.shape[3];
        const int64_t planes = dy.shape[0] * dy.shape[1];
        for (int64_t plane = 0; plane < planes; ++plane) {
            float* grad_in = dx.as<float>() + plane * plane_in;
            const float* grad_out = dy.as<float>() + plane * plane_out;
            const int32_t* index = argmax.as<int32_t>() + plane * plane_out;
            if (write == GradWrite::store)
                for (int64_t i = 0; i < plane_in; ++i) grad_in[i] = 0.0f;
            for (int64_t i = 0; i < plane_out; ++i)
                if (index[i] >= 0) grad_in[index[i]] += grad_out[i];
        }
        return;
    }
    std::vector<double> grad(static_cast<std::size_t>(dx.numel()), 0.0);
    for (int64_t n = 0; n < dy.shape[0]; ++n)
        for (int64_t c = 0; c < dy.shape[1]; ++c)
            for (int64_t oh = 0; oh < dy.shape[2]; ++oh)
                for (int64_t ow = 0; ow < dy.shape[3]; ++ow) {
                    int64_t out = dy.offset4(n, c, oh, ow);
                    int32_t index = argmax.as<int32_t>()[out];
                    if (index < 0) continue;
                    grad[dx.offset4(n, c, index / W, index % W)] += cpu::get(dy, out);
                }
    for (int64_t i = 0, end = dx.numel(); i < end; ++i) cpu::write(dx, i, grad[i], write);
}

void avgpool2d_forward_cpu(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
    check_pool("avgpool2d_forward_cpu", x, y, p);
    const int64_t H = x.shape[2], W = x.shape[3];
    const double divisor = double(p.kernel_h) * p.kernel_w;
    for (int64_t n = 0; n < y.shape[0]; ++n)
        for (int64_t c = 0; c < y.shape[1]; ++c)
            for (int64_t oh = 0; oh < y.shape[2]; ++oh)
                for (int64_t ow = 0; ow < y.shape[3]; ++ow) {
                    double sum = 0.0;
                    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
                        int64_t h = oh * p.stride_h - p.pad_h + kh;
                        if (h < 0 || h >= H) continue;
                        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                            int64_t w = ow * p.stride_w - p.pad_w + kw;
                            if (w >= 0 && w < W) sum += cpu::get(x, x.offset4(n, c, h, w));
                        }
                    }
                    cpu::set(y, y.offset4(n, c, oh, ow), sum / divisor);
                }
}

void avgpool2d_backward_cpu(const Tensor& dy, const Tensor& dx, const Pool2dParams& p,
                            GradWrite write) {
    check_pool("avgpool2d_backward_cpu", dx, dy, p);
    const int64_t H = dx.shape[2], W = dx.shape[3];
    const double divisor = double(p.kernel_h) * p.kernel_w;
    std::vector<double> grad(static_cast<std::size_t>(dx.numel()), 0.0);
    for (int64_t n = 0; n < dy.shape[0]; ++n)
        for (int64_t c = 0; c < dy.shape[1]; ++c)
            for (int64_t oh = 0; oh < dy.shape[2]; ++oh)
                for (int64_t ow = 0; ow < dy.shape[3]; ++ow) {
                    double g = cpu::get(dy, dy.offset4(n, c, oh, ow)) / divisor;
                    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
                        int64_t h = oh * p.stride_h - p.pad_h + kh;
                        if (h < 0 || h >= H) continue;
                        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                            int64_t w = ow * p.stride_w - p.pad_w + kw;
                            if (w >= 0 && w < W) grad[dx.offset4(n, c, h, w)] += g;
                        }
                    }
                }
    for (int64_t i = 0, end = dx.numel(); i < end; ++i) cpu::write(dx, i, grad[i], write);
}

}  // namespace ember::ops

// conv.cpp: CPU 2-D convolution. The reference (ops::conv2d_*_reference_cpu) is im2col +
// GEMM (OpenBLAS sgemm, dgemm for f64), one image at a time: inputs of any layout/dtype
// are read into NCHW float (or double) buffers, results written back with the output's
// layout, dtype and write mode, so one GEMM path serves nchw, nhwc, f32, f16, bf16 and
// f64. The ops::conv2d_*_cpu twins run f32 tensors through oneDNN instead
// (onednn_conv.cpp; implementation.h says how to choose).
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/implementation.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/ops/conv.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace ember::ops {
namespace {

struct ConvShape {
    int64_t n, c, h, w;  // input
    int64_t k, r, s;     // filter
    int64_t p, q;        // output
};

ConvShape check_conv(const char* op, const Tensor& x, const Tensor& weight, const Tensor& y,
                     const Conv2dParams& params) {
    cpu::check_float_cpu(x, op, "x");
    cpu::check_float_cpu(weight, op, "weight");
    cpu::check_float_cpu(y, op, "y");
    require(x.rank == 4 && weight.rank == 4 && y.rank == 4, op, "x, weight and y must be 4-D");
    // The same rules as cuDNN on the device, so code that runs here runs there.
    require(x.dtype == weight.dtype && x.dtype == y.dtype, op, "x, weight and y dtypes differ");
    require(x.layout == weight.layout && x.layout == y.layout, op, "x, weight and y layouts differ");
    require(weight.shape[1] == x.shape[1], op,
            "weight channels differ from x: " + weight.describe() + " vs " + x.describe());
    ConvShape s{x.shape[0],      x.shape[1],      x.shape[2], x.shape[3], weight.shape[0],
                weight.shape[2], weight.shape[3], 0,          0};
    s.p = conv_output_size(s.h, s.r, params.stride_h, params.pad_h, params.dilation_h);
    s.q = conv_output_size(s.w, s.s, params.stride_w, params.pad_w, params.dilation_w);
    require(y.shape[0] == s.n && y.shape[1] == s.k && y.shape[2] == s.p && y.shape[3] == s.q, op,
            "output must be [" + std::to_string(s.n) + "," + std::to_string(s.k) + "," + std::to_string(s.p) + "," +
                std::to_string(s.q) + "]: " + y.describe());
    return s;
}

// Output columns q whose input column q*stride - pad + offset lies inside [0, W):
// [begin, end). Splitting the row this way leaves a branch-free inner loop.
struct ColumnRange {
    int64_t begin, end;
};

inline ColumnRange valid_columns(int64_t offset, int64_t stride, int64_t pad, int64_t W, int64_t Q) {
    const int64_t low = pad - offset;           // q * stride >= low
    const int64_t high = W - 1 + pad - offset;  // q * stride <= high
    int64_t begin = low > 0 ? (low + stride - 1) / stride : 0;
    int64_t end = high < 0 ? 0 : std::min(Q, high / stride + 1);
    if (begin > end) begin = end;
    return {begin, end};
}

// col[(c*R + r)*S + s][p*Q + q] = x[c][p*stride - pad + r*dilation][...] (0 outside).
template <class T>
void im2col(const T* image, const ConvShape& s, const Conv2dParams& pr, T* col) {
    for (int64_t c = 0; c < s.c; ++c)
        for (int64_t r = 0; r < s.r; ++r)
            for (int64_t ks = 0; ks < s.s; ++ks) {
                T* row = col + ((c * s.r + r) * s.s + ks) * s.p * s.q;
                const int64_t w_offset = ks * pr.dilation_w;
                const ColumnRange cols = valid_columns(w_offset, pr.stride_w, pr.pad_w, s.w, s.q);
                for (int64_t p = 0; p < s.p; ++p) {
                    T* out = row + p * s.q;
                    const int64_t h = p * pr.stride_h - pr.pad_h + r * pr.dilation_h;
                    if (h < 0 || h >= s.h) {
                        for (int64_t q = 0; q < s.q; ++q) out[q] = T(0);
                        continue;
                    }
                    const T* in = image + (c * s.h + h) * s.w;
                    const int64_t shift = w_offset - pr.pad_w;  // input column of q = 0
                    for (int64_t q = 0; q < cols.begin; ++q) out[q] = T(0);
                    for (int64_t q = cols.begin; q < cols.end; ++q) out[q] = in[q * pr.stride_w + shift];
                    for (int64_t q = cols.end; q < s.q; ++q) out[q] = T(0);
                }
            }
}

// The adjoint of im2col: adds each column entry back onto its image position.
template <class T>
void col2im_add(const T* col, const ConvShape& s, const Conv2dParams& pr, T* image) {
    for (int64_t c = 0; c < s.c; ++c)
        for (int64_t r = 0; r < s.r; ++r)
            for (int64_t ks = 0; ks < s.s; ++ks) {
                const T* row = col + ((c * s.r + r) * s.s + ks) * s.p * s.q;
                const int64_t w_offset = ks * pr.dilation_w;
                const ColumnRange cols = valid_columns(w_offset, pr.stride_w, pr.pad_w, s.w, s.q);
                for (int64_t p = 0; p < s.p; ++p) {
                    const int64_t h = p * pr.stride_h - pr.pad_h + r * pr.dilation_h;
                    if (h < 0 || h >= s.h) continue;
                    const T* in = row + p * s.q;
                    T* out = image + (c * s.h + h) * s.w;
                    const int64_t shift = w_offset - pr.pad_w;
                    for (int64_t q = cols.begin; q < cols.end; ++q) out[q * pr.stride_w + shift] += in[q];
                }
            }
}

// C[m,n] = alpha op(A) op(B) + beta C, row-major, float or double.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta, float* c) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
                ta ? m : k, b, tb ? k : n, beta, c, n);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, const double* b, double beta, double* c) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a,
                ta ? m : k, b, tb ? k : n, beta, c, n);
}

template <class T>
void forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Conv2dParams& params,
             const ConvShape& s) {
    std::vector<T> xs = cpu::load_nchw<T>(x), ws = cpu::load_nchw<T>(weight);
    std::vector<T> ys(static_cast<std::size_t>(y.numel()));
    const int64_t crs = s.c * s.r * s.s, pq = s.p * s.q;
    std::vector<T> col(static_cast<std::size_t>(crs * pq));
    for (int64_t n = 0; n < s.n; ++n) {
        im2col(xs.data() + n * s.c * s.h * s.w, s, params, col.data());
        gemm(false, false, s.k, pq, crs, ws.data(), col.data(), T(0), ys.data() + n * s.k * pq);
        if (bias.defined())
            for (int64_t k = 0; k < s.k; ++k) {
                T b = static_cast<T>(cpu::get(bias, k));
                T* plane = ys.data() + (n * s.k + k) * pq;
                for (int64_t i = 0; i < pq; ++i) plane[i] += b;
            }
    }
    cpu::store_nchw(ys, y, GradWrite::store);
}

template <class T>
void backward_data(const Tensor& weight, const Tensor& dy, const Tensor& dx, const Conv2dParams& params,
                   GradWrite write, const ConvShape& s) {
    std::vector<T> ws = cpu::load_nchw<T>(weight), dys = cpu::load_nchw<T>(dy);
    std::vector<T> dxs(static_cast<std::size_t>(dx.numel()), T(0));
    const int64_t crs = s.c * s.r * s.s, pq = s.p * s.q;
    std::vector<T> col(static_cast<std::size_t>(crs * pq));
    for (int64_t n = 0; n < s.n; ++n) {
        // col[CRS, PQ] = W^T[CRS, K] dy[K, PQ]
        gemm(true, false, crs, pq, s.k, ws.data(), dys.data() + n * s.k * pq, T(0), col.data());
        col2im_add(col.data(), s, params, dxs.data() + n * s.c * s.h * s.w);
    }
    cpu::store_nchw(dxs, dx, write);
}

template <class T>
void backward_filter(const Tensor& x, const Tensor& dy, const Tensor& dweight, const Conv2dParams& params,
                     GradWrite write, const ConvShape& s) {
    std::vector<T> xs = cpu::load_nchw<T>(x), dys = cpu::load_nchw<T>(dy);
    const int64_t crs = s.c * s.r * s.s, pq = s.p * s.q;
    std::vector<T> dws(static_cast<std::size_t>(s.k * crs), T(0));
    std::vector<T> col(static_cast<std::size_t>(crs * pq));
    for (int64_t n = 0; n < s.n; ++n) {
        im2col(xs.data() + n * s.c * s.h * s.w, s, params, col.data());
        // dW[K, CRS] += dy[K, PQ] col^T[PQ, CRS]
        gemm(false, true, s.k, crs, pq, dys.data() + n * s.k * pq, col.data(), T(1), dws.data());
    }
    cpu::store_nchw(dws, dweight, write);
}

}  // namespace

namespace {

// The checks every twin makes, fast or reference.
ConvShape check_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                        const Conv2dParams& params) {
    ConvShape s = check_conv(op, x, weight, y, params);
    if (bias.defined()) {
        cpu::check_float_cpu(bias, op, "bias");
        require(bias.numel() == s.k, op, "bias must have K elements");
    }
    return s;
}

// f32 tensors of one layout with something to compute go to oneDNN.
bool fast_path(std::initializer_list<const Tensor*> tensors) {
    if (cpu::op_implementation() != cpu::OpImplementation::fast) return false;
    for (const Tensor* t : tensors)
        if (t->defined() && (t->dtype != DType::f32 || t->numel() == 0)) return false;
    return true;
}

// The reference loops compute in double for f64 tensors and in float for the others:
// body(double{}) or body(float{}).
template <class Body>
void in_compute_type(DType t, Body body) {
    if (t == DType::f64)
        body(double{});
    else
        body(float{});
}

}  // namespace

void conv2d_forward_reference_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                                  const Conv2dParams& params) {
    ConvShape s = check_forward("conv2d_forward_cpu", x, weight, bias, y, params);
    in_compute_type(x.dtype, [&](auto zero) { forward<decltype(zero)>(x, weight, bias, y, params, s); });
}

void conv2d_backward_data_reference_cpu(const Tensor& weight, const Tensor& dy, const Tensor& dx,
                                        const Conv2dParams& params, GradWrite write) {
    ConvShape s = check_conv("conv2d_backward_data_cpu", dx, weight, dy, params);
    in_compute_type(dx.dtype, [&](auto zero) { backward_data<decltype(zero)>(weight, dy, dx, params, write, s); });
}

void conv2d_backward_filter_reference_cpu(const Tensor& x, const Tensor& dy, const Tensor& dweight,
                                          const Conv2dParams& params, GradWrite write) {
    ConvShape s = check_conv("conv2d_backward_filter_cpu", x, dweight, dy, params);
    in_compute_type(x.dtype, [&](auto zero) { backward_filter<decltype(zero)>(x, dy, dweight, params, write, s); });
}

namespace {
void check_backward_bias(const Tensor& dy, const Tensor& dbias) {
    const char* op = "conv2d_backward_bias_cpu";
    cpu::check_float_cpu(dy, op, "dy");
    cpu::check_float_cpu(dbias, op, "dbias");
    require(dy.rank == 4 && dbias.numel() == dy.shape[1], op, "dbias must have K elements");
}
}  // namespace

void conv2d_backward_bias_reference_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write) {
    check_backward_bias(dy, dbias);
    const int64_t plane = dy.shape[2] * dy.shape[3];
    std::vector<double> sums(static_cast<std::size_t>(dy.shape[1]), 0.0);
    for (int64_t n = 0; n < dy.shape[0]; ++n)
        for (int64_t k = 0; k < dy.shape[1]; ++k)
            for (int64_t i = 0; i < plane; ++i) sums[k] += cpu::get(dy, cpu::channel_offset(dy, n, k, i));
    for (int64_t k = 0; k < dy.shape[1]; ++k) cpu::write(dbias, k, sums[k], write);
}

void conv2d_forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                        const Conv2dParams& params) {
    if (!fast_path({&x, &weight, &bias, &y})) return conv2d_forward_reference_cpu(x, weight, bias, y, params);
    check_forward("conv2d_forward_cpu", x, weight, bias, y, params);
    cpu::onednn_conv2d_forward(x, weight, bias, y, params);
}

void conv2d_backward_data_cpu(const Tensor& weight, const Tensor& dy, const Tensor& dx, const Conv2dParams& params,
                              GradWrite write) {
    if (!fast_path({&weight, &dy, &dx})) return conv2d_backward_data_reference_cpu(weight, dy, dx, params, write);
    check_conv("conv2d_backward_data_cpu", dx, weight, dy, params);
    cpu::onednn_conv2d_backward_data(weight, dy, dx, params, write);
}

void conv2d_backward_filter_cpu(const Tensor& x, const Tensor& dy, const Tensor& dweight, const Conv2dParams& params,
                                GradWrite write) {
    if (!fast_path({&x, &dy, &dweight})) return conv2d_backward_filter_reference_cpu(x, dy, dweight, params, write);
    check_conv("conv2d_backward_filter_cpu", x, dweight, dy, params);
    cpu::onednn_conv2d_backward_filter(x, dy, dweight, params, write);
}

// The bias gradient is a per-channel sum: f32 tensors take plain-pointer loops (a plane
// per (n, k) in nchw, a row of K per position in nhwc), still summed in double.
void conv2d_backward_bias_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write) {
    if (!fast_path({&dy, &dbias})) return conv2d_backward_bias_reference_cpu(dy, dbias, write);
    check_backward_bias(dy, dbias);
    const int64_t N = dy.shape[0], K = dy.shape[1], plane = dy.shape[2] * dy.shape[3];
    const float* grad = dy.as<float>();
    std::vector<double> sums(static_cast<std::size_t>(K), 0.0);
    if (dy.layout == Layout::nhwc) {
        for (int64_t row = 0; row < N * plane; ++row)
            for (int64_t k = 0; k < K; ++k) sums[k] += grad[row * K + k];
    } else {
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) {
                const float* values = grad + (n * K + k) * plane;
                double total = 0.0;
                for (int64_t i = 0; i < plane; ++i) total += values[i];
                sums[k] += total;
            }
    }
    float* out = dbias.as<float>();
    for (int64_t k = 0; k < K; ++k)
        out[k] = static_cast<float>(write == GradWrite::accumulate ? out[k] + sums[k] : sums[k]);
}

}  // namespace ember::ops

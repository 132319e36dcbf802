// gemm.cpp: CPU GEMM (OpenBLAS sgemm/dgemm) with bias / bias+GELU epilogue, and the
// nn.Linear forward/backward on top of it. f16/bf16 operands are widened to float
// (exactly) and multiplied with fp32 accumulation, as cuBLASLt does on the device.
// These loops are the reference (ops::*_reference_cpu); f32 operands take the fast path
// of onednn_gemm.cpp (implementation.h says how to choose).
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/implementation.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/ops/gelu.h"
#include "engine/ops/gemm.h"

#include <cblas.h>

#include <cmath>
#include <type_traits>
#include <vector>

namespace ember::ops {
namespace {

std::vector<float> widen(const Tensor& t) {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_as_float(t.data, t.dtype, i);
    return out;
}

double gelu_double(double x) {
    const double k = 0.7978845608028654;
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

}  // namespace

GemmSizes check_gemm_sizes(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args) {
    require(a.dtype == b.dtype, op, "A and B dtypes differ: " + a.describe() + ", " + b.describe());
    for (const Tensor* t : {&a, &b, &c})
        require(!(t->rank == 4 && t->layout == Layout::nhwc), op,
                "operands are read as row-major matrices; convert channels-last first: " + t->describe());
    require(c.dtype == a.dtype || c.dtype == DType::f32, op, "C must be f32 or A's dtype: " + c.describe());
    const int64_t m = args.transpose_a ? a.cols() : a.rows();
    const int64_t k = args.transpose_a ? a.rows() : a.cols();
    const int64_t kb = args.transpose_b ? b.cols() : b.rows();
    const int64_t n = args.transpose_b ? b.rows() : b.cols();
    require(k == kb, op, "inner dimensions differ: " + a.describe() + " x " + b.describe());
    require(c.rows() == m && c.cols() == n, op,
            "C must be [" + std::to_string(m) + "," + std::to_string(n) + "]: " + c.describe());
    if (args.epilogue != Epilogue::none)
        require(args.bias.numel() == n && args.bias.dtype == c.dtype, op,
                "bias must have N elements of C's dtype: " + args.bias.describe());
    return {m, n, k};
}

namespace {

GemmSizes check_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args) {
    const char* op = "gemm_cpu";
    cpu::check_float_cpu(a, op, "A");
    cpu::check_float_cpu(b, op, "B");
    cpu::check_float_cpu(c, op, "C");
    if (args.epilogue != Epilogue::none) cpu::check_float_cpu(args.bias, op, "bias");
    const GemmSizes sizes = check_gemm_sizes(op, a, b, c, args);
    require(a.dtype != DType::f64 || c.dtype == DType::f64, op, "f64 GEMM needs an f64 C");
    const bool save_pre = args.epilogue == Epilogue::bias_gelu && args.pre_activation.defined();
    if (save_pre) cpu::check_same_shape(args.pre_activation, c, op);
    return sizes;
}

}  // namespace

void gemm_reference_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args) {
    const auto [m, n, k] = check_gemm(a, b, c, args);
    const bool has_bias = args.epilogue != Epilogue::none;
    const bool save_pre = args.epilogue == Epilogue::bias_gelu && args.pre_activation.defined();
    const CBLAS_TRANSPOSE ta = args.transpose_a ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = args.transpose_b ? CblasTrans : CblasNoTrans;

    auto epilogue = [&](auto* values) {
        if (!has_bias) return;
        for (int64_t r = 0; r < m; ++r)
            for (int64_t col = 0; col < n; ++col) {
                double v = double(values[r * n + col]) + cpu::get(args.bias, col);
                if (args.epilogue == Epilogue::bias_gelu) {
                    if (save_pre) {
                        // The kernel path stores the pre-activation, then applies GELU to
                        // the stored (rounded) value; do the same.
                        if (c.dtype != DType::f64) v = round_to_dtype(static_cast<float>(v), c.dtype);
                        cpu::set(args.pre_activation, r * n + col, v);
                    }
                    v = a.dtype == DType::f64 ? gelu_double(v) : gelu_tanh(static_cast<float>(v));
                }
                values[r * n + col] = static_cast<std::remove_reference_t<decltype(values[0])>>(v);
            }
    };

    if (a.dtype == DType::f64) {
        if (m > 0 && n > 0)
            cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, args.alpha, a.as<double>(), a.cols(), b.as<double>(), b.cols(),
                        args.beta, c.as<double>(), n);
        epilogue(c.as<double>());
        return;
    }
    std::vector<float> a_wide, b_wide, c_wide;
    const float* a_ptr = a.as<float>();
    const float* b_ptr = b.as<float>();
    if (a.dtype != DType::f32) {
        a_wide = widen(a);
        b_wide = widen(b);
        a_ptr = a_wide.data();
        b_ptr = b_wide.data();
    }
    float* c_ptr = c.as<float>();
    if (c.dtype != DType::f32) {
        c_wide = args.beta != 0.0f ? widen(c) : std::vector<float>(static_cast<std::size_t>(c.numel()));
        c_ptr = c_wide.data();
    }
    if (m > 0 && n > 0)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, args.alpha, a_ptr, a.cols(), b_ptr, b.cols(), args.beta, c_ptr, n);
    epilogue(c_ptr);
    if (c.dtype != DType::f32)
        for (int64_t i = 0, end = c.numel(); i < end; ++i) store_from_float(c.data, c.dtype, i, c_ptr[i]);
}

GemmArgs linear_forward_args(const char* op, const Tensor& bias, bool gelu, const Tensor& pre_activation) {
    require(!gelu || bias.defined(), op, "the GELU epilogue needs a bias");
    GemmArgs args;
    args.transpose_b = true;
    args.epilogue = gelu ? Epilogue::bias_gelu : (bias.defined() ? Epilogue::bias : Epilogue::none);
    args.bias = bias;
    args.pre_activation = pre_activation;
    return args;
}

void linear_forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, bool gelu,
                        const Tensor& pre_activation) {
    gemm_cpu(x, weight, y, linear_forward_args("linear_forward_cpu", bias, gelu, pre_activation));
}

void linear_backward_cpu(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias, GradWrite input_write, GradWrite param_write) {
    if (dx.defined()) {
        GemmArgs args;  // dx[M,K] = dy[M,N] W[N,K]
        args.beta = input_write == GradWrite::accumulate ? 1.0f : 0.0f;
        gemm_cpu(dy, weight, dx, args);
    }
    if (dweight.defined()) {
        GemmArgs args;  // dW[N,K] = dy^T[N,M] x[M,K]
        args.transpose_a = true;
        args.beta = param_write == GradWrite::accumulate ? 1.0f : 0.0f;
        gemm_cpu(dy, x, dweight, args);
    }
    if (dbias.defined()) bias_backward_cpu(dy, dbias, param_write);
}

void gemm_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args) {
    const bool fast = cpu::op_implementation() == cpu::OpImplementation::fast &&
                      cpu::all_f32({&a, &b, &c, &args.bias, &args.pre_activation});
    if (!fast) return gemm_reference_cpu(a, b, c, args);
    const auto [m, n, k] = check_gemm(a, b, c, args);
    if (m == 0 || n == 0 || k == 0) return gemm_reference_cpu(a, b, c, args);
    cpu::fast_gemm(a, b, c, args, m, n, k);
}

namespace {
void check_bias_backward(const Tensor& dy, const Tensor& dbias) {
    const char* op = "bias_backward_cpu";
    cpu::check_float_cpu(dy, op, "dy");
    cpu::check_float_cpu(dbias, op, "dbias");
    require(dbias.numel() == dy.cols(), op, "dbias must have " + std::to_string(dy.cols()) + " elements");
}
}  // namespace

void bias_backward_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write) {
    if (cpu::op_implementation() != cpu::OpImplementation::fast || !cpu::all_f32({&dy, &dbias}))
        return bias_backward_reference_cpu(dy, dbias, write);
    check_bias_backward(dy, dbias);
    cpu::fast_bias_backward(dy, dbias, write);
}

void bias_backward_reference_cpu(const Tensor& dy, const Tensor& dbias, GradWrite write) {
    check_bias_backward(dy, dbias);
    const int64_t rows = dy.rows(), cols = dy.cols();
    std::vector<double> sums(static_cast<std::size_t>(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < cols; ++col) sums[col] += cpu::get(dy, r * cols + col);
    for (int64_t col = 0; col < cols; ++col) cpu::write(dbias, col, sums[col], write);
}

namespace {
Tensor matrix_at(const Tensor& stack, int64_t i, int64_t rows, int64_t cols) {
    char* base = static_cast<char*>(stack.data) + i * rows * cols * static_cast<int64_t>(dtype_size(stack.dtype));
    return make_tensor(base, stack.dtype, {rows, cols}, stack.device);
}
}  // namespace

void batched_gemm_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& s) {
    if (cpu::op_implementation() != cpu::OpImplementation::fast || !cpu::all_f32({&a, &b, &c}) || s.count == 0 ||
        s.m == 0 || s.n == 0 || s.k == 0)
        return batched_gemm_reference_cpu(a, b, c, s);
    check_batched_gemm(a, b, c, s);
    for (const Tensor* t : {&a, &b, &c}) cpu::check_float_cpu(*t, "batched_gemm_cpu", "operand");
    cpu::onednn_batched_gemm(a, b, c, s);
}

void batched_gemm_reference_cpu(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemmShape& s) {
    check_batched_gemm(a, b, c, s);
    const int64_t a_rows = s.transpose_a ? s.k : s.m, a_cols = s.transpose_a ? s.m : s.k;
    const int64_t b_rows = s.transpose_b ? s.n : s.k, b_cols = s.transpose_b ? s.k : s.n;
    GemmArgs args;
    args.transpose_a = s.transpose_a;
    args.transpose_b = s.transpose_b;
    args.alpha = s.alpha;
    for (int64_t i = 0; i < s.count; ++i)
        gemm_reference_cpu(matrix_at(a, i, a_rows, a_cols), matrix_at(b, i, b_rows, b_cols), matrix_at(c, i, s.m, s.n),
                           args);
}

}  // namespace ember::ops

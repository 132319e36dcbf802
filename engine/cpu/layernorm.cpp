// layernorm.cpp: CPU LayerNorm over the last dim, forward and backward, in double: the
// fused form (one pass per row) and the unfused twin of the CUDA kernel chain (one loop
// per kernel, intermediates stored in the scratch tensor's dtype). On the fast path
// (parallel.h) f32 tensors of the fused form take plain-pointer loops with the same
// double arithmetic, rows split over the thread team (dgamma/dbeta: columns split), so
// both paths agree bit for bit.
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::ops {
namespace {

void check_ln_params(const char* op, const Tensor& x, std::initializer_list<std::pair<Tensor, const char*>> params,
                     int64_t expected) {
    for (auto& [t, name] : params) {
        cpu::check_float_cpu(t, op, name);
        require(t.numel() == expected, op,
                std::string(name) + " must have " + std::to_string(expected) + " elements: " + t.describe());
    }
}

// x and the tensor of its shape the op reads or writes alongside (y forward, dy backward):
// float cpu tensors of the same shape.
void check_input_pair(const char* op, const Tensor& x, const Tensor& other, const char* name) {
    cpu::check_float_cpu(x, op, "x");
    cpu::check_float_cpu(other, op, name);
    cpu::check_same_shape(x, other, op);
}

// Scratch for the unfused forms: f32 (as on cuda) or f64 (finite-difference checks).
void check_scratch(const char* op, const Tensor& scratch, int64_t expected) {
    require(scratch.defined() && scratch.device == Device::cpu &&
                (scratch.dtype == DType::f32 || scratch.dtype == DType::f64) && scratch.numel() >= expected,
            op,
            "scratch must be a cpu f32 or f64 tensor with at least " + std::to_string(expected) + " elements" +
                (scratch.defined() ? ": " + scratch.describe() : ""));
}

// A [count] slice of the scratch tensor starting at element `offset`.
Tensor scratch_slice(const Tensor& scratch, int64_t offset, int64_t count) {
    char* base = static_cast<char*>(scratch.data) + offset * static_cast<int64_t>(dtype_size(scratch.dtype));
    return make_tensor(base, scratch.dtype, {count}, Device::cpu);
}

// The kernels of the unfused chain, one loop each (in[rows, C] row-major).
void row_mean(const Tensor& in, int64_t rows, int64_t C, const Tensor& out) {
    for (int64_t r = 0; r < rows; ++r) {
        double sum = 0.0;
        for (int64_t c = 0; c < C; ++c) sum += cpu::get(in, r * C + c);
        cpu::set(out, r, sum / double(C));
    }
}

void row_rstd(const Tensor& x, const Tensor& mean, int64_t rows, int64_t C, float eps, const Tensor& rstd) {
    for (int64_t r = 0; r < rows; ++r) {
        const double row_mean_value = cpu::get(mean, r);
        double squares = 0.0;
        for (int64_t c = 0; c < C; ++c) {
            double centered = cpu::get(x, r * C + c) - row_mean_value;
            squares += centered * centered;
        }
        cpu::set(rstd, r, layernorm_rstd(squares / double(C), double(eps)));
    }
}

void normalize(const Tensor& x, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t C, const Tensor& xhat) {
    for (int64_t i = 0; i < rows * C; ++i)
        cpu::set(xhat, i, layernorm_normalize(cpu::get(x, i), cpu::get(mean, i / C), cpu::get(rstd, i / C)));
}

// out[i] = a[i] * b[i % period] (period = C: times gamma; period = n: elementwise).
void multiply(const Tensor& a, const Tensor& b, int64_t n, int64_t period, const Tensor& out) {
    for (int64_t i = 0; i < n; ++i) cpu::set(out, i, cpu::get(a, i) * cpu::get(b, i % period));
}

void column_sum(const Tensor& in, int64_t rows, int64_t C, const Tensor& out, GradWrite write) {
    std::vector<double> sums(static_cast<std::size_t>(C), 0.0);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < C; ++c) sums[c] += cpu::get(in, r * C + c);
    for (int64_t c = 0; c < C; ++c) cpu::write(out, c, sums[c], write);
}

void forward_f32(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y, const Tensor& save_mean,
                 const Tensor& save_rstd, float eps, int64_t rows, int64_t C) {
    const float *in = x.as<float>(), *g = gamma.as<float>(), *b = beta.as<float>();
    float *out = y.as<float>(), *means = save_mean.as<float>(), *rstds = save_rstd.as<float>();
    cpu::parallel_for(rows, std::max<int64_t>(1, 4096 / C), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* row = in + r * C;
            double sum = 0.0;
            for (int64_t c = 0; c < C; ++c) sum += row[c];
            const double mean = sum / double(C);
            double squares = 0.0;
            for (int64_t c = 0; c < C; ++c) {
                const double d = row[c] - mean;
                squares += d * d;
            }
            const double rstd = 1.0 / std::sqrt(squares / double(C) + eps);
            for (int64_t c = 0; c < C; ++c) out[r * C + c] = static_cast<float>((row[c] - mean) * rstd * g[c] + b[c]);
            means[r] = static_cast<float>(mean);
            rstds[r] = static_cast<float>(rstd);
        }
    });
}

void backward_f32(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                  const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                  GradWrite input_write, GradWrite param_write, int64_t rows, int64_t C) {
    const float *in = x.as<float>(), *grad_out = dy.as<float>(), *g = gamma.as<float>();
    const float *means = save_mean.as<float>(), *rstds = save_rstd.as<float>();
    if (dx.defined()) {
        float* grad_in = dx.as<float>();
        cpu::parallel_for(rows, std::max<int64_t>(1, 4096 / C), [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const int64_t base = r * C;
                const double mean = means[r], rstd = rstds[r];
                double mean_g = 0.0, mean_g_xhat = 0.0;
                for (int64_t c = 0; c < C; ++c) {
                    const double xhat = (in[base + c] - mean) * rstd;
                    const double gc = double(grad_out[base + c]) * g[c];
                    mean_g += gc;
                    mean_g_xhat += gc * xhat;
                }
                mean_g /= double(C);
                mean_g_xhat /= double(C);
                for (int64_t c = 0; c < C; ++c) {
                    const double xhat = (in[base + c] - mean) * rstd;
                    const double gc = double(grad_out[base + c]) * g[c];
                    double v = rstd * (gc - mean_g - xhat * mean_g_xhat);
                    if (input_write == GradWrite::accumulate) v += grad_in[base + c];
                    grad_in[base + c] = static_cast<float>(v);
                }
            }
        });
    }
    // Column sums in row order, one column by one thread: the reference's sums.
    float *dgamma_out = dgamma.as<float>(), *dbeta_out = dbeta.as<float>();
    cpu::parallel_for(C, 8, [&](int64_t c_begin, int64_t c_end) {
        std::vector<double> dgamma_sum(static_cast<std::size_t>(c_end - c_begin), 0.0), dbeta_sum(dgamma_sum);
        for (int64_t r = 0; r < rows; ++r) {
            const double mean = means[r], rstd = rstds[r];
            for (int64_t c = c_begin; c < c_end; ++c) {
                const double xhat = (in[r * C + c] - mean) * rstd;
                const double d = grad_out[r * C + c];
                dgamma_sum[c - c_begin] += d * xhat;
                dbeta_sum[c - c_begin] += d;
            }
        }
        for (int64_t c = c_begin; c < c_end; ++c) {
            const bool accumulate = param_write == GradWrite::accumulate;
            dgamma_out[c] =
                static_cast<float>(accumulate ? dgamma_out[c] + dgamma_sum[c - c_begin] : dgamma_sum[c - c_begin]);
            dbeta_out[c] =
                static_cast<float>(accumulate ? dbeta_out[c] + dbeta_sum[c - c_begin] : dbeta_sum[c - c_begin]);
        }
    });
}

}  // namespace

void layernorm_forward_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                           const Tensor& save_mean, const Tensor& save_rstd, float eps) {
    const char* op = "layernorm_forward_cpu";
    check_input_pair(op, x, y, "y");
    const int64_t rows = x.rows(), C = x.cols();
    check_ln_params(op, x, {{gamma, "gamma"}, {beta, "beta"}}, C);
    check_ln_params(op, x, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}}, rows);
    if (cpu::fast_f32({&x, &gamma, &beta, &y, &save_mean, &save_rstd}) && C > 0)
        return forward_f32(x, gamma, beta, y, save_mean, save_rstd, eps, rows, C);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = r * C;
        double sum = 0.0;
        for (int64_t c = 0; c < C; ++c) sum += cpu::get(x, base + c);
        const double mean = sum / double(C);
        double squares = 0.0;
        for (int64_t c = 0; c < C; ++c) {
            double d = cpu::get(x, base + c) - mean;
            squares += d * d;
        }
        const double rstd = 1.0 / std::sqrt(squares / double(C) + eps);
        for (int64_t c = 0; c < C; ++c)
            cpu::set(y, base + c, (cpu::get(x, base + c) - mean) * rstd * cpu::get(gamma, c) + cpu::get(beta, c));
        cpu::set(save_mean, r, mean);
        cpu::set(save_rstd, r, rstd);
    }
}

void layernorm_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                            const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                            GradWrite input_write, GradWrite param_write) {
    const char* op = "layernorm_backward_cpu";
    check_input_pair(op, x, dy, "dy");
    const int64_t rows = x.rows(), C = x.cols();
    check_ln_params(op, x, {{gamma, "gamma"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}}, C);
    check_ln_params(op, x, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}}, rows);
    if (dx.defined()) {
        cpu::check_float_cpu(dx, op, "dx");
        cpu::check_same_shape(x, dx, op);
    }
    if (cpu::fast_f32({&x, &dy, &gamma, &save_mean, &save_rstd, &dx, &dgamma, &dbeta}) && C > 0)
        return backward_f32(x, dy, gamma, save_mean, save_rstd, dx, dgamma, dbeta, input_write, param_write, rows, C);
    std::vector<double> dgamma_sum(static_cast<std::size_t>(C), 0.0), dbeta_sum(dgamma_sum);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = r * C;
        const double mean = cpu::get(save_mean, r), rstd = cpu::get(save_rstd, r);
        double mean_g = 0.0, mean_g_xhat = 0.0;
        for (int64_t c = 0; c < C; ++c) {
            double xhat = (cpu::get(x, base + c) - mean) * rstd;
            double d = cpu::get(dy, base + c);
            double g = d * cpu::get(gamma, c);
            mean_g += g;
            mean_g_xhat += g * xhat;
            dgamma_sum[c] += d * xhat;
            dbeta_sum[c] += d;
        }
        mean_g /= double(C);
        mean_g_xhat /= double(C);
        if (!dx.defined()) continue;
        for (int64_t c = 0; c < C; ++c) {
            double xhat = (cpu::get(x, base + c) - mean) * rstd;
            double g = cpu::get(dy, base + c) * cpu::get(gamma, c);
            cpu::write(dx, base + c, rstd * (g - mean_g - xhat * mean_g_xhat), input_write);
        }
    }
    for (int64_t c = 0; c < C; ++c) {
        cpu::write(dgamma, c, dgamma_sum[c], param_write);
        cpu::write(dbeta, c, dbeta_sum[c], param_write);
    }
}

// ---- unfused --------------------------------------------------------------------------

void layernorm_forward_unfused_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                                   const Tensor& save_mean, const Tensor& save_rstd, const Tensor& scratch, float eps) {
    const char* op = "layernorm_forward_unfused_cpu";
    check_input_pair(op, x, y, "y");
    const int64_t rows = x.rows(), C = x.cols(), n = rows * C;
    check_ln_params(op, x, {{gamma, "gamma"}, {beta, "beta"}}, C);
    check_ln_params(op, x, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}}, rows);
    check_scratch(op, scratch, layernorm_forward_unfused_scratch(rows, C));
    Tensor xhat = scratch_slice(scratch, 0, n);
    row_mean(x, rows, C, save_mean);
    row_rstd(x, save_mean, rows, C, eps, save_rstd);
    normalize(x, save_mean, save_rstd, rows, C, xhat);
    for (int64_t i = 0; i < n; ++i)
        cpu::set(y, i, layernorm_affine(cpu::get(xhat, i), cpu::get(gamma, i % C), cpu::get(beta, i % C)));
}

void layernorm_backward_unfused_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_rstd, const Tensor& dx, const Tensor& dgamma,
                                    const Tensor& dbeta, const Tensor& scratch, GradWrite input_write,
                                    GradWrite param_write) {
    const char* op = "layernorm_backward_unfused_cpu";
    check_input_pair(op, x, dy, "dy");
    const int64_t rows = x.rows(), C = x.cols(), n = rows * C;
    check_ln_params(op, x, {{gamma, "gamma"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}}, C);
    check_ln_params(op, x, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}}, rows);
    if (dx.defined()) {
        cpu::check_float_cpu(dx, op, "dx");
        cpu::check_same_shape(x, dx, op);
    }
    check_scratch(op, scratch, layernorm_backward_unfused_scratch(rows, C));
    Tensor xhat = scratch_slice(scratch, 0, n), g = scratch_slice(scratch, n, n);
    Tensor product = scratch_slice(scratch, 2 * n, n);
    Tensor mean_g = scratch_slice(scratch, 3 * n, rows), mean_g_xhat = scratch_slice(scratch, 3 * n + rows, rows);
    normalize(x, save_mean, save_rstd, rows, C, xhat);
    if (dx.defined()) {
        multiply(dy, gamma, n, C, g);
        row_mean(g, rows, C, mean_g);
        multiply(g, xhat, n, n, product);
        row_mean(product, rows, C, mean_g_xhat);
        for (int64_t i = 0; i < n; ++i) {
            const int64_t r = i / C;
            cpu::write(dx, i,
                       layernorm_input_grad(cpu::get(g, i), cpu::get(xhat, i), cpu::get(save_rstd, r),
                                            cpu::get(mean_g, r), cpu::get(mean_g_xhat, r)),
                       input_write);
        }
    }
    multiply(dy, xhat, n, n, product);
    column_sum(product, rows, C, dgamma, param_write);
    column_sum(dy, rows, C, dbeta, param_write);
}

}  // namespace ember::ops

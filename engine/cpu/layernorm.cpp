// layernorm.cpp: CPU LayerNorm over the last dim, forward and backward, in double.
#include "engine/cpu/cpu_util.h"
#include "engine/ops/layernorm.h"

#include <cmath>
#include <vector>

namespace ember::ops {
namespace {

void check_ln_params(const char* op, const Tensor& x, std::initializer_list<std::pair<Tensor, const char*>> params,
                     int64_t expected) {
    for (auto& [t, name] : params) {
        cpu::check_float_cpu(t, op, name);
        require(t.numel() == expected, op,
                std::string(name) + " must have " + std::to_string(expected) + " elements: " +
                    t.describe());
    }
}

}  // namespace

void layernorm_forward_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& y, const Tensor& save_mean, const Tensor& save_rstd,
                           float eps) {
    const char* op = "layernorm_forward_cpu";
    cpu::check_float_cpu(x, op, "x");
    cpu::check_float_cpu(y, op, "y");
    cpu::check_same_shape(x, y, op);
    const int64_t rows = x.rows(), C = x.cols();
    check_ln_params(op, x, {{gamma, "gamma"}, {beta, "beta"}}, C);
    check_ln_params(op, x, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}}, rows);
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
            cpu::set(y, base + c,
                     (cpu::get(x, base + c) - mean) * rstd * cpu::get(gamma, c) + cpu::get(beta, c));
        cpu::set(save_mean, r, mean);
        cpu::set(save_rstd, r, rstd);
    }
}

void layernorm_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                            const Tensor& save_mean, const Tensor& save_rstd, const Tensor& dx,
                            const Tensor& dgamma, const Tensor& dbeta, GradWrite input_write,
                            GradWrite param_write) {
    const char* op = "layernorm_backward_cpu";
    cpu::check_float_cpu(x, op, "x");
    cpu::check_float_cpu(dy, op, "dy");
    cpu::check_same_shape(x, dy, op);
    const int64_t rows = x.rows(), C = x.cols();
    check_ln_params(op, x, {{gamma, "gamma"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}}, C);
    check_ln_params(op, x, {{save_mean, "save_mean"}, {save_rstd, "save_rstd"}}, rows);
    if (dx.defined()) {
        cpu::check_float_cpu(dx, op, "dx");
        cpu::check_same_shape(x, dx, op);
    }
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

}  // namespace ember::ops

// batchnorm.cpp: CPU BatchNorm (training with batch statistics and running-stat
// update, eval with running statistics, backward), in double: f32 nchw planes,
// channels-last rows (nhwc and (N,C)), and a generic per-element path.
// The f32 loops run over slices of channels (statistics, gradient sums) or of rows
// (the elementwise passes), which the fast path splits over the thread team
// (parallel.h); each channel's sums keep their order, so both paths agree bit for bit.
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/parallel.h"
#include "engine/ops/batchnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::ops {
namespace {

struct BnShape {
    int64_t n, c, spatial;
};

BnShape check_bn(const char* op, const Tensor& x, const Tensor& y) {
    cpu::check_float_cpu(x, op, "x");
    cpu::check_float_cpu(y, op, "y");
    cpu::check_same_shape(x, y, op);
    require(x.rank == 2 || x.rank == 4, op, "x must be (N,C) or (N,C,H,W): " + x.describe());
    require(x.rank != 4 || x.layout == y.layout, op, "x and y layouts differ");
    return {x.shape[0], x.shape[1], x.rank == 4 ? x.shape[2] * x.shape[3] : 1};
}

void check_channel_param(const char* op, const Tensor& t, const char* name, int64_t c) {
    cpu::check_float_cpu(t, op, name);
    require(t.numel() == c, op, std::string(name) + " must have C=" + std::to_string(c) + " elements: " + t.describe());
}

// nchw f32 (or any rank-4 f32 nchw tensor): channel c of image n is one contiguous
// plane, so the loops below run over plain pointers.
bool fast_nchw(std::initializer_list<const Tensor*> tensors) {
    for (const Tensor* t : tensors)
        if (t->defined() && (t->dtype != DType::f32 || t->rank != 4 || t->layout != Layout::nchw)) return false;
    return true;
}

// A channel's planes lie one image apart (C planes between them), so each starts a new
// stream the hardware prefetcher has not seen: ask for the start of the next one while
// the current one is summed.
inline void prefetch_plane_start(const float* plane, int64_t length) {
    const int64_t lines = std::min<int64_t>(length, 256) / 16;  // up to 1 KiB, one request per 64-byte line
    for (int64_t i = 0; i < lines; ++i) __builtin_prefetch(plane + i * 16);
}

// Plane reductions with eight float lanes, which the compiler vectorizes (a single
// double accumulator cannot be reordered); lanes are summed in double per plane.
constexpr int kLanes = 8;

double plane_sum(const float* v, int64_t n, float centre, bool squares) {
    float lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) {
            const float d = v[i + j] - centre;
            lanes[j] += squares ? d * d : d;
        }
    double total = 0.0;
    for (; i < n; ++i) {
        const double d = double(v[i]) - centre;
        total += squares ? d * d : d;
    }
    for (int j = 0; j < kLanes; ++j) total += lanes[j];
    return total;
}

// sum(dy) and sum(dy (x - centre)) over one plane.
void plane_gradient_sums(const float* dy, const float* x, int64_t n, float centre, double& sum_dy,
                         double& sum_dy_centred) {
    float lanes_dy[kLanes] = {}, lanes_dyx[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) {
            lanes_dy[j] += dy[i + j];
            lanes_dyx[j] += dy[i + j] * (x[i + j] - centre);
        }
    for (; i < n; ++i) {
        sum_dy += dy[i];
        sum_dy_centred += double(dy[i]) * (double(x[i]) - centre);
    }
    for (int j = 0; j < kLanes; ++j) {
        sum_dy += lanes_dy[j];
        sum_dy_centred += lanes_dyx[j];
    }
}

// Channels-last tensors (nhwc, and every (N,C) tensor) hold rows of C contiguous
// channel values, one row per (n, h, w). Their loops below walk the rows and keep
// per-channel double accumulators, with the generic path's formulas, for every dtype.
bool channels_innermost(const Tensor& x) {
    return x.rank == 2 || x.layout == Layout::nhwc;
}

struct ChannelRows {
    int64_t rows, channels;
};

ChannelRows channel_rows(const Tensor& x) {
    return {x.shape[1] > 0 ? x.numel() / x.shape[1] : 0, x.shape[1]};
}

std::vector<double> load_channels(const Tensor& t, int64_t channels) {
    std::vector<double> values(static_cast<std::size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) values[c] = cpu::get(t, c);
    return values;
}

// f32 channels-last rows: plain pointers, per-channel double accumulators (one row of
// C floats at a time, so the inner loops run over contiguous memory).

// sums[c] += sum over rows of (v[c] - centre[c]), or of its square, for the channels
// of one slice [c_begin, c_end). The running sums live in a local buffer: slices of
// neighbouring channels on two threads would otherwise write one cache line (8x slower
// in the backward pass at 16 channels).
void channel_sums_f32(const float* __restrict v, int64_t rows, int64_t C, int64_t c_begin, int64_t c_end,
                      const double* __restrict centre, bool squares, double* __restrict sums) {
    std::vector<double> local(static_cast<std::size_t>(c_end - c_begin));
    std::copy(sums + c_begin, sums + c_end, local.begin());
    double* __restrict acc = local.data();  // acc[c - c_begin]
    if (squares) {
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = c_begin; c < c_end; ++c) {
                const double d = v[r * C + c] - centre[c];
                acc[c - c_begin] += d * d;
            }
    } else {
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = c_begin; c < c_end; ++c) acc[c - c_begin] += v[r * C + c] - centre[c];
    }
    std::copy(local.begin(), local.end(), sums + c_begin);
}

// sum_dy[c] += sum of dy, sum_dy_centred[c] += sum of dy (x - centre[c]), over rows,
// for the channels of one slice (local running sums, as above).
void gradient_sums_f32(const float* __restrict dy, const float* __restrict x, int64_t rows, int64_t C, int64_t c_begin,
                       int64_t c_end, const double* __restrict centre, double* __restrict sum_dy,
                       double* __restrict sum_dy_centred) {
    const std::size_t slice = static_cast<std::size_t>(c_end - c_begin);
    std::vector<double> local_dy(slice), local_centred(slice);
    std::copy(sum_dy + c_begin, sum_dy + c_end, local_dy.begin());
    std::copy(sum_dy_centred + c_begin, sum_dy_centred + c_end, local_centred.begin());
    double* __restrict acc_dy = local_dy.data();  // [c - c_begin]
    double* __restrict acc_centred = local_centred.data();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = c_begin; c < c_end; ++c) {
            const double grad = dy[r * C + c];
            acc_dy[c - c_begin] += grad;
            acc_centred[c - c_begin] += grad * (x[r * C + c] - centre[c]);
        }
    std::copy(local_dy.begin(), local_dy.end(), sum_dy + c_begin);
    std::copy(local_centred.begin(), local_centred.end(), sum_dy_centred + c_begin);
}

// Channel slices: fewer than 4 channels per thread are not worth a thread (each thread
// then reads every row for a few of its channels).
constexpr int64_t kChannelGrain = 4;
// Row slices of the elementwise passes: at least ~16k values per thread.
int64_t row_grain(int64_t C) {
    return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, C));
}

// y = x scale[c] + shift[c] over rows of C.
void scale_shift_rows_f32(const float* x, float* y, int64_t rows, int64_t C, const float* scale, const float* shift) {
    cpu::for_slices(rows, row_grain(C), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
            for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * scale[c] + shift[c];
    });
}

// Channel c's batch statistics after a training forward: mean and 1/std saved for the
// backward pass, and folded into the running statistics (when kept) with the unbiased
// variance, as torch.nn.BatchNorm2d does.
void record_channel_stats(int64_t c, double mean, double squares, double count, double invstd, const Tensor& save_mean,
                          const Tensor& save_invstd, const Tensor& running_mean, const Tensor& running_var,
                          double momentum) {
    cpu::set(save_mean, c, mean);
    cpu::set(save_invstd, c, invstd);
    if (!running_mean.defined()) return;
    const double unbiased = count > 1 ? squares / (count - 1) : squares / count;
    cpu::set(running_mean, c, (1 - momentum) * cpu::get(running_mean, c) + momentum * mean);
    cpu::set(running_var, c, (1 - momentum) * cpu::get(running_var, c) + momentum * unbiased);
}

void forward_train_rows_f32(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                            const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                            const Tensor& save_invstd, const BatchNormParams& params) {
    const auto [rows, C] = channel_rows(x);
    const double count = double(rows);
    std::vector<double> sum(C, 0.0), squares(C, 0.0), zero(C, 0.0), mean(C);
    std::vector<float> scale(C), shift(C);
    cpu::for_slices(C, kChannelGrain, [&](int64_t c_begin, int64_t c_end) {
        channel_sums_f32(x.as<float>(), rows, C, c_begin, c_end, zero.data(), false, sum.data());
        for (int64_t c = c_begin; c < c_end; ++c) mean[c] = sum[c] / count;  // read by this slice only
        channel_sums_f32(x.as<float>(), rows, C, c_begin, c_end, mean.data(), true, squares.data());
    });
    for (int64_t c = 0; c < C; ++c) {
        const double var = squares[c] / count;
        const double invstd = 1.0 / std::sqrt(var + params.eps);
        scale[c] = static_cast<float>(cpu::get(gamma, c) * invstd);
        shift[c] = static_cast<float>(cpu::get(beta, c) - mean[c] * invstd * cpu::get(gamma, c));
        record_channel_stats(c, mean[c], squares[c], count, invstd, save_mean, save_invstd, running_mean, running_var,
                             params.momentum);
    }
    scale_shift_rows_f32(x.as<float>(), y.as<float>(), rows, C, scale.data(), shift.data());
}

void forward_eval_rows_f32(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& y, const BatchNormParams& params) {
    const auto [rows, C] = channel_rows(x);
    std::vector<float> scale(C), shift(C);
    for (int64_t c = 0; c < C; ++c) {
        const double invstd = 1.0 / std::sqrt(cpu::get(running_var, c) + params.eps);
        scale[c] = static_cast<float>(cpu::get(gamma, c) * invstd);
        shift[c] = static_cast<float>(cpu::get(beta, c) - cpu::get(running_mean, c) * invstd * cpu::get(gamma, c));
    }
    scale_shift_rows_f32(x.as<float>(), y.as<float>(), rows, C, scale.data(), shift.data());
}

void backward_rows_f32(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                       const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                       GradWrite input_write, GradWrite param_write) {
    const auto [rows, C] = channel_rows(x);
    const double count = double(rows);
    const float* in = x.as<float>();
    const float* grad_out = dy.as<float>();
    std::vector<double> centre(C), sum_dy(C, 0.0), sum_dy_centred(C, 0.0);
    for (int64_t c = 0; c < C; ++c) centre[c] = cpu::get(save_mean, c);
    cpu::for_slices(C, kChannelGrain, [&](int64_t c_begin, int64_t c_end) {
        gradient_sums_f32(grad_out, in, rows, C, c_begin, c_end, centre.data(), sum_dy.data(), sum_dy_centred.data());
    });
    // dx = scale (count dy - sum_dy - xhat sum_dy_xhat) = a dy + b x + k, per channel.
    std::vector<float> a(C), b(C), k(C);
    for (int64_t c = 0; c < C; ++c) {
        const double mean = cpu::get(save_mean, c), invstd = cpu::get(save_invstd, c);
        const double sum_dy_xhat = sum_dy_centred[c] * invstd;
        cpu::write(dgamma, c, sum_dy_xhat, param_write);
        cpu::write(dbeta, c, sum_dy[c], param_write);
        const double scale = cpu::get(gamma, c) * invstd / count;
        a[c] = static_cast<float>(scale * count);
        b[c] = static_cast<float>(-scale * invstd * sum_dy_xhat);
        k[c] = static_cast<float>(scale * (-sum_dy[c] + mean * invstd * sum_dy_xhat));
    }
    if (!dx.defined()) return;
    float* grad_in = dx.as<float>();
    cpu::for_slices(rows, row_grain(C), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
            for (int64_t c = 0; c < C; ++c)
                grad_in[r * C + c] = write_grad(grad_in[r * C + c],
                                                a[c] * grad_out[r * C + c] + b[c] * in[r * C + c] + k[c], input_write);
    });
}

void forward_train_rows(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                        const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                        const Tensor& save_invstd, const BatchNormParams& params) {
    const auto [rows, C] = channel_rows(x);
    const double count = double(rows);
    std::vector<double> row(C), sum(C, 0.0), squares(C, 0.0), mean(C), invstd(C);
    for (int64_t r = 0; r < rows; ++r) {
        cpu::load_row(x, r * C, C, row.data());
        for (int64_t c = 0; c < C; ++c) sum[c] += row[c];
    }
    for (int64_t c = 0; c < C; ++c) mean[c] = sum[c] / count;
    for (int64_t r = 0; r < rows; ++r) {
        cpu::load_row(x, r * C, C, row.data());
        for (int64_t c = 0; c < C; ++c) {
            const double d = row[c] - mean[c];
            squares[c] += d * d;
        }
    }
    const std::vector<double> g = load_channels(gamma, C), b = load_channels(beta, C);
    std::vector<double> scale(C);
    for (int64_t c = 0; c < C; ++c) {
        const double var = squares[c] / count;
        invstd[c] = 1.0 / std::sqrt(var + params.eps);
        scale[c] = invstd[c] * g[c];
        record_channel_stats(c, mean[c], squares[c], count, invstd[c], save_mean, save_invstd, running_mean,
                             running_var, params.momentum);
    }
    for (int64_t r = 0; r < rows; ++r) {
        cpu::load_row(x, r * C, C, row.data());
        for (int64_t c = 0; c < C; ++c) row[c] = (row[c] - mean[c]) * scale[c] + b[c];
        cpu::store_row(y, r * C, C, row.data(), GradWrite::store);
    }
}

void forward_eval_rows(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& y, const BatchNormParams& params) {
    const auto [rows, C] = channel_rows(x);
    const std::vector<double> mean = load_channels(running_mean, C), b = load_channels(beta, C);
    std::vector<double> scale(C), row(C);
    for (int64_t c = 0; c < C; ++c)
        scale[c] = 1.0 / std::sqrt(cpu::get(running_var, c) + params.eps) * cpu::get(gamma, c);
    for (int64_t r = 0; r < rows; ++r) {
        cpu::load_row(x, r * C, C, row.data());
        for (int64_t c = 0; c < C; ++c) row[c] = (row[c] - mean[c]) * scale[c] + b[c];
        cpu::store_row(y, r * C, C, row.data(), GradWrite::store);
    }
}

void backward_rows(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                   const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                   GradWrite input_write, GradWrite param_write) {
    const auto [rows, C] = channel_rows(x);
    const double count = double(rows);
    const std::vector<double> mean = load_channels(save_mean, C), invstd = load_channels(save_invstd, C);
    std::vector<double> row(C), grad_row(C), sum_dy(C, 0.0), sum_dy_centred(C, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
        cpu::load_row(x, r * C, C, row.data());
        cpu::load_row(dy, r * C, C, grad_row.data());
        for (int64_t c = 0; c < C; ++c) {
            sum_dy[c] += grad_row[c];
            sum_dy_centred[c] += grad_row[c] * (row[c] - mean[c]);
        }
    }
    std::vector<double> sum_dy_xhat(C), scale(C);
    for (int64_t c = 0; c < C; ++c) {
        sum_dy_xhat[c] = sum_dy_centred[c] * invstd[c];
        cpu::write(dgamma, c, sum_dy_xhat[c], param_write);
        cpu::write(dbeta, c, sum_dy[c], param_write);
        scale[c] = cpu::get(gamma, c) * invstd[c] / count;
    }
    if (!dx.defined()) return;
    // dx = scale (count dy - sum_dy - xhat sum_dy_xhat), xhat = (x - mean) invstd
    for (int64_t r = 0; r < rows; ++r) {
        cpu::load_row(x, r * C, C, row.data());
        cpu::load_row(dy, r * C, C, grad_row.data());
        for (int64_t c = 0; c < C; ++c) {
            const double xhat = (row[c] - mean[c]) * invstd[c];
            row[c] = scale[c] * (count * grad_row[c] - sum_dy[c] - xhat * sum_dy_xhat[c]);
        }
        cpu::store_row(dx, r * C, C, row.data(), input_write);
    }
}

}  // namespace

void batchnorm_forward_train_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
                                 const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                                 const Tensor& save_invstd, const BatchNormParams& params) {
    const char* op = "batchnorm_forward_train_cpu";
    BnShape s = check_bn(op, x, y);
    for (auto [t, name] :
         {std::pair{gamma, "gamma"}, {beta, "beta"}, {save_mean, "save_mean"}, {save_invstd, "save_invstd"}})
        check_channel_param(op, t, name, s.c);
    const double count = double(s.n * s.spatial);
    if (fast_nchw({&x, &y})) {
        cpu::for_slices(s.c, 1, [&](int64_t c_begin, int64_t c_end) {
            for (int64_t c = c_begin; c < c_end; ++c) {
                double sum = 0.0, squares = 0.0;
                for (int64_t n = 0; n < s.n; ++n) {
                    if (n + 1 < s.n) prefetch_plane_start(x.as<float>() + ((n + 1) * s.c + c) * s.spatial, s.spatial);
                    sum += plane_sum(x.as<float>() + (n * s.c + c) * s.spatial, s.spatial, 0.0f, false);
                }
                const double mean = sum / count;
                for (int64_t n = 0; n < s.n; ++n)
                    squares +=
                        plane_sum(x.as<float>() + (n * s.c + c) * s.spatial, s.spatial, static_cast<float>(mean), true);
                const double var = squares / count;
                const double invstd = 1.0 / std::sqrt(var + params.eps);
                const float scale = static_cast<float>(cpu::get(gamma, c) * invstd);
                const float shift = static_cast<float>(cpu::get(beta, c) - mean * invstd * cpu::get(gamma, c));
                for (int64_t n = 0; n < s.n; ++n) {
                    const float* in = x.as<float>() + (n * s.c + c) * s.spatial;
                    float* out = y.as<float>() + (n * s.c + c) * s.spatial;
                    for (int64_t i = 0; i < s.spatial; ++i) out[i] = in[i] * scale + shift;
                }
                record_channel_stats(c, mean, squares, count, invstd, save_mean, save_invstd, running_mean, running_var,
                                     params.momentum);
            }
        });
        return;
    }
    if (channels_innermost(x) && cpu::all_f32({&x, &y})) {
        forward_train_rows_f32(x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd, params);
        return;
    }
    if (channels_innermost(x)) {
        forward_train_rows(x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd, params);
        return;
    }
    for (int64_t c = 0; c < s.c; ++c) {
        double sum = 0.0;
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < s.spatial; ++i) sum += cpu::get(x, cpu::channel_offset(x, n, c, i));
        const double mean = sum / count;
        double squares = 0.0;
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < s.spatial; ++i) {
                double d = cpu::get(x, cpu::channel_offset(x, n, c, i)) - mean;
                squares += d * d;
            }
        const double var = squares / count;
        const double invstd = 1.0 / std::sqrt(var + params.eps);
        const double g = cpu::get(gamma, c), b = cpu::get(beta, c);
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < s.spatial; ++i) {
                int64_t off = cpu::channel_offset(x, n, c, i);
                cpu::set(y, off, (cpu::get(x, off) - mean) * invstd * g + b);
            }
        record_channel_stats(c, mean, squares, count, invstd, save_mean, save_invstd, running_mean, running_var,
                             params.momentum);
    }
}

void batchnorm_forward_eval_cpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                                const Tensor& running_var, const Tensor& y, const BatchNormParams& params) {
    const char* op = "batchnorm_forward_eval_cpu";
    BnShape s = check_bn(op, x, y);
    for (auto [t, name] :
         {std::pair{gamma, "gamma"}, {beta, "beta"}, {running_mean, "running_mean"}, {running_var, "running_var"}})
        check_channel_param(op, t, name, s.c);
    if (fast_nchw({&x, &y})) {
        cpu::for_slices(s.c, 1, [&](int64_t c_begin, int64_t c_end) {
            for (int64_t c = c_begin; c < c_end; ++c) {
                const double invstd = 1.0 / std::sqrt(cpu::get(running_var, c) + params.eps);
                const float scale = static_cast<float>(cpu::get(gamma, c) * invstd);
                const float shift =
                    static_cast<float>(cpu::get(beta, c) - cpu::get(running_mean, c) * invstd * cpu::get(gamma, c));
                for (int64_t n = 0; n < s.n; ++n) {
                    const float* in = x.as<float>() + (n * s.c + c) * s.spatial;
                    float* out = y.as<float>() + (n * s.c + c) * s.spatial;
                    for (int64_t i = 0; i < s.spatial; ++i) out[i] = in[i] * scale + shift;
                }
            }
        });
        return;
    }
    if (channels_innermost(x) && cpu::all_f32({&x, &y})) {
        forward_eval_rows_f32(x, gamma, beta, running_mean, running_var, y, params);
        return;
    }
    if (channels_innermost(x)) {
        forward_eval_rows(x, gamma, beta, running_mean, running_var, y, params);
        return;
    }
    for (int64_t c = 0; c < s.c; ++c) {
        const double mean = cpu::get(running_mean, c);
        const double invstd = 1.0 / std::sqrt(cpu::get(running_var, c) + params.eps);
        const double g = cpu::get(gamma, c), b = cpu::get(beta, c);
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < s.spatial; ++i) {
                int64_t off = cpu::channel_offset(x, n, c, i);
                cpu::set(y, off, (cpu::get(x, off) - mean) * invstd * g + b);
            }
    }
}

void batchnorm_backward_cpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                            const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                            GradWrite input_write, GradWrite param_write) {
    const char* op = "batchnorm_backward_cpu";
    BnShape s = check_bn(op, x, dy);
    for (auto [t, name] : {std::pair{gamma, "gamma"},
                           {save_mean, "save_mean"},
                           {save_invstd, "save_invstd"},
                           {dgamma, "dgamma"},
                           {dbeta, "dbeta"}})
        check_channel_param(op, t, name, s.c);
    if (dx.defined()) check_bn(op, x, dx);
    const double count = double(s.n * s.spatial);
    if (fast_nchw({&x, &dy, &dx})) {
        cpu::for_slices(s.c, 1, [&](int64_t c_begin, int64_t c_end) {
            for (int64_t c = c_begin; c < c_end; ++c) {
                const double mean = cpu::get(save_mean, c), invstd = cpu::get(save_invstd, c);
                double sum_dy = 0.0, sum_dy_centred = 0.0;
                for (int64_t n = 0; n < s.n; ++n) {
                    if (n + 1 < s.n) {
                        prefetch_plane_start(dy.as<float>() + ((n + 1) * s.c + c) * s.spatial, s.spatial);
                        prefetch_plane_start(x.as<float>() + ((n + 1) * s.c + c) * s.spatial, s.spatial);
                    }
                    plane_gradient_sums(dy.as<float>() + (n * s.c + c) * s.spatial,
                                        x.as<float>() + (n * s.c + c) * s.spatial, s.spatial, static_cast<float>(mean),
                                        sum_dy, sum_dy_centred);
                }
                const double sum_dy_xhat = sum_dy_centred * invstd;
                cpu::write(dgamma, c, sum_dy_xhat, param_write);
                cpu::write(dbeta, c, sum_dy, param_write);
                if (!dx.defined()) continue;
                // dx = scale (count dy - sum_dy - xhat sum_dy_xhat) = a dy + b x + k
                const double scale = cpu::get(gamma, c) * invstd / count;
                const float a = static_cast<float>(scale * count);
                const float b = static_cast<float>(-scale * invstd * sum_dy_xhat);
                const float k = static_cast<float>(scale * (-sum_dy + mean * invstd * sum_dy_xhat));
                for (int64_t n = 0; n < s.n; ++n) {
                    const float* in = x.as<float>() + (n * s.c + c) * s.spatial;
                    const float* grad_out = dy.as<float>() + (n * s.c + c) * s.spatial;
                    float* grad_in = dx.as<float>() + (n * s.c + c) * s.spatial;
                    for (int64_t i = 0; i < s.spatial; ++i)
                        grad_in[i] = write_grad(grad_in[i], a * grad_out[i] + b * in[i] + k, input_write);
                }
            }
        });
        return;
    }
    if (channels_innermost(x) && cpu::all_f32({&x, &dy, &dx})) {
        backward_rows_f32(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, input_write, param_write);
        return;
    }
    if (channels_innermost(x)) {
        backward_rows(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, input_write, param_write);
        return;
    }
    for (int64_t c = 0; c < s.c; ++c) {
        const double mean = cpu::get(save_mean, c), invstd = cpu::get(save_invstd, c);
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < s.spatial; ++i) {
                int64_t off = cpu::channel_offset(x, n, c, i);
                double g = cpu::get(dy, off);
                sum_dy += g;
                sum_dy_xhat += g * (cpu::get(x, off) - mean) * invstd;
            }
        cpu::write(dgamma, c, sum_dy_xhat, param_write);
        cpu::write(dbeta, c, sum_dy, param_write);
        if (!dx.defined()) continue;
        const double scale = cpu::get(gamma, c) * invstd / count;
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < s.spatial; ++i) {
                int64_t off = cpu::channel_offset(x, n, c, i);
                double xhat = (cpu::get(x, off) - mean) * invstd;
                double v = scale * (count * cpu::get(dy, off) - sum_dy - xhat * sum_dy_xhat);
                cpu::write(dx, off, v, input_write);
            }
    }
}

}  // namespace ember::ops

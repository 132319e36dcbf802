// pooling.cpp: CPU max and average pooling, forward and backward, either layout:
// f32 nchw planes, nhwc rows of channels (any dtype), and a generic per-element path.
// The f32 loops run over planes (nchw) or images (nhwc) that the fast path splits over
// the thread team (parallel.h); each slice writes its own outputs, so both paths agree
// bit for bit.
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/parallel.h"
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
    require(y.shape[0] == x.shape[0] && y.shape[1] == x.shape[1] && y.shape[2] == out_h && y.shape[3] == out_w, op,
            "output must be [" + std::to_string(x.shape[0]) + "," + std::to_string(x.shape[1]) + "," +
                std::to_string(out_h) + "," + std::to_string(out_w) + "]: " + y.describe());
}

void check_argmax(const char* op, const Tensor& argmax, const Tensor& y) {
    require(
        argmax.defined() && argmax.dtype == DType::i32 && argmax.device == Device::cpu && argmax.numel() == y.numel(),
        op, "argmax must be a cpu i32 tensor shaped like the output");
}

// Channels-last (nhwc) pooling: every (n, h, w) holds a row of C contiguous channel
// values, so the loops below walk windows of rows and handle all channels of a
// position at once: plain-pointer loops for f32 (the training case), and double rows
// with the generic path's arithmetic for every other dtype.
bool all_nhwc(std::initializer_list<const Tensor*> tensors) {
    for (const Tensor* t : tensors)
        if (t->layout != Layout::nhwc) return false;
    return true;
}

// The window of output (oh, ow) clipped to the H x W image: [h_begin, h_end) x [w_begin, w_end).
struct Window {
    int64_t h_begin, h_end, w_begin, w_end;
};

Window clipped_window(const Pool2dParams& p, int64_t oh, int64_t ow, int64_t H, int64_t W) {
    return {
        std::max<int64_t>(oh * p.stride_h - p.pad_h, 0), std::min<int64_t>(oh * p.stride_h - p.pad_h + p.kernel_h, H),
        std::max<int64_t>(ow * p.stride_w - p.pad_w, 0), std::min<int64_t>(ow * p.stride_w - p.pad_w + p.kernel_w, W)};
}

// Folds one input row of C channels into the running maxima: only a strictly greater
// value replaces (ties keep the earlier index). The index select is written as a bit
// mask because the compiler turns `greater ? position : indices[c]` into a branch
// around the store, which does not vectorize; the buffers never overlap.
void max_update(const float* __restrict row, float* __restrict maxima, int32_t* __restrict indices, int64_t C,
                int32_t position) {
    for (int64_t c = 0; c < C; ++c) {
        const float value = row[c], current = maxima[c];
        const int32_t take_new = -static_cast<int32_t>(value > current);  // all ones or zero
        maxima[c] = value > current ? value : current;
        indices[c] = (position & take_new) | (indices[c] & ~take_new);
    }
}

// f32 nhwc max pooling with plain pointers: float maxima and i32 indices side by
// side, so the per-channel select vectorizes.
void maxpool_forward_nhwc_f32(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dParams& p) {
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t P = y.shape[2], Q = y.shape[3];
    const float* in = x.as<float>();
    cpu::for_slices(N, 1, [&](int64_t first_image, int64_t end_image) {
        std::vector<float> best(C);
        std::vector<int32_t> best_index(C);
        for (int64_t n = first_image; n < end_image; ++n)
            for (int64_t oh = 0; oh < P; ++oh)
                for (int64_t ow = 0; ow < Q; ++ow) {
                    const Window win = clipped_window(p, oh, ow, H, W);
                    const int64_t out = ((n * P + oh) * Q + ow) * C;
                    if (win.h_begin >= win.h_end || win.w_begin >= win.w_end) {
                        std::fill(best.begin(), best.end(), 0.0f);
                        std::fill(best_index.begin(), best_index.end(), -1);
                    } else {
                        const float* first = in + ((n * H + win.h_begin) * W + win.w_begin) * C;
                        std::copy(first, first + C, best.begin());
                        std::fill(best_index.begin(), best_index.end(),
                                  static_cast<int32_t>(win.h_begin * W + win.w_begin));
                        for (int64_t h = win.h_begin; h < win.h_end; ++h)
                            for (int64_t w = win.w_begin; w < win.w_end; ++w) {
                                max_update(in + ((n * H + h) * W + w) * C, best.data(), best_index.data(), C,
                                           static_cast<int32_t>(h * W + w));
                            }
                    }
                    std::copy(best.begin(), best.end(), y.as<float>() + out);
                    std::copy(best_index.begin(), best_index.end(), argmax.as<int32_t>() + out);
                }
    });
}

void maxpool_forward_nhwc(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dParams& p) {
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t P = y.shape[2], Q = y.shape[3];
    std::vector<double> best(C), row(C);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t oh = 0; oh < P; ++oh)
            for (int64_t ow = 0; ow < Q; ++ow) {
                const Window win = clipped_window(p, oh, ow, H, W);
                const int64_t out = ((n * P + oh) * Q + ow) * C;
                int32_t* index = argmax.as<int32_t>() + out;
                if (win.h_begin >= win.h_end || win.w_begin >= win.w_end) {
                    // Empty window: 0 and no index, as the generic path and the kernel.
                    std::fill(best.begin(), best.end(), 0.0);
                    std::fill(index, index + C, -1);
                    cpu::store_row(y, out, C, best.data(), GradWrite::store);
                    continue;
                }
                // The first element seeds the maximum; only a strictly greater one
                // replaces it (the tie rule of every other path).
                cpu::load_row(x, ((n * H + win.h_begin) * W + win.w_begin) * C, C, best.data());
                std::fill(index, index + C, static_cast<int32_t>(win.h_begin * W + win.w_begin));
                for (int64_t h = win.h_begin; h < win.h_end; ++h)
                    for (int64_t w = win.w_begin; w < win.w_end; ++w) {
                        cpu::load_row(x, ((n * H + h) * W + w) * C, C, row.data());
                        const int32_t position = static_cast<int32_t>(h * W + w);
                        for (int64_t c = 0; c < C; ++c) {
                            const bool greater = row[c] > best[c];
                            best[c] = greater ? row[c] : best[c];
                            index[c] = greater ? position : index[c];
                        }
                    }
                cpu::store_row(y, out, C, best.data(), GradWrite::store);
            }
}

// f32 nhwc max-pool backward: each output row of C gradients adds straight into the
// winning input positions (as the f32 nchw planes do).
void maxpool_backward_nhwc_f32(const Tensor& dy, const Tensor& argmax, const Tensor& dx, GradWrite write) {
    const int64_t N = dx.shape[0], C = dx.shape[1], image = dx.shape[2] * dx.shape[3] * C;
    const int64_t outputs = dy.shape[2] * dy.shape[3];
    cpu::for_slices(N, 1, [&](int64_t first_image, int64_t end_image) {
        for (int64_t n = first_image; n < end_image; ++n) {
            float* grad_in = dx.as<float>() + n * image;
            const float* grad_out = dy.as<float>() + n * outputs * C;
            const int32_t* index = argmax.as<int32_t>() + n * outputs * C;
            if (write == GradWrite::store) std::fill(grad_in, grad_in + image, 0.0f);
            for (int64_t i = 0; i < outputs * C; i += C)
                for (int64_t c = 0; c < C; ++c)
                    if (index[i + c] >= 0) grad_in[index[i + c] * C + c] += grad_out[i + c];
        }
    });
}

// Gradients are summed per image in a double buffer (overlapping windows add), then
// written once; the buffer is one image, so it stays in cache.
void maxpool_backward_nhwc(const Tensor& dy, const Tensor& argmax, const Tensor& dx, GradWrite write) {
    const int64_t N = dx.shape[0], C = dx.shape[1], image = dx.shape[2] * dx.shape[3] * C;
    const int64_t outputs = dy.shape[2] * dy.shape[3];
    std::vector<double> grad(static_cast<std::size_t>(image)), grad_row(C);
    for (int64_t n = 0; n < N; ++n) {
        std::fill(grad.begin(), grad.end(), 0.0);
        for (int64_t position = 0; position < outputs; ++position) {
            const int64_t out = (n * outputs + position) * C;
            const int32_t* index = argmax.as<int32_t>() + out;
            cpu::load_row(dy, out, C, grad_row.data());
            for (int64_t c = 0; c < C; ++c)
                if (index[c] >= 0) grad[index[c] * C + c] += grad_row[c];
        }
        cpu::store_row(dx, n * image, image, grad.data(), write);
    }
}

void avgpool_forward_nhwc(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t P = y.shape[2], Q = y.shape[3];
    const double divisor = double(p.kernel_h) * p.kernel_w;
    cpu::for_slices(N, 1, [&](int64_t first_image, int64_t end_image) {
        std::vector<double> sum(C), row(C);
        for (int64_t n = first_image; n < end_image; ++n)
            for (int64_t oh = 0; oh < P; ++oh)
                for (int64_t ow = 0; ow < Q; ++ow) {
                    const Window win = clipped_window(p, oh, ow, H, W);
                    std::fill(sum.begin(), sum.end(), 0.0);
                    for (int64_t h = win.h_begin; h < win.h_end; ++h)
                        for (int64_t w = win.w_begin; w < win.w_end; ++w) {
                            cpu::load_row(x, ((n * H + h) * W + w) * C, C, row.data());
                            for (int64_t c = 0; c < C; ++c) sum[c] += row[c];
                        }
                    for (int64_t c = 0; c < C; ++c) sum[c] /= divisor;
                    cpu::store_row(y, ((n * P + oh) * Q + ow) * C, C, sum.data(), GradWrite::store);
                }
    });
}

void avgpool_backward_nhwc(const Tensor& dy, const Tensor& dx, const Pool2dParams& p, GradWrite write) {
    const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
    const int64_t P = dy.shape[2], Q = dy.shape[3], image = H * W * C;
    const double divisor = double(p.kernel_h) * p.kernel_w;
    cpu::for_slices(N, 1, [&](int64_t first_image, int64_t end_image) {
        std::vector<double> grad(static_cast<std::size_t>(image)), grad_row(C);
        for (int64_t n = first_image; n < end_image; ++n) {
            std::fill(grad.begin(), grad.end(), 0.0);
            for (int64_t oh = 0; oh < P; ++oh)
                for (int64_t ow = 0; ow < Q; ++ow) {
                    const Window win = clipped_window(p, oh, ow, H, W);
                    cpu::load_row(dy, ((n * P + oh) * Q + ow) * C, C, grad_row.data());
                    for (int64_t c = 0; c < C; ++c) grad_row[c] /= divisor;
                    for (int64_t h = win.h_begin; h < win.h_end; ++h)
                        for (int64_t w = win.w_begin; w < win.w_end; ++w) {
                            double* target = grad.data() + (h * W + w) * C;
                            for (int64_t c = 0; c < C; ++c) target[c] += grad_row[c];
                        }
                }
            cpu::store_row(dx, n * image, image, grad.data(), write);
        }
    });
}

// One f32 nchw plane, the window parameters by value (nothing the loop stores can alias
// them). The tie-breaking select is spelled as std::max and a bit mask, as max_update
// does: written as two `greater ? :` selects, the compiler turned them into a branch
// that mispredicts half the time once this loop sat inside the slice lambda (3x slower).
void maxpool_plane_f32(const float* in, int64_t H, int64_t W, Pool2dParams q, float* out, int32_t* index, int64_t P,
                       int64_t Q) {
    for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
            // The window clipped to the image; the first element seeds the maximum and
            // only a strictly greater one replaces it (same tie rule as the generic
            // path), with selects instead of branches.
            const Window win = clipped_window(q, oh, ow, H, W);
            float best = 0.0f;
            int32_t best_index = -1;
            if (win.h_begin < win.h_end && win.w_begin < win.w_end) {
                best_index = static_cast<int32_t>(win.h_begin * W + win.w_begin);
                best = in[best_index];
                for (int64_t h = win.h_begin; h < win.h_end; ++h)
                    for (int64_t w = win.w_begin; w < win.w_end; ++w) {
                        const float v = in[h * W + w];
                        const int32_t take_new = -static_cast<int32_t>(v > best);  // all ones or zero
                        best_index = (static_cast<int32_t>(h * W + w) & take_new) | (best_index & ~take_new);
                        best = std::max(best, v);  // best < v ? v : best: the same strict rule
                    }
            }
            out[oh * Q + ow] = best;
            index[oh * Q + ow] = best_index;
        }
}

}  // namespace

void maxpool2d_forward_cpu(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dParams& p) {
    const char* op = "maxpool2d_forward_cpu";
    check_pool(op, x, y, p);
    check_argmax(op, argmax, y);
    const int64_t H = x.shape[2], W = x.shape[3];
    if (cpu::all_f32({&x, &y}) && x.layout == Layout::nchw && y.layout == Layout::nchw) {
        // Plane by plane with plain pointers (the CPU training path).
        const int64_t P = y.shape[2], Q = y.shape[3], planes = y.shape[0] * y.shape[1];
        cpu::for_slices(planes, 4, [&](int64_t first_plane, int64_t end_plane) {
            for (int64_t plane = first_plane; plane < end_plane; ++plane)
                maxpool_plane_f32(x.as<float>() + plane * H * W, H, W, p, y.as<float>() + plane * P * Q,
                                  argmax.as<int32_t>() + plane * P * Q, P, Q);
        });
        return;
    }
    if (all_nhwc({&x, &y})) {
        if (cpu::all_f32({&x, &y}))
            maxpool_forward_nhwc_f32(x, y, argmax, p);
        else
            maxpool_forward_nhwc(x, y, argmax, p);
        return;
    }
    for (int64_t n = 0; n < y.shape[0]; ++n)
        for (int64_t c = 0; c < y.shape[1]; ++c)
            for (int64_t oh = 0; oh < y.shape[2]; ++oh)
                for (int64_t ow = 0; ow < y.shape[3]; ++ow) {
                    const Window win = clipped_window(p, oh, ow, H, W);
                    double best = -std::numeric_limits<double>::infinity();
                    int32_t best_index = -1;
                    for (int64_t h = win.h_begin; h < win.h_end; ++h)
                        for (int64_t w = win.w_begin; w < win.w_end; ++w) {
                            double v = cpu::get(x, x.offset4(n, c, h, w));
                            if (v > best || best_index < 0) {
                                best = v;
                                best_index = static_cast<int32_t>(h * W + w);
                            }
                        }
                    int64_t out = y.offset4(n, c, oh, ow);
                    cpu::set(y, out, best_index < 0 ? 0.0 : best);  // empty window: 0, as the kernel
                    argmax.as<int32_t>()[out] = best_index;
                }
}

void maxpool2d_backward_cpu(const Tensor& dy, const Tensor& argmax, const Tensor& dx, const Pool2dParams& p,
                            GradWrite write) {
    const char* op = "maxpool2d_backward_cpu";
    check_pool(op, dx, dy, p);
    check_argmax(op, argmax, dy);
    const int64_t W = dx.shape[3];
    if (cpu::all_f32({&dy, &dx}) && dy.layout == Layout::nchw && dx.layout == Layout::nchw) {
        const int64_t plane_in = dx.shape[2] * W, plane_out = dy.shape[2] * dy.shape[3];
        const int64_t planes = dy.shape[0] * dy.shape[1];
        cpu::for_slices(planes, 4, [&](int64_t first_plane, int64_t end_plane) {
            for (int64_t plane = first_plane; plane < end_plane; ++plane) {
                float* grad_in = dx.as<float>() + plane * plane_in;
                const float* grad_out = dy.as<float>() + plane * plane_out;
                const int32_t* index = argmax.as<int32_t>() + plane * plane_out;
                if (write == GradWrite::store)
                    for (int64_t i = 0; i < plane_in; ++i) grad_in[i] = 0.0f;
                for (int64_t i = 0; i < plane_out; ++i)
                    if (index[i] >= 0) grad_in[index[i]] += grad_out[i];
            }
        });
        return;
    }
    if (all_nhwc({&dy, &dx})) {
        if (cpu::all_f32({&dy, &dx}))
            maxpool_backward_nhwc_f32(dy, argmax, dx, write);
        else
            maxpool_backward_nhwc(dy, argmax, dx, write);
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
    if (all_nhwc({&x, &y})) {
        avgpool_forward_nhwc(x, y, p);
        return;
    }
    const int64_t H = x.shape[2], W = x.shape[3];
    const double divisor = double(p.kernel_h) * p.kernel_w;
    if (cpu::fast_f32({&x, &y})) {
        // The loop below with plain pointers, plane by plane (same sums in double).
        const int64_t P = y.shape[2], Q = y.shape[3], planes = y.shape[0] * y.shape[1];
        cpu::parallel_for(planes, 4, [&](int64_t first_plane, int64_t end_plane) {
            for (int64_t plane = first_plane; plane < end_plane; ++plane) {
                const float* in = x.as<float>() + plane * H * W;
                float* out = y.as<float>() + plane * P * Q;
                for (int64_t oh = 0; oh < P; ++oh)
                    for (int64_t ow = 0; ow < Q; ++ow) {
                        const Window win = clipped_window(p, oh, ow, H, W);
                        double sum = 0.0;
                        for (int64_t h = win.h_begin; h < win.h_end; ++h)
                            for (int64_t w = win.w_begin; w < win.w_end; ++w) sum += in[h * W + w];
                        out[oh * Q + ow] = static_cast<float>(sum / divisor);
                    }
            }
        });
        return;
    }
    for (int64_t n = 0; n < y.shape[0]; ++n)
        for (int64_t c = 0; c < y.shape[1]; ++c)
            for (int64_t oh = 0; oh < y.shape[2]; ++oh)
                for (int64_t ow = 0; ow < y.shape[3]; ++ow) {
                    const Window win = clipped_window(p, oh, ow, H, W);
                    double sum = 0.0;
                    for (int64_t h = win.h_begin; h < win.h_end; ++h)
                        for (int64_t w = win.w_begin; w < win.w_end; ++w) sum += cpu::get(x, x.offset4(n, c, h, w));
                    cpu::set(y, y.offset4(n, c, oh, ow), sum / divisor);
                }
}

void avgpool2d_backward_cpu(const Tensor& dy, const Tensor& dx, const Pool2dParams& p, GradWrite write) {
    check_pool("avgpool2d_backward_cpu", dx, dy, p);
    if (all_nhwc({&dy, &dx})) {
        avgpool_backward_nhwc(dy, dx, p, write);
        return;
    }
    const int64_t H = dx.shape[2], W = dx.shape[3];
    const double divisor = double(p.kernel_h) * p.kernel_w;
    if (cpu::fast_f32({&dy, &dx})) {
        // Plane by plane: window gradients summed in a double plane, then written once.
        const int64_t P = dy.shape[2], Q = dy.shape[3], planes = dy.shape[0] * dy.shape[1];
        cpu::parallel_for(planes, 4, [&](int64_t first_plane, int64_t end_plane) {
            std::vector<double> grad(static_cast<std::size_t>(H * W));
            for (int64_t plane = first_plane; plane < end_plane; ++plane) {
                const float* grad_out = dy.as<float>() + plane * P * Q;
                float* grad_in = dx.as<float>() + plane * H * W;
                std::fill(grad.begin(), grad.end(), 0.0);
                for (int64_t oh = 0; oh < P; ++oh)
                    for (int64_t ow = 0; ow < Q; ++ow) {
                        const double g = grad_out[oh * Q + ow] / divisor;
                        const Window win = clipped_window(p, oh, ow, H, W);
                        for (int64_t h = win.h_begin; h < win.h_end; ++h)
                            for (int64_t w = win.w_begin; w < win.w_end; ++w) grad[h * W + w] += g;
                    }
                for (int64_t i = 0; i < H * W; ++i)
                    grad_in[i] = static_cast<float>(write == GradWrite::accumulate ? grad_in[i] + grad[i] : grad[i]);
            }
        });
        return;
    }
    std::vector<double> grad(static_cast<std::size_t>(dx.numel()), 0.0);
    for (int64_t n = 0; n < dy.shape[0]; ++n)
        for (int64_t c = 0; c < dy.shape[1]; ++c)
            for (int64_t oh = 0; oh < dy.shape[2]; ++oh)
                for (int64_t ow = 0; ow < dy.shape[3]; ++ow) {
                    const double g = cpu::get(dy, dy.offset4(n, c, oh, ow)) / divisor;
                    const Window win = clipped_window(p, oh, ow, H, W);
                    for (int64_t h = win.h_begin; h < win.h_end; ++h)
                        for (int64_t w = win.w_begin; w < win.w_end; ++w) grad[dx.offset4(n, c, h, w)] += g;
                }
    for (int64_t i = 0, end = dx.numel(); i < end; ++i) cpu::write(dx, i, grad[i], write);
}

}  // namespace ember::ops

// elementwise.cpp: CPU residual add, gradient accumulation, casts, layout
// conversion, fill and scale. On the fast path (parallel.h) f32 tensors take
// plain-pointer loops split over the thread team; a float sum rounds as the
// reference's double sum stored to float, so both paths agree bit for bit.
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/parallel.h"

#include <algorithm>
#include "engine/ops/elementwise.h"

namespace ember::ops {

void add_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
    const char* op = "add_cpu";
    cpu::check_float_cpu(a, op, "a");
    cpu::check_float_cpu(b, op, "b");
    cpu::check_float_cpu(out, op, "out");
    require(a.numel() == b.numel() && a.numel() == out.numel(), op, "sizes differ");
    require(a.layout == b.layout && a.layout == out.layout, op, "layouts differ");
    if (cpu::fast_f32({&a, &b, &out})) {
        const float *x = a.as<float>(), *y = b.as<float>();
        float* sum = out.as<float>();
        cpu::parallel_for(out.numel(), cpu::kElementGrain, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) sum[i] = x[i] + y[i];
        });
        return;
    }
    for (int64_t i = 0, end = out.numel(); i < end; ++i) cpu::set(out, i, cpu::get(a, i) + cpu::get(b, i));
}

void accumulate_grad_cpu(const Tensor& src, const Tensor& dst, GradWrite write) {
    const char* op = "accumulate_grad_cpu";
    cpu::check_float_cpu(src, op, "src");
    cpu::check_float_cpu(dst, op, "dst");
    require(src.numel() == dst.numel(), op, "sizes differ");
    if (cpu::fast_f32({&src, &dst})) {
        const float* in = src.as<float>();
        float* out = dst.as<float>();
        cpu::parallel_for(dst.numel(), cpu::kElementGrain, [&](int64_t begin, int64_t end) {
            if (write == GradWrite::accumulate)
                for (int64_t i = begin; i < end; ++i) out[i] += in[i];
            else
                std::copy(in + begin, in + end, out + begin);
        });
        return;
    }
    for (int64_t i = 0, end = dst.numel(); i < end; ++i) cpu::write(dst, i, cpu::get(src, i), write);
}

void cast_cpu(const Tensor& src, const Tensor& dst) {
    const char* op = "cast_cpu";
    cpu::check_float_cpu(src, op, "src");
    cpu::check_float_cpu(dst, op, "dst");
    require(src.numel() == dst.numel(), op, "sizes differ");
    for (int64_t i = 0, end = dst.numel(); i < end; ++i) cpu::set(dst, i, cpu::get(src, i));
}

void convert_layout_cpu(const Tensor& src, const Tensor& dst) {
    const char* op = "convert_layout_cpu";
    cpu::check_float_cpu(src, op, "src");
    cpu::check_float_cpu(dst, op, "dst");
    require(src.rank == 4 && same_shape(src, dst), op, "needs two 4-D tensors of one logical shape");
    if (cpu::fast_f32({&src, &dst})) {
        // Image by image: a transpose between [C, HW] and [HW, C] (or a copy).
        const int64_t C = src.shape[1], spatial = src.shape[2] * src.shape[3], image = C * spatial;
        const float* in = src.as<float>();
        float* out = dst.as<float>();
        cpu::parallel_for(src.shape[0], std::max<int64_t>(1, cpu::kElementGrain / std::max<int64_t>(1, image)),
                          [&](int64_t begin, int64_t end) {
                              for (int64_t n = begin; n < end; ++n) {
                                  const float* from = in + n * image;
                                  float* to = out + n * image;
                                  if (src.layout == dst.layout)
                                      std::copy(from, from + image, to);
                                  else if (src.layout == Layout::nchw)
                                      for (int64_t s = 0; s < spatial; ++s)
                                          for (int64_t c = 0; c < C; ++c) to[s * C + c] = from[c * spatial + s];
                                  else
                                      for (int64_t c = 0; c < C; ++c)
                                          for (int64_t s = 0; s < spatial; ++s) to[c * spatial + s] = from[s * C + c];
                              }
                          });
        return;
    }
    for (int64_t n = 0; n < src.shape[0]; ++n)
        for (int64_t c = 0; c < src.shape[1]; ++c)
            for (int64_t h = 0; h < src.shape[2]; ++h)
                for (int64_t w = 0; w < src.shape[3]; ++w)
                    cpu::set(dst, dst.offset4(n, c, h, w), cpu::get(src, src.offset4(n, c, h, w)));
}

void fill_cpu(const Tensor& t, float value) {
    cpu::check_float_cpu(t, "fill_cpu", "t");
    if (cpu::fast_f32({&t})) {
        float* out = t.as<float>();
        cpu::parallel_for(t.numel(), cpu::kElementGrain,
                          [&](int64_t begin, int64_t end) { std::fill(out + begin, out + end, value); });
        return;
    }
    for (int64_t i = 0, end = t.numel(); i < end; ++i) cpu::set(t, i, value);
}

void scale_cpu(const Tensor& t, float factor) {
    cpu::check_float_cpu(t, "scale_cpu", "t");
    if (cpu::fast_f32({&t})) {
        float* values = t.as<float>();
        cpu::parallel_for(t.numel(), cpu::kElementGrain, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) values[i] = static_cast<float>(double(values[i]) * factor);
        });
        return;
    }
    for (int64_t i = 0, end = t.numel(); i < end; ++i) cpu::set(t, i, cpu::get(t, i) * factor);
}

}  // namespace ember::ops

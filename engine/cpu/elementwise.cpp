// elementwise.cpp: CPU residual add, gradient accumulation, casts, layout
// conversion, fill and scale.
#include "engine/cpu/cpu_util.h"
#include "engine/ops/elementwise.h"

namespace ember::ops {

void add_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
    const char* op = "add_cpu";
    cpu::check_float_cpu(a, op, "a");
    cpu::check_float_cpu(b, op, "b");
    cpu::check_float_cpu(out, op, "out");
    require(a.numel() == b.numel() && a.numel() == out.numel(), op, "sizes differ");
    require(a.layout == b.layout && a.layout == out.layout, op, "layouts differ");
    for (int64_t i = 0, end = out.numel(); i < end; ++i) cpu::set(out, i, cpu::get(a, i) + cpu::get(b, i));
}

void accumulate_grad_cpu(const Tensor& src, const Tensor& dst, GradWrite write) {
    const char* op = "accumulate_grad_cpu";
    cpu::check_float_cpu(src, op, "src");
    cpu::check_float_cpu(dst, op, "dst");
    require(src.numel() == dst.numel(), op, "sizes differ");
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
    for (int64_t n = 0; n < src.shape[0]; ++n)
        for (int64_t c = 0; c < src.shape[1]; ++c)
            for (int64_t h = 0; h < src.shape[2]; ++h)
                for (int64_t w = 0; w < src.shape[3]; ++w)
                    cpu::set(dst, dst.offset4(n, c, h, w), cpu::get(src, src.offset4(n, c, h, w)));
}

void fill_cpu(const Tensor& t, float value) {
    cpu::check_float_cpu(t, "fill_cpu", "t");
    for (int64_t i = 0, end = t.numel(); i < end; ++i) cpu::set(t, i, value);
}

void scale_cpu(const Tensor& t, float factor) {
    cpu::check_float_cpu(t, "scale_cpu", "t");
    for (int64_t i = 0, end = t.numel(); i < end; ++i) cpu::set(t, i, cpu::get(t, i) * factor);
}

}  // namespace ember::ops

// dropout.cpp: CPU inverted dropout; the mask comes from dropout_keep(), the same
// counter-based hash the kernel evaluates, so both backends drop the same elements.
#include "engine/cpu/cpu_util.h"
#include "engine/ops/dropout.h"

namespace ember::ops {

void dropout_forward_cpu(const Tensor& x, const Tensor& y, const Tensor& mask, const DropoutParams& params) {
    const char* op = "dropout_forward_cpu";
    cpu::check_float_cpu(x, op, "x");
    cpu::check_float_cpu(y, op, "y");
    require(x.numel() == y.numel(), op, "x and y sizes differ");
    require(mask.defined() && mask.dtype == DType::u8 && mask.device == Device::cpu && mask.numel() == x.numel(), op,
            "mask must be a cpu u8 tensor with x.numel() elements");
    require(params.p >= 0.0f && params.p < 1.0f, op, "p must be in [0, 1)");
    const double scale = 1.0 / (1.0 - params.p);
    for (int64_t i = 0, end = x.numel(); i < end; ++i) {
        bool keep = dropout_keep(params.seed, params.offset + static_cast<uint64_t>(i), params.p);
        mask.as<uint8_t>()[i] = keep ? 1 : 0;
        cpu::set(y, i, keep ? cpu::get(x, i) * scale : 0.0);
    }
}

void dropout_backward_cpu(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p, GradWrite write) {
    const char* op = "dropout_backward_cpu";
    cpu::check_float_cpu(dy, op, "dy");
    cpu::check_float_cpu(dx, op, "dx");
    require(mask.defined() && mask.dtype == DType::u8 && mask.numel() == dx.numel() && dy.numel() == dx.numel(), op,
            "dy, mask and dx sizes differ");
    const double scale = 1.0 / (1.0 - p);
    for (int64_t i = 0, end = dx.numel(); i < end; ++i)
        cpu::write(dx, i, mask.as<uint8_t>()[i] ? cpu::get(dy, i) * scale : 0.0, write);
}

}  // namespace ember::ops

// autocast.cpp: names and dtypes of the mixed-precision policy (autocast.h).
#include "engine/amp/autocast.h"

#include <stdexcept>

namespace ember::amp {

const char* precision_name(Precision precision) {
    switch (precision) {
        case Precision::fp32:
            return "fp32";
        case Precision::fp16:
            return "fp16";
        case Precision::bf16:
            return "bf16";
    }
    return "?";
}

Precision parse_precision(const std::string& name) {
    if (name == "fp32" || name == "f32") return Precision::fp32;
    if (name == "fp16" || name == "f16") return Precision::fp16;
    if (name == "bf16") return Precision::bf16;
    throw std::invalid_argument("unknown precision '" + name + "' (expected fp32, fp16 or bf16)");
}

DType AutocastPolicy::compute_dtype() const {
    if (precision == Precision::fp16) return DType::f16;
    if (precision == Precision::bf16) return DType::bf16;
    return DType::f32;
}

optim::LowPrecision AutocastPolicy::optimizer_copy() const {
    if (precision == Precision::fp16) return optim::LowPrecision::fp16;
    if (precision == Precision::bf16) return optim::LowPrecision::bf16;
    return optim::LowPrecision::none;
}

}  // namespace ember::amp

// low_precision.h: fp32 -> fp16 / bf16 rounding (nearest even) for the optional
// low-precision parameter copy an optimizer refreshes after its update. Uses CUDA's
// conversion functions, which compile for host and device alike.
#pragma once

#include "engine/optim/update_rules.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace ember::optim {

// 0 = none, 1 = fp16, 2 = bf16 (the values of LowPrecision in optimizer.h).
EMBER_OPTIM_HD inline void store_low_precision(void* out, std::size_t i, float value, int format) {
    if (format == 1) {
        __half_raw raw = __float2half_rn(value);
        static_cast<uint16_t*>(out)[i] = raw.x;
    } else if (format == 2) {
        __nv_bfloat16_raw raw = __float2bfloat16_rn(value);
        static_cast<uint16_t*>(out)[i] = raw.x;
    }
}

}  // namespace ember::optim

// dtype.h: element types, layouts and devices of ember tensors, plus the
// round-to-nearest-even f16/bf16 conversions and typed load/store helpers. All are
// __host__ __device__ so the CPU reference and the CUDA kernels convert with the same
// arithmetic (a CPU twin rounds exactly as its kernel does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__
#else
#define EMBER_HD
#endif

namespace ember {

// f64 exists for the CPU reference only (finite-difference gradient checks);
// CUDA ops accept f32, f16, bf16 (and i32/u8 where an op takes indices or masks).
enum class DType : uint8_t { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, u8 = 4, f64 = 5 };

// Memory order of a 4-D tensor whose logical shape is always (N, C, H, W):
// nchw = contiguous NCHW, nhwc = channels-last (PyTorch's channels_last).
// Tensors of rank < 4 are row-major and ignore the layout.
enum class Layout : uint8_t { nchw = 0, nhwc = 1 };

// Where a tensor lives and where an op runs: the backend of a model, a buffer or an op.
enum class Device : uint8_t { cpu = 0, cuda = 1 };

EMBER_HD inline std::size_t dtype_size(DType t) {
    switch (t) {
        case DType::f32:
            return 4;
        case DType::f16:
            return 2;
        case DType::bf16:
            return 2;
        case DType::i32:
            return 4;
        case DType::u8:
            return 1;
        case DType::f64:
            return 8;
    }
    return 0;
}

// The dtype of work that stays in full precision under mixed precision (losses,
// attention scores, normalization intermediates): f32, or f64 for f64 data (the CPU
// gradient checks, whose finite differences need it).
EMBER_HD inline DType full_precision_dtype(DType data) {
    return data == DType::f64 ? DType::f64 : DType::f32;
}

const char* dtype_name(DType t);               // "f32", "f16", ...
const char* layout_name(Layout l);             // "nchw", "nhwc"
const char* device_name(Device d);             // "cpu", "cuda"
Device parse_device(const std::string& name);  // "cpu" | "cuda"; throws std::invalid_argument otherwise

EMBER_HD inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

EMBER_HD inline float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// float -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN.
EMBER_HD inline uint16_t float_to_bf16_bits(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

EMBER_HD inline float bf16_bits_to_float(uint16_t b) {
    return bits_float(uint32_t(b) << 16);
}

// float -> IEEE binary16 bits, round to nearest even, with subnormals, overflow to
// infinity and NaN preserved.
EMBER_HD inline uint16_t float_to_f16_bits(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (x < 0x38800000u) {                                               // below 2^-14: subnormal
        if (x <= 0x33000000u) return static_cast<uint16_t>(sign);        // <= 2^-25 rounds to 0
        uint32_t exponent = x >> 23;
        uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exponent;
        uint32_t result = mantissa >> shift;
        uint32_t remainder = mantissa & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
        return static_cast<uint16_t>(sign | result);
    }
    uint32_t rebased = x - 0x38000000u;  // exponent bias 127 -> 15
    rebased = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
    return static_cast<uint16_t>(sign | rebased);
}

EMBER_HD inline float f16_bits_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // m * 2^-24
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Rounds a float to the nearest value representable in `t` (identity for f32/f64).
EMBER_HD inline float round_to_dtype(float v, DType t) {
    if (t == DType::f16) return f16_bits_to_float(float_to_f16_bits(v));
    if (t == DType::bf16) return bf16_bits_to_float(float_to_bf16_bits(v));
    return v;
}

// Element i of a buffer of type t, as float. Used by kernels and CPU loops that
// accept several activation dtypes while computing in fp32 (the AMP policy).
EMBER_HD inline float load_as_float(const void* data, DType t, int64_t i) {
    switch (t) {
        case DType::f32:
            return static_cast<const float*>(data)[i];
        case DType::f16:
            return f16_bits_to_float(static_cast<const uint16_t*>(data)[i]);
        case DType::bf16:
            return bf16_bits_to_float(static_cast<const uint16_t*>(data)[i]);
        case DType::i32:
            return static_cast<float>(static_cast<const int32_t*>(data)[i]);
        case DType::u8:
            return static_cast<float>(static_cast<const uint8_t*>(data)[i]);
        case DType::f64:
            return static_cast<float>(static_cast<const double*>(data)[i]);
    }
    return 0.0f;
}

EMBER_HD inline void store_from_float(void* data, DType t, int64_t i, float v) {
    switch (t) {
        case DType::f32:
            static_cast<float*>(data)[i] = v;
            return;
        case DType::f16:
            static_cast<uint16_t*>(data)[i] = float_to_f16_bits(v);
            return;
        case DType::bf16:
            static_cast<uint16_t*>(data)[i] = float_to_bf16_bits(v);
            return;
        case DType::i32:
            static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
            return;
        case DType::u8:
            static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
            return;
        case DType::f64:
            static_cast<double*>(data)[i] = v;
            return;
    }
}

// Host-side double versions: the CPU reference computes in double so that a
// finite-difference check on f64 tensors is exact to ~1e-10.
inline double load_as_double(const void* data, DType t, int64_t i) {
    if (t == DType::f64) return static_cast<const double*>(data)[i];
    return load_as_float(data, t, i);
}

inline void store_from_double(void* data, DType t, int64_t i, double v) {
    if (t == DType::f64) {
        static_cast<double*>(data)[i] = v;
        return;
    }
    store_from_float(data, t, i, static_cast<float>(v));
}

}  // namespace ember

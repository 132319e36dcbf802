// counter_random.h: counter-based random numbers (SplitMix64 finalizer) as
// __host__ __device__ functions. A value depends only on (seed, stream, counter), never
// on which thread asked or in what order, which is what makes augmentation and shuffling
// identical for any number of workers and identical on CPU and GPU.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_DATA_HD __host__ __device__
#else
#define EMBER_DATA_HD
#endif

namespace ember::data {

// SplitMix64's output function: a bijective 64-bit mix with good avalanche.
EMBER_DATA_HD inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The n-th random word of stream (seed, a, b): e.g. (seed, epoch, sample index).
EMBER_DATA_HD inline uint64_t counter_random(uint64_t seed, uint64_t a, uint64_t b, uint64_t n) {
    return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ n);
}

// Uniform integer in [0, bound) (bound > 0); the modulo bias is below 2^-32 for small bounds.
EMBER_DATA_HD inline uint32_t random_below(uint64_t word, uint32_t bound) {
    return uint32_t((word >> 32) % bound);
}

// Uniform double in [0, 1) from the top 53 bits.
EMBER_DATA_HD inline double random_unit(uint64_t word) {
    return double(word >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace ember::data

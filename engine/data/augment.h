// augment.h: per-sample augmentation -- random crop with zero padding, horizontal flip,
// normalization -- as __host__ __device__ math shared by the CPU workers and the
// GPU-resident gather kernel (gpu_resident.cu), so both produce the same floats.
//
// A sample's random choices come from counter_random(seed, epoch, index): the same for
// any worker count, any thread, CPU or GPU. Kept C++17 (nvcc compiles it as CUDA17).
#pragma once

#include "engine/data/counter_random.h"

#include <cstdint>

namespace ember::data {

struct AugmentOptions {
    int crop_padding = 0;          // random crop: pad by this many zero pixels, crop back to size; 0 = off
    bool horizontal_flip = false;  // flip left-right with probability 1/2
    float mean = 0.0f;             // output = (pixel/255 - mean) / std
    float std = 1.0f;
    uint64_t seed = 0;
};

// What one sample's augmentation does: shift the crop window and maybe mirror.
struct SampleTransform {
    int offset_y = 0;  // crop window start in padded coordinates, in [0, 2*padding]
    int offset_x = 0;
    bool flip = false;
};

constexpr uint64_t kAugmentStream = 0x4155474D454E54ull;  // "AUGMENT"

EMBER_DATA_HD inline SampleTransform sample_transform(const AugmentOptions& options, int64_t epoch,
                                                      int64_t sample_index) {
    SampleTransform t;
    uint64_t word = counter_random(options.seed, uint64_t(epoch), uint64_t(sample_index), kAugmentStream);
    if (options.crop_padding > 0) {
        uint32_t choices = uint32_t(2 * options.crop_padding + 1);
        t.offset_y = int(random_below(word, choices));
        t.offset_x = int(random_below(mix64(word ^ 1u), choices));
    } else {
        t.offset_y = 0;
        t.offset_x = 0;
    }
    t.flip = options.horizontal_flip && (mix64(word ^ 2u) & 1u) != 0;
    return t;
}

// Output pixel (c, y, x) of a sample whose source image is `source` (planar CHW uint8).
EMBER_DATA_HD inline float augmented_pixel(const uint8_t* source, int height, int width, int c, int y, int x,
                                           const SampleTransform& t, int padding, float mean, float inv_std) {
    int column = t.flip ? (width - 1 - x) : x;
    int source_y = y + t.offset_y - padding;
    int source_x = column + t.offset_x - padding;
    float value = 0.0f;  // zero padding (black), normalized like any other pixel
    if (source_y >= 0 && source_y < height && source_x >= 0 && source_x < width)
        value = float(source[(int64_t(c) * height + source_y) * width + source_x]) * (1.0f / 255.0f);
    return (value - mean) * inv_std;
}

// CPU: one sample, source CHW uint8 -> out CHW float.
void augment_sample_cpu(const uint8_t* source, int channels, int height, int width, const AugmentOptions& options,
                        int64_t epoch, int64_t sample_index, float* out);

}  // namespace ember::data

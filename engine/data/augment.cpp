// augment.cpp: the CPU loop over augmented_pixel for one sample.
#include "engine/data/augment.h"

namespace ember::data {

void augment_sample_cpu(const uint8_t* source, int channels, int height, int width, const AugmentOptions& options,
                        int64_t epoch, int64_t sample_index, float* out) {
    SampleTransform t = sample_transform(options, epoch, sample_index);
    float inv_std = 1.0f / options.std;
    for (int c = 0; c < channels; ++c)
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x)
                *out++ =
                    augmented_pixel(source, height, width, c, y, x, t, options.crop_padding, options.mean, inv_std);
}

}  // namespace ember::data

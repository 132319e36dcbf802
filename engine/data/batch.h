// batch.h: what the loader hands the training loop: one collated batch, float32 images
// NCHW normalized and int32 labels, in host staging memory (pinned when available) and,
// when the loader copies to a device, in device memory too. The memory belongs to one of
// the loader's staging slots and returns to it on DataLoader::release().
#pragma once

#include "engine/data/dataset.h"

#include <cstdint>

struct CUevent_st;

namespace ember::data {

struct Batch {
    int64_t epoch = 0;
    int64_t index = 0;  // position of this batch in its epoch
    int64_t size = 0;   // samples in this batch (the last one may be short)
    ImageShape shape;   // of one sample; images hold size * shape.pixels() floats

    const float* images = nullptr;            // host [size, C, H, W]; nullptr for GPU-resident batches
    const int32_t* labels = nullptr;          // host [size]
    const int64_t* sample_indices = nullptr;  // host [size]: which data set samples, in order
    bool pinned = false;                      // host arrays are page-locked

    // Device copies (nullptr when the loader does not copy to a device). Written on the
    // loader's own stream: the consumer makes its stream wait on `ready` before reading
    // (cudaStreamWaitEvent), so copies overlap the consumer's compute.
    const float* device_images = nullptr;
    const int32_t* device_labels = nullptr;
    CUevent_st* ready = nullptr;

    int slot = -1;  // the staging slot, for release()
};

}  // namespace ember::data

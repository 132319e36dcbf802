// gpu_resident.h: the GPU-resident mode. A small data set (Fashion-MNIST is 47 MB of
// uint8 pixels) is uploaded to the device once; each batch is then one index copy plus
// one kernel that gathers the batch's images and applies the same crop/flip/normalize
// as the CPU workers (augment.h's __host__ __device__ math). No decode, no H2D copy of
// pixels, no worker threads: the way the fastest MNIST/CIFAR training runs feed the GPU.
//
// gather_augment_cpu is the kernel's CPU twin: same arithmetic, used by the tests and
// equal to what DataLoader's workers produce for the same (seed, epoch, indices).
#pragma once

#include "engine/data/augment.h"
#include "engine/data/batch.h"
#include "engine/data/in_memory_dataset.h"
#include "engine/data/loader.h"
#include "engine/data/sampler.h"

#include <cstdint>
#include <memory>
#include <vector>

struct CUstream_st;

namespace ember::data {

// out_images[count, C, H, W] and out_labels[count] from pixels[N, C, H, W] and labels[N].
void gather_augment_cpu(const uint8_t* pixels, const int32_t* labels, ImageShape shape, const int64_t* indices,
                        int64_t count, const AugmentOptions& options, int64_t epoch, float* out_images,
                        int32_t* out_labels);

// The same on the device: every pointer is device memory; enqueued on `stream`.
void gather_augment_cuda(const uint8_t* pixels, const int32_t* labels, ImageShape shape, const int64_t* indices,
                         int64_t count, const AugmentOptions& options, int64_t epoch, float* out_images,
                         int32_t* out_labels, CUstream_st* stream);

class GpuResidentLoader {
  public:
    // Uploads the data set. Throws std::runtime_error("... no CUDA device ...") without one.
    GpuResidentLoader(const InMemoryDataset& dataset, std::shared_ptr<const Sampler> sampler, int64_t batch_size,
                      bool drop_last, AugmentOptions augment);
    ~GpuResidentLoader();
    GpuResidentLoader(const GpuResidentLoader&) = delete;
    GpuResidentLoader& operator=(const GpuResidentLoader&) = delete;

    void start_epoch(int64_t epoch);
    // Device-only batch (images/labels host pointers are nullptr; sample_indices is host).
    // The consumer's stream waits on batch->ready. nullptr at the end of the epoch.
    const Batch* next();
    void release(const Batch* batch, CUstream_st* consumer_stream = nullptr);

    // From the sampler, as DataLoader counts them: known before the first start_epoch
    // (the run sizes its schedule and its epochs from it).
    int64_t batches_per_epoch() const;
    size_t resident_bytes() const;
    LoaderStats stats() const { return stats_; }

  private:
    struct State;
    std::unique_ptr<State> state_;
    std::shared_ptr<const Sampler> sampler_;
    int64_t batch_size_;
    bool drop_last_;
    AugmentOptions augment_;
    ImageShape shape_;
    int64_t epoch_ = 0;
    std::vector<std::vector<int64_t>> batches_;
    int64_t next_batch_ = 0;
    LoaderStats stats_;
};

}  // namespace ember::data

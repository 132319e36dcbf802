// batch_source.h: one interface over the two ways batches arrive: the threaded
// DataLoader (host decode, pinned staging, H2D on its own stream) and the
// GpuResidentLoader (the whole data set on the device, gathered there).
#pragma once

#include "engine/data/batch.h"
#include "engine/data/loader.h"
#include "engine/train/config.h"

#include <cstdint>
#include <memory>
#include <string>

struct CUstream_st;

namespace ember::train {

class BatchSource {
  public:
    virtual ~BatchSource() = default;
    virtual void start_epoch(int64_t epoch) = 0;
    virtual const data::Batch* next() = 0;  // nullptr at the end of the epoch
    virtual void release(const data::Batch* batch, CUstream_st* consumer_stream) = 0;
    virtual int64_t batches_per_epoch() const = 0;
    virtual int64_t samples() const = 0;
    virtual double wait_seconds() const = 0;  // total time next() waited
    // Batches filled on the host and the CPU time they took (none for data on the GPU).
    virtual data::LoaderStats loader_stats() const { return {}; }
    virtual std::string describe() const = 0;
};

struct DataSources {
    std::unique_ptr<BatchSource> train;
    std::unique_ptr<BatchSource> test;
    int channels = 1, height = 28, width = 28, classes = 10;
    std::string note;  // a fallback the user should know about (no pinned memory, ...)
};

// Builds the train and test sources the config asks for. `on_device`: batches are
// copied to (or live on) the CUDA device. Throws ConfigError when the data set is
// missing (saying how to install it) and data::DataError for bad files.
// With world_size > 1 each rank trains on its shard (a DistributedSampler);
// evaluation uses the whole test set on every rank.
DataSources make_data_sources(const TrainConfig& config, int64_t batch_size, bool on_device, int rank = 0,
                              int world_size = 1);

}  // namespace ember::train

// data_parallel.h: distributed data parallel gradient synchronization (PyTorch DDP's
// scheme on ember's flat gradient buffer).
//
// The flat gradient buffer is cut into buckets of whole parameter tensors, filled in
// REVERSE registration order - the order backward finishes them: a small first bucket
// (1 MiB by default, so communication starts early) and then buckets of about
// `bucket_bytes` (25 MiB). Model::backward reports each layer as it finishes; as soon as
// every tensor of a bucket is final its all-reduce is launched (asynchronously: MPI's
// MPI_Iallreduce, or NCCL on the communication stream) and overlaps the rest of
// backward. finish_gradients() waits for every bucket and divides by the world size, so
// the buffer holds the gradient of the mean loss over the union batch.
//
// overlap=false launches every bucket only after backward (the same buckets, the same
// sums: parameters are bit-identical), so the gain of overlapping can be measured.
// On accumulation micro-batches (synchronize=false) nothing is communicated.
//
// reduction=reduce_scatter is ZeRO-1's half (see sharded_optimizer.h): after backward
// the whole buffer is reduce-scattered and each rank holds the averaged gradients of
// its own shard only.
//
// NVTX (domain "ember"): `allreduce/bucket` around each bucket's launch (payload: its
// bytes), `allreduce/wait` wherever compute waits for communication.
#pragma once

#include "engine/distributed/communicator.h"
#include "engine/nn/gradient_sync.h"
#include "engine/nn/model.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace ember::distributed {

enum class GradientReduction { all_reduce, reduce_scatter };

struct DataParallelOptions {
    std::size_t bucket_bytes = 25u << 20;
    std::size_t first_bucket_bytes = 1u << 20;
    bool overlap = true;
    GradientReduction reduction = GradientReduction::all_reduce;
};

// Elements [begin, end) of the flat gradient buffer; buckets tile the whole buffer
// (alignment gaps included) from its end down to 0.
struct GradientBucket {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t first_entry = 0;  // lowest parameter entry inside: ready once it is final
    std::size_t entry_count = 0;
    std::size_t bytes() const { return (end - begin) * sizeof(float); }
};

// Buckets for a parameter layout (exposed for tests).
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<nn::ParameterEntry>& entries,
                                                  std::size_t flat_length, std::size_t first_bucket_bytes,
                                                  std::size_t bucket_bytes);

// Elements [begin, end) of a flat buffer of `flat_length` that rank `rank` owns under
// ZeRO-1: equal shards of ceil(flat_length / world_size), the last one clipped.
struct Shard {
    std::size_t begin = 0, end = 0, padded_size = 0;
};
Shard shard_of(std::size_t flat_length, int rank, int world_size);

class DataParallel final : public nn::GradientSynchronizer {
  public:
    DataParallel(nn::Model& model, Communicator& communicator, const DataParallelOptions& options = {});
    ~DataParallel() override;

    // Rank 0's parameters and running state to every rank (call once before training).
    void broadcast_parameters();

    void begin_backward(bool synchronize) override;
    void layer_gradients_ready(std::size_t layer_index) override;
    void finish_gradients() override;
    nn::GradientRange final_gradients(std::size_t flat_length) const override;
    void sum_over_ranks(float* values, std::size_t count, void* stream) override;

    const std::vector<GradientBucket>& buckets() const { return buckets_; }
    const DataParallelOptions& options() const { return options_; }
    // Collectives launched so far (tests: none on accumulation micro-batches).
    int64_t collectives_launched() const { return collectives_launched_; }
    // Seconds the host has waited for gradient collectives so far (allreduce/wait).
    double wait_seconds() const { return wait_seconds_; }

  private:
    void launch_bucket(std::size_t index);
    void scale_gradients(std::size_t begin, std::size_t end, float factor);
    void* stream() const;

    nn::Model& model_;
    Communicator& communicator_;
    DataParallelOptions options_;
    std::vector<GradientBucket> buckets_;
    std::vector<std::unique_ptr<PendingCollective>> pending_;
    std::size_t next_bucket_ = 0;
    bool synchronizing_ = false;
    int64_t collectives_launched_ = 0;
    double wait_seconds_ = 0;
    nn::FlatBuffer padded_gradients_, shard_gradients_;  // reduce_scatter scratch
};

}  // namespace ember::distributed
